"""Grading the six assignments end to end: references full marks, release zero with a no-answer message,
another student's hand answers zero on those parts. (Catalogued mistakes and correct work in other styles
are graded by `autograde selftest`: tests/test_selftest.py.)

One batch per assignment (the checks are collected once per batch), under the strongest sandbox
tier this machine has (bubblewrap in CI).
"""

import nbformat
import pytest

from autograder.assignments import load_assignment
from autograder.engine import GradingOptions, Submission, grade_batch
from conftest import STUDENT_IDS, release_notebook, source_notebook
from grading_helpers import TEST_LIMITS, edited_notebook
from autograder.assignments import assignment_ids, has_hand
from solutions.student_params import student_answers

ASSIGNMENTS = assignment_ids()
HAND = tuple(a for a in ASSIGNMENTS if has_hand(a))

pytestmark = pytest.mark.slow


def other_students_hand_answers(assignment_id: str, graded_as: str) -> list[tuple[str, str]]:
    """Edits that type in the hand answers of another student (one whose answers differ from `graded_as`'s)."""
    mine = student_answers(assignment_id, graded_as)
    other = next(s for s in (f"classmate{i}" for i in range(100)) if student_answers(assignment_id, s) != mine)
    answers = student_answers(assignment_id, other)
    nb = nbformat.read(source_notebook(assignment_id), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")
                and all(f"{name} =" in c.source for name in answers))
    region = cell.source.split("### BEGIN SOLUTION\n", 1)[1].split("### END SOLUTION", 1)[0]
    return [(region, "".join(f"{name} = {value!r}\n" for name, value in answers.items()))]


@pytest.fixture(scope="module", params=ASSIGNMENTS)
def graded(request, tmp_path_factory):
    """Grade, in one batch: the reference for two ids, the untouched release, and (hand-computation
    assignments) the reference with another student's hand answers typed in."""
    assignment_id = request.param
    tmp = tmp_path_factory.mktemp(assignment_id)
    subs = {f"reference:{sid}": Submission(source_notebook(assignment_id), assignment_id, sid) for sid in STUDENT_IDS}
    subs["release"] = Submission(release_notebook(assignment_id), assignment_id, STUDENT_IDS[0])
    if assignment_id in HAND:
        edits = other_students_hand_answers(assignment_id, STUDENT_IDS[0])
        subs["copied_hand"] = Submission(edited_notebook(assignment_id, edits, tmp / "copied.ipynb"), assignment_id,
                                         STUDENT_IDS[0])
    results = grade_batch(list(subs.values()), GradingOptions(limits=TEST_LIMITS))
    return assignment_id, dict(zip(subs, results))


def test_reference_gets_full_marks_for_two_students(graded):
    assignment_id, results = graded
    for sid in STUDENT_IDS:
        result = results[f"reference:{sid}"]
        failed = [(c.name, c.message) for p in result.parts for c in p.checks if not c.passed]
        assert failed == [] and result.score == result.graded_max_score, f"{sid}: {failed}"
        assert all(p.score == p.max_score for p in result.parts if not p.pending)
        # a written answer waits for the instructor: no score from the checks, its points pending
        assert result.pending_points == sum(p.points for p in load_assignment(assignment_id).parts if p.written)


def test_release_gets_zero_with_a_no_answer_message(graded):
    assignment_id, results = graded
    result = results["release"]
    assert result.status == "graded" and result.score == 0
    for part in result.parts:
        for c in part.checks:
            assert not c.passed and ("还没有作答" in c.message or "未找到该题的答案" in c.message), (c.name, c.message)


def test_hand_answers_of_another_student_score_zero_on_those_parts(graded):
    assignment_id, results = graded
    if assignment_id not in HAND:
        pytest.skip("no hand computation in this assignment")
    result = results["copied_hand"]
    hand_parts = {p.grade_id for p in load_assignment(assignment_id).parts
                  if any("hand" in c or "choice" in c for c in p.answer_cells)}
    assert hand_parts
    for part in result.parts:
        if part.grade_id in hand_parts:
            assert part.score == 0, part
        elif not part.pending:
            assert part.score == part.max_score, part


def test_parts_match_the_source_notebook(graded):
    assignment_id, results = graded
    spec = load_assignment(assignment_id)
    result = results["reference:" + STUDENT_IDS[0]]
    assert [(p.grade_id, p.max_score) for p in result.parts] == [(p.grade_id, p.points) for p in spec.parts]


def test_the_grader_computes_on_one_thread_as_its_workers_do():
    """In-process grading (`autograde selftest`, these tests) runs the checks' torch work on one thread, as a
    worker process does (its OMP_NUM_THREADS=1): the same figures wherever a submission is graded."""
    import torch

    from autograder.engine import Grader

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grader = Grader(GradingOptions(limits=TEST_LIMITS))
        grader.close()
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
