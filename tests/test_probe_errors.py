"""An exception raised inside a probe may carry the hidden inputs (f"x={x.tolist()}"): the report shows its type,
the line in the student's cell, and the message with every number and bracketed sequence replaced by "…"."""

import json
import re

import pytest

from autograder.engine import GradingOptions, grade_submission
from autograder.checks.probes import scrubbed
from grading_helpers import TEST_LIMITS, edited_notebook

RETURN_LINE = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"
LEAK = "raise ValueError(f'bad input x={x.tolist()} gamma={gamma.tolist()} eps={eps} shape={tuple(x.shape)}')"


@pytest.mark.parametrize("message, shown", [
    ("x=[[0.25, -1.5e-3], [7, 8]] ok", "x=… ok"),
    ("shape (2, 3, 4) vs {1: 2}", "shape … vs …"),
    ("value 0.123456789 and -42 and 3e8 and nan", "value … and … and … and …"),
    ("no numbers here", "no numbers here"),
])
def test_scrubbed_messages(message, shown):
    assert scrubbed(message) == shown


def test_scrubbed_is_short():
    assert len(scrubbed("word " * 100)) <= 120


def test_a_probe_exception_shows_none_of_the_inputs_digits(tmp_path):
    notebook = edited_notebook("rmsnorm", [(RETURN_LINE, LEAK)], tmp_path / "rmsnorm.ipynb")
    result = grade_submission(notebook, "rmsnorm", "alice", GradingOptions(limits=TEST_LIMITS))
    failed = [c for p in result.parts for c in p.checks if not c.passed and "ValueError" in c.message]
    assert failed, [c.message for p in result.parts for c in p.checks]
    for check in failed:
        where = re.search(r"（第 (\d+) 个单元格第 (\d+) 行：([^）]*)）", check.message)
        assert where and "raise ValueError" in where.group(3), check.message
        rest = check.message.replace(where.group(0), "")
        assert not re.search(r"\d", rest), check.message  # no digit of the inputs, eps or shapes
        stored = json.dumps(check.details, ensure_ascii=False)
        assert not re.search(r"\d", stored.replace(where.group(0)[1:-1], "")), stored
