"""`autograde bench`: grade a synthetic class end to end and print how fast, optionally next to nbgrader.

    autograde bench --students 200                 # 200 students x every assignment, the machine's cores
    autograde bench --students 20 --vs-nbgrader    # and `nbgrader autograde` on a subset, same run
    autograde bench --students 20 --both-ways      # with the demo cells skipped, then with --run-all-cells

The class is built like the demo class (autograder.tools.demo.build): per student and assignment one of
the reference answers, another correct style, a catalogued mistake, an unanswered notebook or a
corrupt file, each with the demo and plot cells real notebooks carry. Everything a real run does is
timed: references, diagnosis, gradebook, reports, feedback, exports.
"""

import resource
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import REPO_ROOT
from autograder.tools.demo.build import build_demo_course
from autograder.tools.demo.students import DemoStudent
from autograder.examples import mistakes
from autograder.recording.gradebook import run_nbgrader
from autograder.run import RunOptions, RunSummary, run_grading
from autograder.assignments import assignment_ids as course_assignments

# per ten students: five reference, one other style, two mistakes, one unanswered, one corrupt file
MIX = ("reference", "reference", "alternative", "reference", "mistake", "reference", "unanswered", "mistake",
       "reference", "broken")


def synthetic_class(students: int, assignment_ids: list[str]) -> tuple[DemoStudent, ...]:
    roster = []
    for i in range(students):
        work = {}
        for n, assignment_id in enumerate(assignment_ids):
            kind = MIX[(i + n) % len(MIX)]
            if kind == "alternative":
                kind = f"alternative:{i}"
            elif kind == "mistake":
                catalogue = mistakes(assignment_id)
                kind = f"mistake:{catalogue[i % len(catalogue)].name}"
            work[assignment_id] = kind
        roster.append(DemoStudent(f"bench{i:05d}", "测", f"试{i}", "synthetic (autograde bench)", work))
    return tuple(roster)


@dataclass
class BenchFigures:
    notebooks: int
    seconds: float  # wall clock of the whole run: grading, gradebook, reports, exports
    per_notebook: list[float]  # each submission's own grading time
    workers: int
    usage: list[dict]
    stages: list[dict] = None  # per notebook: seconds per stage (the engine's timings)
    assignments: list[str] = None  # per notebook: its assignment

    @property
    def rate(self) -> float:
        return self.notebooks / self.seconds if self.seconds else 0.0


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else 0.0


