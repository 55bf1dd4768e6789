"""The practice attempts' hidden inputs: a seed domain of their own.

The final grading draws a student's hidden inputs from HMAC(course secret, assignment + student id)
(autograder.course.student_seed). The service never holds the course secret: it is given the practice secret,
HMAC(course secret, PRACTICE_LABEL), printed once by `autograde practice-secret`. Each attempt's inputs come from
HMAC(practice secret, rotation label) in place of the course secret, so that

- nothing the service grades on is an input of the final grading (another key of the same HMAC), and
- the inputs change per attempt, per day, or never (c.AutogradeService.practice_inputs), so that many attempts do
  not add up to a table of one set of inputs.

The hand computations' numbers are the student's own (solutions/student_params.py, from the student id alone): they
do not change, which is why the service by default says of a hand part only whether it is answered.
"""

import hashlib
import hmac
from datetime import date

PRACTICE_LABEL = b"autograde practice inputs v1"
ROTATIONS = ("attempt", "day", "fixed")


def practice_secret(course_secret: bytes) -> bytes:
    """The service's secret: one-way from the course secret (hex, as the course secret is)."""
    return hmac.new(course_secret, PRACTICE_LABEL, hashlib.sha256).hexdigest().encode()


def attempt_secret(practice: bytes, rotation: str, number: int, day: date) -> bytes:
    """The secret an attempt's hidden inputs are drawn with: per attempt (its number for this student and
    assignment), per day (the service's local day) or fixed."""
    if rotation == "attempt":
        label = f"attempt {number}"
    elif rotation == "day":
        label = f"day {day.isoformat()}"
    elif rotation == "fixed":
        label = "fixed"
    else:
        raise ValueError(f"unknown rotation {rotation!r}; choose one of {', '.join(ROTATIONS)}")
    return hmac.new(practice, label.encode(), hashlib.sha256).hexdigest().encode()
