"""Naming the mistake: the half-split RoPE is named in the student's report, and conventions can keep points."""

import pytest

from autograder.checks.diagnosis import variants_of
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.examples import mistakes
from autograder.reporting.student_page import render_report
from grading_helpers import TEST_LIMITS, edited_notebook

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def half_split(tmp_path_factory):
    m = next(m for m in mistakes("rope") if m.name == "half_split_pairing")
    path = edited_notebook("rope", m.edits, tmp_path_factory.mktemp("diag") / "rope.ipynb")
    strict, lenient = (grade_batch([Submission(path, "rope", "alice")],
                                   GradingOptions(limits=TEST_LIMITS, convention_credit=credit))[0]
                       for credit in (0.0, 0.5))
    return strict, lenient


def test_half_split_rope_is_named_in_the_report(half_split):
    strict, _ = half_split
    assert variants_of("rope")["half_split_pairing"].convention
    named = [c for p in strict.parts for c in p.checks if c.diagnosis == "half_split_pairing"]
    assert named and all(not c.passed and c.points == 0 for c in named)
    html = render_report(strict)
    assert "rotate_half" in html and "(2i, 2i+1)" in html and "i+d/2" in html.replace(" ", "")


def test_the_instructor_can_keep_part_of_the_points_for_a_convention(half_split):
    strict, lenient = half_split
    named = {c.name: c for p in lenient.parts for c in p.checks if c.diagnosis == "half_split_pairing"}
    assert named and all(c.points == pytest.approx(0.5 * c.max_points) for c in named.values())
    assert lenient.score == pytest.approx(strict.score + 0.5 * sum(c.max_points for c in named.values()))
    others = [(c.name, c.points) for p in lenient.parts for c in p.checks if c.name not in named]
    assert others == [(c.name, c.points) for p in strict.parts for c in p.checks if c.name not in named]


def test_a_mistake_shared_by_gqa_and_mla_has_one_name_and_one_explanation():
    """The attention and byte-count slips are one family: the same Variant object in both catalogues, so the
    summary names and counts it alike; no two catalogues explain one name differently."""
    from autograder.checks.diagnosis import FAMILIES, variants_of
    from autograder.assignments import assignment_ids

    ASSIGNMENTS = assignment_ids()

    gqa, mla = variants_of("gqa_saving"), variants_of("mla")
    shared = set(gqa) & set(mla)
    assert {"no_scale", "mask_ignored", "k_only", "fp32_bytes", "scale_d_model", "no_output_projection",
            "linear_bias", "view_without_transpose", "merge_heads_without_transpose"} <= shared
    for name in shared:
        assert gqa[name] is mla[name], name
    explanations = {}
    for assignment in ASSIGNMENTS:
        for name, variant in variants_of(assignment).items():
            explanations.setdefault(name, set()).add(variant.explanation)
    assert {n: e for n, e in explanations.items() if len(e) > 1} == {}
    assert all(FAMILIES[n].title for n in FAMILIES)