def run_ours(course_root: Path, out: Path, assignment_ids: list[str], workers: int, executor: str,
             tier: str | None, run_all_cells: bool = False) -> BenchFigures:
    started = time.monotonic()
    summary: RunSummary = run_grading(RunOptions(assignments=assignment_ids, submissions=course_root / "submitted",
                                                 out=out, force=True, workers=workers, executor=executor, tier=tier,
                                                 run_all_cells=run_all_cells),
                                      progress=True)
    seconds = time.monotonic() - started
    usage = summary.usage or [{"worker_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}]
    graded = [r for r in summary.results if r.assignment_id in assignment_ids]  # results holds all of OUT
    return BenchFigures(len(graded), seconds, [r.seconds for r in graded], workers, usage,
                        [dict(r.timings) for r in graded], [r.assignment_id for r in graded])


STAGES = ("read", "sandbox_start", "cells", "checks", "check_bugs", "close")


def print_stages(figures: BenchFigures) -> None:
    """Seconds per stage summed over the run, and the slowest 5% of notebooks against the median one."""
    rows = [(t, total) for t, total in zip(figures.stages or [], figures.per_notebook)]
    if not rows:
        return
    ordered = sorted(rows, key=lambda row: row[1])
    tail = ordered[-max(1, len(ordered) // 20):]
    median = ordered[len(ordered) // 2][0]
    print(f"  per stage        {'summed':>9} {'median nb':>10} {'slowest 5% (mean)':>18}")
    for stage in STAGES + ("other",):
        def value(timings, seconds):
            known = sum(timings.get(s, 0.0) for s in STAGES)
            return max(seconds - known, 0.0) if stage == "other" else timings.get(stage, 0.0)
        summed = sum(value(t, sec) for t, sec in rows)
        med = value(median, ordered[len(ordered) // 2][1])
        slow = statistics.mean(value(t, sec) for t, sec in tail)
        print(f"    {stage:<14} {summed:>8.1f}s {med:>9.3f}s {slow:>17.3f}s")
    print("    (recording in this process, not per notebook: the wall clock minus the workers' share)")


def print_ours(figures: BenchFigures, students: int, assignment_ids: list[str], executor: str, label: str) -> None:
    print(f"\nautograde{label}: {figures.notebooks} notebooks ({students} students x {len(assignment_ids)} assignments) "
          f"in {figures.seconds:.1f} s with {figures.workers} {executor} worker(s), everything included")
    print(f"  throughput       {figures.rate:.2f} notebooks/s")
    print(f"  per notebook     median {statistics.median(figures.per_notebook):.3f} s, "
          f"p95 {_percentile(figures.per_notebook, 0.95):.3f} s")
    for n, usage in enumerate(figures.usage):
        parts = [f"worker {usage.get('worker_maxrss_kib', 0) / 1024:.0f} MiB"]
        if "zygote_maxrss_kib" in usage:
            parts.append(f"warm sandbox parent {usage['zygote_maxrss_kib'] / 1024:.0f} MiB")
        if "sandbox_maxrss_kib" in usage:
            parts.append(f"largest sandbox {usage['sandbox_maxrss_kib'] / 1024:.0f} MiB")
        print(f"  peak RSS #{n + 1}      " + ", ".join(parts))
    print_stages(figures)
    if figures.assignments:
        print(f"  per assignment   {'median':>8} {'p95':>8}  notebooks in the slowest 5%")
        cut = sorted(figures.per_notebook)[-max(1, len(figures.per_notebook) // 20)]
        for a in dict.fromkeys(figures.assignments):
            mine = [sec for sec, b in zip(figures.per_notebook, figures.assignments) if b == a]
            slow = sum(1 for sec in mine if sec >= cut)
            print(f"    {a:<14} {statistics.median(mine):>7.3f}s {_percentile(mine, 0.95):>7.3f}s  {slow}")


def nbgrader_subset(expected: dict, count: int) -> list[tuple[str, str]]:
    """About `count` readable notebooks, the same number from each assignment (at least one each)."""
    readable = [key for key, outcome in expected.items() if outcome != "error"]
    by_assignment = {}
    for key in readable:
        by_assignment.setdefault(key[1], []).append(key)
    each = max(1, -(-count // max(len(by_assignment), 1)))
    picked = []
    for keys in by_assignment.values():
        step = max(1, len(keys) // each)
        picked += keys[::step][:each]
    return picked


def run_nbgrader_autograde(course_root: Path, work: Path, subset: list[tuple[str, str]]) -> tuple[int, float]:
    """`nbgrader autograde` on `subset` ((student, assignment) pairs) in a course of its own; (notebooks, seconds)."""
    nb_course = work / "nbgrader-course"
    shutil.rmtree(nb_course, ignore_errors=True)
    nb_course.mkdir(parents=True)
    (nb_course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(nb_course)!r}\n"
        "c.CourseDirectory.source_directory = 'source'\n"
        "c.CourseDirectory.ignore = ['.ipynb_checkpoints', '*.pyc', '__pycache__', 'feedback']\n",
        encoding="utf-8")
    def nbgrader(*args: str) -> None:
        done = run_nbgrader([*args, "--log-level=WARN"], nb_course)
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} failed: {done.stderr[-1500:]}")

    assignment_ids = sorted({a for _, a in subset})
    for assignment_id in assignment_ids:
        shutil.copytree(REPO_ROOT / "assignments" / assignment_id, nb_course / "source" / assignment_id)
        nbgrader("generate_assignment", assignment_id, "--force")
    for student_id in sorted({s for s, _ in subset}):
        nbgrader("db", "student", "add", student_id)
    for student_id, assignment_id in subset:
        shutil.copytree(course_root / "submitted" / student_id / assignment_id,
                        nb_course / "submitted" / student_id / assignment_id)
    started = time.monotonic()
    for assignment_id in assignment_ids:  # one batch per assignment, as an instructor runs it
        nbgrader("autograde", assignment_id, "--force")
    return len(subset), time.monotonic() - started


def bench(students: int = 20, assignment_ids: list[str] | None = None, workers: int = 1, executor: str = "local",
          vs_nbgrader: bool = False, nbgrader_subset_size: int = 12, tier: str | None = None,
          keep: Path | None = None, run_all_cells: bool = False, both_ways: bool = False) -> int:
    assignment_ids = assignment_ids or list(course_assignments())
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="autograde-bench-"))
    try:
        course = build_demo_course(work / "course", synthetic_class(students, assignment_ids))
        runs = [(" (demo cells run)" if run_all_cells else "", run_all_cells)] if not both_ways else \
            [(" (unchanged demo cells skipped)", False), (" (every cell run, --run-all-cells)", True)]
        figures = []
        for n, (label, run_all) in enumerate(runs):
            ours = run_ours(course.root, work / f"out{n}", assignment_ids, workers, executor, tier, run_all)
            print_ours(ours, students, assignment_ids, executor, label)
            figures.append((label, ours))
        if vs_nbgrader:
            subset = nbgrader_subset(course.expected, nbgrader_subset_size)
            count, seconds = run_nbgrader_autograde(course.root, work, subset)
            rate = count / seconds
            per = {a: sum(1 for _, b in subset if b == a) for a in assignment_ids}
            print(f"nbgrader autograde: {count} of the same notebooks ({', '.join(f'{a} {n}' for a, n in per.items())}) "
                  f"in {seconds:.1f} s: {rate:.3f} notebooks/s ({seconds / count:.2f} s a notebook)")
            for label, ours in figures:
                print(f"  ratio{label:<36} autograde is {ours.rate / rate:.1f}x nbgrader autograde's notebooks/s")
        return 0
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
