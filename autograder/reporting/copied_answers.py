"""Hand answers typed from a classmate's numbers: every student's hand computation uses their own numbers, so
answers that fit another student's numbers (and not their own) are evidence of copying, for the instructor.

    from autograder.reporting.copied_answers import find_borrowed_hand_answers
    found = find_borrowed_hand_answers(results, roster=["alice", "bob"])
"""

import functools
import math
from dataclasses import dataclass


from autograder import assignments
from autograder.assignments import has_hand
from autograder.results import STATUS_ERROR, CheckResult, SubmissionResult
from solutions.student_params import student_answers
from autograder.reporting.formatting import HAND_REL_TOL, assignment_order

# --- hand computations -----------------------------------------------------------------------------------


def is_hand_check(assignment_id: str, check: CheckResult) -> bool:
    """A check of a part the assignment's record declares a hand computation."""
    return assignments.is_hand_check(assignment_id, check.grade_id)


def _fits(typed, right) -> bool:
    """A typed answer fits a right answer: numbers within HAND_REL_TOL relative, strings exactly."""
    if isinstance(typed, str) or isinstance(right, str):
        return isinstance(typed, str) and isinstance(right, str) and typed == right
    if isinstance(typed, (list, tuple)) and isinstance(right, (list, tuple)):
        return len(typed) == len(right) and all(_fits(a, b) for a, b in zip(typed, right))
    numbers = (int, float)
    if isinstance(typed, bool) or isinstance(right, bool) or not (isinstance(typed, numbers) and isinstance(right, numbers)):
        return False
    if not (math.isfinite(typed) and math.isfinite(right)):
        return False
    return abs(typed - right) <= HAND_REL_TOL * max(abs(right), 1e-12)


@functools.lru_cache(maxsize=4096)
def _right_answers(assignment_id: str, student_id: str) -> dict | None:
    try:
        return student_answers(assignment_id, student_id)
    except Exception:  # an empty or odd student id
        return None


def _hand_checks_failed(result: SubmissionResult) -> bool:
    hand = [c for p in result.parts for c in p.checks if is_hand_check(result.assignment_id, c)]
    if hand:
        return not all(c.passed for c in hand)
    own = _right_answers(result.assignment_id, result.student_id) or {}
    return any(v is not None and not _fits(v, own.get(k)) for k, v in result.hand_answers.items())


@dataclass(frozen=True)
class BorrowedAnswers:
    """`student_id`'s typed hand answers fit `other_student_id`'s numbers (and not their own)."""

    assignment_id: str
    student_id: str
    other_student_id: str
    matched: tuple[str, ...]  # the answer names that fit the other student's numbers
    weak: bool  # only a choice letter matched: a chance fit is likely (about 1 in 4)

    @property
    def sentence(self) -> str:
        return f"{self.student_id}'s answers fit {self.other_student_id}'s numbers"

    @property
    def sentence_zh(self) -> str:
        return f"学生 {self.student_id} 的答案与学生 {self.other_student_id} 的参数吻合"


def find_borrowed_hand_answers(results: list[SubmissionResult], roster: list[str] | None = None) -> list[BorrowedAnswers]:
    """Submissions of a hand-computation assignment whose hand checks failed and whose typed answers fit
    another student's numbers (roster and results), within 5e-4 relative per number, strings exactly.

    A fit counts only when every answer the student typed fits the other student's right answers and at
    least one of them differs from the student's own right answer (otherwise it is no evidence).
    """
    others = sorted(set(roster or ()) | {r.student_id for r in results})
    found = []
    for result in sorted(results, key=lambda r: (assignment_order(r.assignment_id), r.student_id)):
        aid = result.assignment_id
        if not has_hand(aid) or result.status == STATUS_ERROR or not _hand_checks_failed(result):
            continue
        typed = {k: v for k, v in (result.hand_answers or {}).items() if v is not None}
        own = _right_answers(aid, result.student_id) or {}
        if not typed:
            continue
        for other in others:
            if other == result.student_id:
                continue
            theirs = _right_answers(aid, other)
            if theirs is None or not all(k in theirs and _fits(v, theirs[k]) for k, v in typed.items()):
                continue
            telling = [k for k, v in typed.items() if not (k in own and _fits(theirs[k], own[k]))]
            if not telling:
                continue
            weak = all(isinstance(typed[k], str) for k in telling)
            found.append(BorrowedAnswers(aid, result.student_id, other, tuple(sorted(typed)), weak))
    return found
