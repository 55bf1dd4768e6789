"""`autograde selftest`: the grader grades what it knows the answer to, and says whether it was right.

Every reference notebook (assignments/) must get full marks, for two student ids, and every
release notebook (release/) must get zero. Exit status 1 if the grader is wrong anywhere.
"""

from autograder import REPO_ROOT
from autograder.engine import GradingOptions, Submission, grade_batch
from solutions import ASSIGNMENTS

SELFTEST_IDS = ("selftest-alice", "2024000000")


def reference_path(assignment_id: str):
    return REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb"


def release_path(assignment_id: str):
    return REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb"


def run_selftest(tier: str | None = None, echo=print) -> int:
    subs, expectations = [], []
    for a in ASSIGNMENTS:
        for sid in SELFTEST_IDS:
            subs.append(Submission(reference_path(a), a, sid))
            expectations.append((a, f"reference ({sid})", "full"))
        subs.append(Submission(release_path(a), a, SELFTEST_IDS[0]))
        expectations.append((a, "release (unanswered)", "zero"))
    results = grade_batch(subs, GradingOptions(tier=tier))
    wrong = 0
    echo(f"{'assignment':<14} {'notebook':<28} {'score':>11}  expected  verdict")
    for (a, what, expected), r in zip(expectations, results):
        ok = (r.score == r.max_score) if expected == "full" else (r.score == 0 and r.status == "graded")
        wrong += not ok
        echo(f"{a:<14} {what:<28} {r.score:>5g}/{r.max_score:<5g}  {expected:<8}  {'ok' if ok else 'WRONG'}")
        if not ok:
            for p in r.parts:
                for c in p.checks:
                    if (expected == "full") != c.passed:
                        echo(f"    {c.grade_id}/{c.name}: {c.message}")
    echo(f"sandbox tier: {results[0].tier}")
    echo(f"{len(results) - wrong}/{len(results)} as expected" + ("" if not wrong else f"; {wrong} WRONG"))
    return 1 if wrong else 0
