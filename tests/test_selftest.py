"""`autograde selftest`: 100% on this repository, and its verdicts would catch a wrong grader."""

import pytest

from autograder.tools import selftest
from autograder.checks.diagnosis import variants_of
from autograder.examples import Mistake, alternatives, mistakes
from autograder.results import CheckResult, PartResult, SubmissionResult
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()


# The selftest at 100%, both ways, on the whole corpus: tests/test_cell_skipping.py (one grading each way for both).


def test_selftest_both_ways_fails_on_a_result_that_differs(monkeypatch):
    """`--both-ways` exits 1 and names the submission when a result graded with every cell differs, though each run
    alone would be judged right."""
    def graded(submissions, tier=None, both_ways=False, limits=None, on_result=None):
        def result(s, score):
            checks = [CheckResult("c1", "p", score > 0, score, 1.0, "", "", {}, None)]
            return SubmissionResult(s.student_id, s.assignment_id, "graded", score, 1.0,
                                    [PartResult("p", score, 1.0, checks)])
        fast = [result(s, 1.0) for s in submissions]
        every = [result(s, 1.0) for s in submissions]
        every[0].parts[0].checks[0].diagnosis = "no_sqrt"  # differs check by check, same score
        return {False: fast, True: every}

    monkeypatch.setattr(selftest, "grade_plan", graded)
    monkeypatch.setattr(selftest, "judge", lambda job, result: selftest.Verdict(job, True))
    lines = []
    assert selftest.run_selftest(echo=lines.append, assignment_ids=["rmsnorm"], both_ways=True) == 1
    assert any(line.startswith("    DIFFERENT rmsnorm") for line in lines), lines
    assert lines[-1] == "selftest FAILED"
    lines.clear()
    assert selftest.run_selftest(echo=lines.append, assignment_ids=["rmsnorm"], both_ways=False) == 0
    assert lines[-1] == "selftest passed: 100%"


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_catalogue_is_complete(assignment_id):
    """At least six variants, every one exercised by a mistake example, and two alternative styles."""
    assert len(variants_of(assignment_id)) >= 6
    assert selftest.uncovered_variants(assignment_id) == []
    assert len(alternatives(assignment_id)) >= 2
    for m in mistakes(assignment_id):
        assert m.diagnosis is None or m.diagnosis in variants_of(assignment_id), m.name


def fake_result(checks: list[tuple[str, bool, str | None]], status="graded") -> SubmissionResult:
    results = [CheckResult(name, "part", ok, 1.0 if ok else 0.0, 1.0, "", "", {}, diagnosis) for name, ok, diagnosis
               in checks]
    score = sum(c.points for c in results)
    return SubmissionResult("s", "a", status, score, len(results), [PartResult("part", score, len(results), results)])


def job(kind, example=None):
    return selftest.Job("rmsnorm", kind, "x", None, example)


def test_judge_catches_a_wrong_grader():
    m = Mistake("m", "", (), frozenset({"c1"}), diagnosis="no_sqrt")  # partly wrong: c1 fails, c2 passes
    assert selftest.judge(job("mistake", m), fake_result([("c1", False, "no_sqrt"), ("c2", True, None)])).ok
    assert not selftest.judge(job("mistake", m), fake_result([("c1", False, None), ("c2", True, None)])).ok
    assert not selftest.judge(job("mistake", m), fake_result([("c1", False, "other"), ("c2", True, None)])).ok
    assert not selftest.judge(job("mistake", m), fake_result([("c1", True, None), ("c2", True, None)])).ok
    assert not selftest.judge(job("mistake", m), fake_result([("c1", False, "no_sqrt"), ("c2", False, None)])).ok
    assert not selftest.judge(job("alternative"), fake_result([("c1", True, None), ("c2", False, None)])).ok
    assert not selftest.judge(job("alternative"), fake_result([("c1", True, "no_sqrt")])).ok
    assert not selftest.judge(job("reference"), fake_result([("c1", True, None), ("c2", False, None)])).ok
    assert not selftest.judge(job("release"), fake_result([("c1", True, None)])).ok
    assert not selftest.judge(job("reference"), fake_result([], status="error")).ok
    # a check it may fail (for some student ids only): failing it or not is right, failing another is not
    m = Mistake("m", "", (), frozenset({"c1"}), may_fail=frozenset({"c2"}))
    three = [("c1", False, None), ("c2", True, None), ("c3", True, None)]
    assert selftest.judge(job("mistake", m), fake_result(three)).ok
    assert selftest.judge(job("mistake", m), fake_result([three[0], ("c2", False, None), three[2]])).ok
    assert not selftest.judge(job("mistake", m), fake_result([three[0], three[1], ("c3", False, None)])).ok
    assert not selftest.judge(job("mistake", m), fake_result([("c1", True, None), ("c2", False, None), three[2]])).ok


def test_pytest_on_the_product_collects_nothing():
    """The check modules are named autograder/checks/<id>.py: tools that look for tests do not take them for this
    project's own tests (the grader gives pytest each file by path)."""
    import subprocess
    import sys

    from autograder import REPO_ROOT

    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "autograder/"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 5, done.stdout[-2000:] + done.stderr[-2000:]  # 5: no tests collected
    assert "no tests collected" in done.stdout
