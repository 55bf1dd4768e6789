"""The MLA bonus costs what its notebook says: a missing `mask is None` case loses the no-mask half point only."""

import re

import nbformat
import pytest

from conftest import source_notebook
from grading_helpers import TEST_LIMITS, edited_notebook
from autograder.engine import GradingOptions, Submission, grade_batch

FORWARD_MASK = ("    if mask is not None:\n        scores = scores + mask\n", "    scores = scores + mask\n")
LATENTS_MASK = ("    if mask is not None:\n        logits = logits + mask\n", "    logits = logits + mask\n")
NO_MASK_CHECK = "test_absorbed_no_mask_float64"


def announced_no_mask_points() -> float:
    """The points the bonus's text gives the no-mask case: "因果掩码下、以及不传掩码时 …… 各 X 分"."""
    nb = nbformat.read(source_notebook("mla"), as_version=4)
    text = next(c.source for c in nb.cells if c.cell_type == "markdown" and "挑战题" in c.source and "评分方式" in c.source)
    found = re.search(r"因果掩码下、以及不传掩码时.*?各 (\d+(?:\.\d+)?) 分", text, re.S)
    assert found, "the bonus's text no longer states the points of the masked and unmasked cases"
    return float(found.group(1))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mla_bonus")
    cases = {"latents_without_none_case": [LATENTS_MASK], "both_without_none_case": [FORWARD_MASK, LATENTS_MASK]}
    subs = [Submission(edited_notebook("mla", edits, tmp / f"{name}.ipynb"), "mla", "alice")
            for name, edits in cases.items()]
    return dict(zip(cases, grade_batch(subs, GradingOptions(limits=TEST_LIMITS))))


@pytest.mark.parametrize("case", ["latents_without_none_case", "both_without_none_case"])
def test_a_missing_mask_none_case_costs_what_the_notebook_says(graded, case):
    result = graded[case]
    bonus = next(p for p in result.parts if p.grade_id == "mla_bonus")
    failed = [c for c in bonus.checks if not c.passed]
    assert [c.name for c in failed] == [NO_MASK_CHECK], [(c.name, c.message) for c in failed]
    assert bonus.max_score - bonus.score == pytest.approx(announced_no_mask_points()) == 0.5
    # nothing outside the bonus depends on it
    assert all(p.score == p.max_score for p in result.parts if p.grade_id != "mla_bonus" and not p.pending)
