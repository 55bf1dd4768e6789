"""`autograde selftest`: the grader grades what it knows the answer to, and says whether it was right.

- every reference notebook (assignments/) gets full marks, for two student ids;
- every release notebook (release/) gets zero;
- every catalogued mistake (autograder/examples: the reference notebook with the mistake in place) loses
  exactly its expected checks, and the failing checks name exactly its variant of the catalogue
  (VARIANTS in autograder/checks/<id>.py); every variant of the catalogue has such an example;
- every correct alternative style gets full marks and no diagnosis;
- every precision case (a right algorithm with float32 internals on float64 inputs) loses exactly the parts'
  precision checks, is named as the precision (float32_precision) and nothing else, and keeps >= 85%.

It prints a table (variants caught and named / total, alternatives accepted / total) and exits 1
below 100% anywhere. With `--both-ways` it grades everything twice, with the unchanged demo cells skipped (as
`autograde grade` does) and with every cell run (`--run-all-cells`): both at 100%, and every result the same check
by check, or it exits 1 and lists the submissions that differ.
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import REPO_ROOT
from autograder.catalogue import variants_of
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.catalogue import PRECISION
from autograder.examples import (Alternative, Mistake, PrecisionCase, alternatives, mistakes, notebook_with_edits,
                                 precision_cases)
from autograder.results import SubmissionResult
from autograder.assignments import assignment_ids as course_assignments

SELFTEST_IDS = ("selftest-alice", "2024000000")


def reference_path(assignment_id: str) -> Path:
    return REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb"


def release_path(assignment_id: str) -> Path:
    return REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb"


@dataclass(frozen=True)
class Job:
    assignment_id: str
    kind: str  # "reference", "release", "mistake", "alternative", "precision"
    label: str
    submission: Submission
    example: Mistake | Alternative | PrecisionCase | None = None


@dataclass(frozen=True)
class Verdict:
    job: Job
    ok: bool
    why: str = ""


def plan(workdir: Path, assignment_ids=None) -> list[Job]:
    jobs = []
    for a in assignment_ids or course_assignments():
        for sid in SELFTEST_IDS:
            jobs.append(Job(a, "reference", f"reference ({sid})", Submission(reference_path(a), a, sid)))
        jobs.append(Job(a, "release", "release (unanswered)", Submission(release_path(a), a, SELFTEST_IDS[0])))
        for kind, examples in (("mistake", mistakes(a)), ("alternative", alternatives(a)),
                               ("precision", precision_cases(a))):
            for example in examples:
                path = workdir / a / f"{kind}-{example.name}.ipynb"
                path.parent.mkdir(parents=True, exist_ok=True)
                nbformat.write(notebook_with_edits(a, example.edits), path)
                # correct work must be right for any student; one id is enough to show a mistake is named
                for sid in SELFTEST_IDS if kind == "alternative" else SELFTEST_IDS[:1]:
                    jobs.append(Job(a, kind, f"{example.name} ({sid})", Submission(path, a, sid), example))
    return jobs


def judge(job: Job, result: SubmissionResult) -> Verdict:
    checks = [c for p in result.parts for c in p.checks]
    failed = {c.name for c in checks if not c.passed}
    named = {c.diagnosis for c in checks if c.diagnosis}
    if result.status != "graded":
        return Verdict(job, False, f"status {result.status}: {result.message}")
    if job.kind == "reference":
        return Verdict(job, result.score == result.graded_max_score, f"lost {sorted(failed)}")
    if job.kind == "release":
        return Verdict(job, result.score == 0, f"scored {result.score}")
    if job.kind == "alternative":
        ok = result.score == result.graded_max_score and not named
        return Verdict(job, ok, f"lost {sorted(failed)}, named {sorted(named)}")
    if job.kind == "precision":
        case: PrecisionCase = job.example
        ok = failed == set(case.failing) and named == {PRECISION.name} and result.score >= 0.85 * result.max_score
        return Verdict(job, ok, f"failed {sorted(failed)} (expected {sorted(case.failing)}), named {sorted(named)}, "
                                f"score {result.score:g} of {result.max_score:g}")
    mistake: Mistake = job.example
    if not 0 < result.score < result.graded_max_score:  # the written answer, graded by hand, is not the checks'
        return Verdict(job, False, f"score {result.score} is not strictly between 0 and {result.graded_max_score}")
    if not mistake.judged(failed):
        may = f" (and may fail {sorted(mistake.may_fail)})" if mistake.may_fail else ""
        return Verdict(job, False, f"failed {sorted(failed)}, expected {sorted(mistake.failing)}{may}")
    if mistake.diagnosis and named != {mistake.diagnosis}:
        return Verdict(job, False, f"named {sorted(named) or 'nothing'}, expected {mistake.diagnosis}")
    if not mistake.diagnosis and named:
        return Verdict(job, False, f"named {sorted(named)} for a mistake outside the catalogue")
    return Verdict(job, True)


def uncovered_variants(assignment_id: str) -> list[str]:
    """Catalogued variants that no mistake example exercises (the selftest could not show they are named)."""
    covered = {m.diagnosis for m in mistakes(assignment_id)} | ({PRECISION.name} if precision_cases(assignment_id)
                                                                 else set())
    return sorted(set(variants_of(assignment_id)) - covered)


def report(verdicts: list[Verdict], assignment_ids, echo) -> bool:
    all_ok = True
    echo(f"{'assignment':<14} {'references':>10} {'release':>8} {'variants caught+named':>22} {'alternatives':>13} "
         f"{'precision':>10}")
    for a in assignment_ids:
        mine = [v for v in verdicts if v.job.assignment_id == a]

        def count(kind, only=None):
            vs = [v for v in mine if v.job.kind == kind and (only is None or only(v))]
            return sum(v.ok for v in vs), len(vs)

        ref, rel, alt, pre = count("reference"), count("release"), count("alternative"), count("precision")
        catalogue = variants_of(a)
        per_variant = []
        for name in catalogue:
            if name == PRECISION.name:
                per_variant.append(pre[1] > 0 and pre[0] == pre[1])
                continue
            examples = [v for v in mine if v.job.kind == "mistake" and v.job.example.diagnosis == name]
            per_variant.append(bool(examples) and all(v.ok for v in examples))
        var = (sum(per_variant), len(per_variant))
        other = count("mistake", lambda v: not v.job.example.diagnosis)
        row_ok = ref[0] == ref[1] and rel[0] == rel[1] and var[0] == var[1] and alt[0] == alt[1] \
            and other[0] == other[1] and alt[1] >= 2 and pre[0] == pre[1]
        all_ok &= row_ok
        echo(f"{a:<14} {ref[0]:>4}/{ref[1]:<5} {rel[0]:>3}/{rel[1]:<4} {var[0]:>11}/{var[1]:<10} "
             f"{alt[0]:>6}/{alt[1]:<6} {pre[0]:>4}/{pre[1]:<5} {'ok' if row_ok else 'WRONG'}")
        for name in uncovered_variants(a):
            echo(f"    variant {name}: no mistake example exercises it")
        if alt[1] < 2:
            echo(f"    {a}: {alt[1]} alternative style(s) catalogued; the self-test asks for at least 2 "
                 "(autograder/examples/{a}.py, ALTERNATIVES)".replace("{a}", a))
    for v in verdicts:
        if not v.ok:
            echo(f"    WRONG {v.job.assignment_id} {v.job.kind} {v.job.label}: {v.why}")
    return all_ok


def grade_plan(submissions: list[Submission], tier: str | None = None, both_ways: bool = False,
               limits=None, on_result=None) -> dict[bool, list[SubmissionResult]]:
    """The results of `submissions`, graded as the CLI grades (unchanged demo cells skipped), and with `both_ways`
    also with every cell run (--run-all-cells): {run_all_cells: results}. `on_result`: called with each result."""
    extra = {} if limits is None else {"limits": limits}
    return {run_all: grade_batch(submissions, GradingOptions(tier=tier, run_all_cells=run_all, **extra), on_result)
            for run_all in ((False, True) if both_ways else (False,))}


def differences(submissions: list[Submission], runs: dict[bool, list[SubmissionResult]]) -> list[str]:
    """The submissions whose results differ, check by check, with the demo cells skipped and with every cell run."""
    return [f"{s.assignment_id} {s.notebook.name} ({s.student_id}): scored {a.score:g} skipping, {b.score:g} with "
            f"every cell" for s, a, b in zip(submissions, runs[False], runs[True]) if a.identity() != b.identity()]


def run_selftest(tier: str | None = None, echo=print, assignment_ids=None, both_ways: bool = False,
                 progress: bool = False, progress_interval: float | None = None) -> int:
    """Grade the plan and report; with `both_ways`, grade it also with every cell run: both must be at 100% and
    every result the same check by check (the skipping of unchanged demo cells is a fast path, shown to grade the
    examples as every cell run does).
    `progress`: a bar on a terminal, else a line every `progress_interval` seconds (autograder.progress)."""
    from autograder.progress import Progress

    with tempfile.TemporaryDirectory(prefix="autograde-selftest-") as tmp:
        assignment_ids = assignment_ids or course_assignments()
        jobs = plan(Path(tmp), assignment_ids)
        with Progress(len(jobs) * (2 if both_ways else 1), "selftest", progress_interval, enabled=progress) as advance:
            runs = grade_plan([j.submission for j in jobs], tier, both_ways,
                              on_result=lambda r: advance(f"{r.assignment_id} {r.student_id}"))
    ok = True
    for run_all, results in runs.items():
        if both_ways:
            echo("with every cell run (--run-all-cells):" if run_all else "with the unchanged demo cells skipped:")
        verdicts = [judge(j, r) for j, r in zip(jobs, results)]
        ok &= report(verdicts, assignment_ids, echo)
        echo(f"sandbox tier: {results[0].tier}; {sum(v.ok for v in verdicts)}/{len(verdicts)} submissions graded "
             "as expected")
    if both_ways:
        different = differences([j.submission for j in jobs], runs)
        for line in different:
            echo(f"    DIFFERENT {line}")
        echo(f"graded the same both ways: {len(jobs) - len(different)}/{len(jobs)}")
        ok &= not different
    echo("selftest passed: 100%" if ok else "selftest FAILED")
    return 0 if ok else 1
