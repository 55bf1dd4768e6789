"""An exception raised inside a probe may carry the hidden inputs (f"x={x.tolist()}", or the same values spelled
in words): the report shows its type, the line in the student's cell, and its message only when it is one of
torch's shape or dtype errors, written again by the grader from sizes it can account for and dtype names;
any other message is withheld with a fixed sentence (autograder.checks.exception_text)."""

import json
import re

import pytest
import torch

from autograder.checks.exception_text import (UNKNOWN_TYPE, WITHHELD, known_type, shown_message,
                                              shown_shape_mismatch, sizes_of)
from autograder.engine import GradingOptions, grade_submission
from autograder.reporting.student_page import render_report
from grading_helpers import TEST_LIMITS, edited_notebook

RETURN_LINE = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"
LEAK = "raise ValueError(f'bad input x={x.tolist()} gamma={gamma.tolist()} eps={eps} shape={tuple(x.shape)}')"
# the hidden inputs spelled with letters: no digit, no bracket (the old scrub let this through whole)
WORDS = ("one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "zero")
SPELLED = ("SPELLED = {'0': 'zero', '1': 'one', '2': 'two', '3': 'three', '4': 'four', '5': 'five', '6': 'six', "
           "'7': 'seven', '8': 'eight', '9': 'nine', '.': 'point', '-': 'minus', 'e': 'exp'}\n"
           "def spell(values):\n"
           "    return ' and '.join(' '.join(SPELLED.get(ch, 'x') for ch in repr(v)) for v in values)\n")
# raised on the hidden inputs only: the demo cell's public [[1, 3, 5, 7]] (which runs when the notebook is graded
# again with every cell) gets its x back, so what a report shows of a cell's own error is not what is tested here
LEAK_IN_WORDS = ("if tuple(x.shape) == (1, 4):\n        return x\n"
                 "    raise ValueError('LEAK' + 'WORDS ' + spell(x.flatten().tolist()[:20]) + ' eps ' + spell([eps]))")
SHAPE_ERROR = "return x.reshape(-1, x.shape[-1]) @ gamma.reshape(1, -1)"  # (N x d) @ (1 x d): a real shape error


def torch_message(fn) -> str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the message is the point
        return str(exc)
    raise AssertionError("no error")


X = torch.ones(3, 5, 24)


@pytest.mark.parametrize("make, values", [
    (lambda: X.reshape(-1, 24) @ torch.ones(1, 24), (X, torch.ones(24))),
    (lambda: torch.ones(3, 4) + torch.ones(3, 5), (torch.ones(3, 4), torch.ones(3, 5))),
    (lambda: torch.ones(3, 4).double() @ torch.ones(4, 2), (torch.ones(3, 4), torch.ones(4, 2))),
    (lambda: torch.nn.functional.linear(torch.ones(3, 4).double(), torch.ones(2, 4)), (torch.ones(3, 4),)),
    (lambda: torch.ones(3, 4).view(5, 3), (torch.ones(3, 4), 5)),
    (lambda: torch.ones(3, 4).sum(dim=3), (torch.ones(3, 4),)),
    (lambda: torch.cat([torch.ones(3, 4), torch.ones(2, 5)]), (torch.ones(3, 4), torch.ones(2, 5))),
    (lambda: torch.ones(3).backward(), ()),
])
def test_torch_shape_and_dtype_errors_are_shown_as_torch_says_them(make, values):
    message = torch_message(make)
    assert shown_message(message, sizes_of(*values)) == message


def test_a_size_the_grader_cannot_account_for_is_a_question_mark():
    forged = "The size of tensor a (125) must match the size of tensor b (4) at non-singleton dimension 1"
    assert shown_message(forged, sizes_of(torch.ones(3, 4))) == (
        "The size of tensor a (?) must match the size of tensor b (4) at non-singleton dimension 1")
    assert shown_message("shape '[125, 3]' is invalid for input of size 12", sizes_of(torch.ones(3, 4))) == (
        "shape '[?, 3]' is invalid for input of size 12")
    assert shown_message("expected scalar type one point two five but found Float", frozenset()) == WITHHELD


@pytest.mark.parametrize("message", [
    "bad input x=[[0.25, -1.5e-3], [7, 8]]", "one point two five and minus three", "no numbers here", "",
    "mat1 and mat2 shapes cannot be multiplied (15x24 and 1x24) one point two five",  # a template with a tail
    "The size of tensor a (4) must match the size of tensor b (5) at non-singleton dimension 1 or five",
])
def test_any_other_message_is_withheld(message):
    assert shown_message(message, sizes_of(torch.ones(15, 24), torch.ones(4, 5))) == WITHHELD


def test_exception_types_are_shown_only_when_they_are_python_or_torch_names():
    assert known_type("RuntimeError") == "RuntimeError" and known_type("ValueError") == "ValueError"
    assert known_type("one_point_two_five") == UNKNOWN_TYPE and known_type("OnePointTwoFive") == UNKNOWN_TYPE


def test_the_runners_shape_mismatch_is_written_again_or_not_at_all():
    assert shown_shape_mismatch("[3, 5] vs [3, 4]") == "[3, 5] vs [3, 4]"
    assert shown_shape_mismatch("[3, 5] vs one point two five") is None


def grade(tmp_path, name, edits, cells=()):
    notebook = edited_notebook("rmsnorm", edits, tmp_path / name / "rmsnorm.ipynb", extra_cells=list(cells))
    result = grade_submission(notebook, "rmsnorm", "alice", GradingOptions(limits=TEST_LIMITS))
    return result, json.dumps(result.to_dict(), ensure_ascii=False), render_report(result)


def test_a_probe_exception_shows_none_of_the_inputs_digits(tmp_path):
    result, _, _ = grade(tmp_path, "digits", [(RETURN_LINE, LEAK)])
    failed = [c for p in result.parts for c in p.checks if not c.passed and "ValueError" in c.message]
    assert failed, [c.message for p in result.parts for c in p.checks]
    for check in failed:
        where = re.search(r"（第 (\d+) 个单元格第 (\d+) 行：([^）]*)）", check.message)
        assert where and "raise ValueError" in where.group(3), check.message
        rest = check.message.replace(where.group(0), "")
        assert not re.search(r"\d", rest), check.message  # no digit of the inputs, eps or shapes
        assert WITHHELD in rest and "bad input" not in rest, check.message
        stored = json.dumps(check.details, ensure_ascii=False)
        assert not re.search(r"\d", stored.replace(where.group(0)[1:-1], "")), stored


def test_hidden_values_spelled_in_words_never_reach_the_report(tmp_path):
    result, stored, page = grade(tmp_path, "words", [(RETURN_LINE, LEAK_IN_WORDS)], [(3, SPELLED)])
    failed = [c for p in result.parts for c in p.checks if not c.passed and "ValueError" in c.message]
    assert failed, [c.message for p in result.parts for c in p.checks]
    assert all(WITHHELD in c.message for c in failed), [c.message for c in failed]
    for text in (stored, page):
        assert "LEAKWORDS" not in text  # the source line shown says 'LEAK' + 'WORDS': the message would say LEAKWORDS
        assert not re.search(r"\b(?:one|two|three|four|five|six|seven|eight|nine|zero) (?:point|and)\b", text)


def test_an_answer_too_large_to_send_is_said_as_such_not_as_a_crash(tmp_path):
    """A hand answer of 4 million numbers: its reply (12 MB of JSON) is refused by the grader. Nothing exited or
    crashed, and the student reads that: the value could not be taken back, too large or not of the protocol."""
    result, _, page = grade(tmp_path, "large", [], [(-1, "rms = [1] * 4_000_000")])
    failed = {c.name: c.message for p in result.parts for c in p.checks if not c.passed}
    assert "没能取回" in failed.get("test_hand_rms", "") and "值太大" in failed["test_hand_rms"], failed
    assert not any("崩溃" in m or "退出" in m for m in failed.values()), failed
    assert result.hand_answers["rms"] is None and "没能取回" in page


def test_a_cell_whose_reply_is_refused_is_not_said_to_have_crashed(tmp_path):
    """A cell that writes a forged frame (a 2 GB length) on the reply channel: the grader refuses the reply; the
    student reads that, not "the process exited abnormally"."""
    from hostile.corpus import FORGERY

    cell = FORGERY.replace("@@MARKER_DIR@@", str(tmp_path)) + "\n_forge(FORGED['oversized'])"
    result, _, page = grade(tmp_path, "forged_cell", [], [(-1, cell)])
    failed = [c for c in result.cells if not c.ok]
    assert [c.error_type for c in failed] == ["Refused"], [(c.error_type, c.error_message) for c in failed]
    assert "回复被拒绝" in page and "崩溃" not in page


def test_a_real_shape_error_still_shows_a_useful_message(tmp_path):
    result, _, page = grade(tmp_path, "shape", [(RETURN_LINE, SHAPE_ERROR)])
    failed = [c for p in result.parts for c in p.checks if not c.passed and "RuntimeError" in c.message]
    assert failed, [c.message for p in result.parts for c in p.checks]
    shown = [re.search(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and 1x(\d+)\)", c.message)
             for c in failed]
    assert all(shown), [c.message for c in failed]
    assert all(m.group(2) == m.group(3) for m in shown), [c.message for c in failed]
    assert "mat1 and mat2 shapes cannot be multiplied" in page


def test_a_type_name_the_student_chose_is_not_shown():
    from autograder.checks.probes import UNKNOWN_OTHER_TYPE, describe_value
    from autograder.running.sandbox.wire import Unsupported

    assert describe_value(Unsupported("numpy.ndarray")) == "numpy.ndarray"
    assert describe_value(Unsupported("__main__.one_point_two_five")) == UNKNOWN_OTHER_TYPE
    assert describe_value([1]) == "list"


def test_a_probe_seeds_torchs_generator_as_torch_manual_seed_0_does_whatever_a_cell_rebinds():
    """Every probe starts from the global generator seeded with 0 (a module the student's __init__ draws is the same
    every probe): the CPU generator itself, held by the probe server before any cell runs, so that a cell rebinding
    torch.manual_seed changes nothing of it."""
    from autograder.running.sandbox import probe_server, wire

    runner = probe_server.Runner(torch, wire, {})
    torch.manual_seed(0)
    expected = torch.randn(5)
    real = torch.manual_seed
    try:
        runner.exec_cell({"source": "import torch\ntorch.manual_seed = lambda seed: None\n_ = torch.randn(3)\n"
                                    "def draw():\n    return torch.randn(5)", "cell": 1, "timeout": 10.0}, {})
        drawn = runner.call({"name": "draw", "timeout": 10.0}, {})
    finally:
        torch.manual_seed = real
    assert torch.equal(drawn, expected)
