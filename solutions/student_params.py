"""Per-student numbers for the hand computations.

The numbers a student works with in a hand-computation part are derived from their student id
alone, deterministically, with nothing secret: the student's notebook carries a copy of
`student_rng` and of the assignment's `hand_inputs` (kept equal to these by the solution sync),
so the student and the grader always derive the same numbers. What keeps students from copying
is that their numbers differ; the right answers are computed only on the grader's side
(`hand_answers` in each assignment module).

Example::

    >>> from solutions.student_params import student_params
    >>> student_params("rmsnorm", "alice")            # doctest: +SKIP
    {'x': [...], 'gamma': [...]}
"""

import hashlib
import importlib
import random

def student_rng(assignment_id, student_id):
    """由作业名和学号得到一个确定的随机数生成器：同一个学号永远得到同一组数字。"""
    if not isinstance(student_id, str) or not student_id.strip():
        raise ValueError("学号 STUDENT_ID 不能为空：请在笔记本开头填写你的学号")
    digest = hashlib.sha256(f"{assignment_id}\n{student_id}".encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def student_params(assignment_id: str, student_id: str) -> dict:
    """The hand-computation inputs of `assignment_id` for `student_id` (what the notebook shows them)."""
    module = _module(assignment_id)
    if not callable(getattr(module, "hand_inputs", None)):
        raise ValueError(f"assignment_id: {assignment_id!r} has no hand computation (solutions/hand/{assignment_id}.py "
                         "defines no hand_inputs)")
    return module.hand_inputs(student_id)


def student_answers(assignment_id: str, student_id: str) -> dict:
    """The right hand-computation answers for `student_id` (grader side only, never in a notebook)."""
    inputs = student_params(assignment_id, student_id)
    return _module(assignment_id).hand_answers(inputs)


def _module(assignment_id: str):
    if not isinstance(assignment_id, str) or not assignment_id.isidentifier():
        raise ValueError(f"assignment_id: {assignment_id!r} is not an assignment id")
    try:
        return importlib.import_module(f"solutions.hand.{assignment_id}")  # no torch: the recording process's too
    except ModuleNotFoundError as error:
        if error.name != f"solutions.hand.{assignment_id}":
            raise
        raise ValueError(f"assignment_id: {assignment_id!r} has no hand computation (no module "
                         f"solutions/hand/{assignment_id}.py)") from None
