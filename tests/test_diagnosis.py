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


# --- diagnosis never breaks a check ------------------------------------------------------------------------------

# an uncatalogued wrong PreNormStack: the branch scaled by a half (no variant matches; the stack hint localises it)
HALF_BRANCH = next(m for m in mistakes("gradient_flow") if m.name == "prenorm_half_branch").edits
PRENORM_CHECK = "test_prenorm_forward_backward_float64"


def _graded_class(tmp_path, name, monkeypatch):
    from typer.testing import CliRunner

    from autograder import class_run
    from autograder.cli import app
    from autograder.recording.outputs import ResultStore
    from autograder.jobs import executors

    # the CLI grades in worker processes: here, in this process, where the monkeypatch is (what the Python API's
    # in_process does)
    monkeypatch.setattr(executors, "in_process", lambda executor, count: True)
    monkeypatch.setattr(class_run, "in_process", lambda executor, count: True)

    submitted = tmp_path / name / "submitted"
    edited_notebook("gradient_flow", HALF_BRANCH, submitted / "alice" / "gradient_flow" / "gradient_flow.ipynb")
    out = tmp_path / name / "out"
    done = CliRunner().invoke(app, ["grade", "gradient_flow", "--submissions", str(submitted), "--out", str(out),
                                    "--cell-timeout", "8", "--probe-timeout", "8", "--workers", "1"])
    result = ResultStore(out).load("alice", "gradient_flow").result
    return done, {c.name: c for p in result.parts for c in p.checks}, out


def test_a_crash_inside_a_hint_keeps_the_comparisons_message_and_is_a_check_bug(tmp_path, monkeypatch):
    """The stack hint raising on a wrong answer (the reference never runs it): the student gets the comparison's own
    failure message, unchanged; the check is a check bug, listed in the summary, and the run exits 3."""
    from autograder.checks import gradient_flow

    healthy, before, out = _graded_class(tmp_path, "healthy", monkeypatch)
    assert healthy.exit_code == 0, healthy.output
    normal = before[PRENORM_CHECK]
    hint = normal.details.get("hint")
    assert not normal.passed and hint and normal.message.endswith("。" + hint) and not normal.check_bug
    assert not any(c.check_bug for c in before.values())

    calls = []

    def planted(*args, **kwargs):
        calls.append(args)
        raise ZeroDivisionError("planted inside the stack hint")

    monkeypatch.setattr(gradient_flow, "localise_stack", planted)
    done, after, out = _graded_class(tmp_path, "planted", monkeypatch)
    assert calls, "the planted hint never ran"
    assert done.exit_code == 3, done.output
    bugs = {name for name, c in after.items() if c.check_bug}
    assert PRENORM_CHECK in bugs
    # every check scores as before; those whose hint crashed keep the comparison's own message, without the hint
    for name, c in after.items():
        assert (c.passed, c.points) == (before[name].passed, before[name].points), name
        if name in bugs:
            shown = before[name].details.get("hint")
            assert shown and c.message == before[name].message[:-len("。" + shown)], name
            assert "hint" not in c.details and c.diagnosis is None
            assert "ZeroDivisionError" in c.crash and "planted inside the stack hint" in c.crash
        else:
            assert c.message == before[name].message, name
    assert "check bug" in done.output and PRENORM_CHECK in done.output and "diagnosis" in done.output
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "bugs of the grader" in summary and PRENORM_CHECK in summary and "ZeroDivisionError" in summary
