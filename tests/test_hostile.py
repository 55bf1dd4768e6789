"""The hostile-submission corpus (tests/hostile/corpus.py), graded under every sandbox tier this machine runs.

Per tier, one batch (under the machine's first tier as the CLI grades, unchanged demo cells skipped; under the others
with every cell run): the honest baselines, every case the tier contains, the honest baselines again. For
every case: the batch completes; the result has the status, failing cells, failing parts and message
written for it; its score is never above its baseline's; honest submissions graded after every trick get
what they got before them, and the cases that act on processes or the disk get the same result graded alone;
no file outside the scratch directory changed (the repository and a planted course tree, hashed before and
after); no process is left; nothing the sandbox should not see (a planted secret, the listeners the test
runs on 127.0.0.1, a folder for markers) shows any trace of the student's code.
"""

import json
import os
import secrets
from dataclasses import dataclass, replace

import pytest

from autograder import REPO_ROOT
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.running.sandbox import tiers
from grading_helpers import HOSTILE_LIMITS
from hostile.corpus import (ASSIGNMENT, BASELINES, CASES, ERROR, FLOOD_CELLS, SECRET_PREFIX, Context, baseline_notebook,
                            plant_course, submission)
from hostile.watch import (Listeners, changed_files, leftover_pool_processes, live_children, machine_tiers,
                           tree_fingerprint)

pytestmark = pytest.mark.slow

MACHINE_TIERS = machine_tiers()
STUDENT = "alice"


@dataclass
class TierRun:
    tier: str
    ctx: Context
    results: dict  # ("case", name) | ("first", baseline) | ("last", "reference") -> SubmissionResult
    alone: dict  # case name -> SubmissionResult graded by itself
    changed: list
    received: list
    markers: list
    children_left: set
    pool_left: dict


@pytest.fixture(scope="module", params=tiers.TIERS)
def run(request, tmp_path_factory):
    tier = request.param
    if tier not in MACHINE_TIERS:
        pytest.skip(f"tier {tier} does not work on this machine")
    tmp = tmp_path_factory.mktemp(f"hostile-{tier}")
    secret = SECRET_PREFIX + secrets.token_hex(16)
    course = plant_course(tmp / "course", secret)
    markers = tmp / "markers"
    markers.mkdir()
    # the first tier grades as the CLI does (unchanged demo cells skipped, a result that is not clean graded again
    # with every cell); the others run every cell once: what they are here for is containment, and the skipping is
    # the same static analysis under every tier
    options = GradingOptions(limits=HOSTILE_LIMITS, tier=tier, run_all_cells=tier != MACHINE_TIERS[0])
    with Listeners() as net:
        ctx = Context(markers, course, secret, net.tcp_port, net.udp_port, net.unix_paths, net.fifo_paths)
        cases = [c for c in CASES if tier in c.contained_by]
        keyed = {}
        for name in BASELINES:  # honest submissions before any trick ran ...
            keyed[("first", name)] = baseline_notebook(name, tmp / "subs" / f"first-{name}")
        for case in cases:
            if not case.limits:
                keyed[("case", case.name)] = submission(case, tmp / "subs" / case.name, ctx)
        keyed[("last", "reference")] = baseline_notebook("reference", tmp / "subs" / "last")  # ... and after them
        own = {}  # the cases with limits of their own, each in a batch of its own, followed by the reference
        for case in cases:
            if case.limits:
                own[case] = [submission(case, tmp / "subs" / case.name, ctx),
                             baseline_notebook("reference", tmp / "subs" / f"after-{case.name}")]
        watched = (REPO_ROOT, course, tmp / "subs")
        before, children_before = tree_fingerprint(*watched), live_children(os.getpid())
        results = dict(zip(keyed, grade_batch([Submission(path, ASSIGNMENT, STUDENT) for path in keyed.values()],
                                              options)))
        for case, paths in own.items():
            limits = replace(HOSTILE_LIMITS, **dict(case.limits))
            graded = grade_batch([Submission(path, ASSIGNMENT, STUDENT) for path in paths],
                                 replace(options, limits=limits))
            results[("case", case.name)], results[("after", case.name)] = graded
            keyed[("case", case.name)] = paths[0]
        alone = {c.name: grade_batch([Submission(keyed[("case", c.name)], ASSIGNMENT, STUDENT)], options)[0]
                 for c in cases if c.alone}
        after = tree_fingerprint(*watched)
        children_left = live_children(os.getpid()) - children_before
        received = list(net.received)
    changed = changed_files(before, after)
    return TierRun(tier, ctx, results, alone, changed, received, sorted(os.listdir(markers)),
                   children_left, leftover_pool_processes())


def failing_checks(result, grade_id):
    return [c for p in result.parts if p.grade_id == grade_id for c in p.checks if not c.passed]


def summary(result) -> list:
    return [result.status, result.score, result.message[:200],
            [(c.index, c.error_type, c.error_message[:200]) for c in result.cells if not c.ok],
            [(c.name, c.passed, c.message[:120]) for p in result.parts for c in p.checks]]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_case_gets_its_expected_outcome(case, run, request):
    if run.tier not in case.contained_by:
        pytest.skip(f"the {run.tier} tier does not contain {case.name}: not run under it")
    if run.tier in dict(case.weak):
        request.applymarker(pytest.mark.xfail(reason=dict(case.weak)[run.tier], strict=False))
    expect = case.expect_for(run.tier)
    result = run.results[("case", case.name)]
    where = summary(result)
    assert result.tier == run.tier and result.assignment_id == ASSIGNMENT and result.student_id == STUDENT
    assert result.status == expect.status, where
    assert result.max_score == 10 and [p.max_score for p in result.parts] == [2.0, 4.0, 4.0], where
    if expect.status == ERROR:
        assert result.message and expect.message in result.message, where
        assert result.score == 0 and all(not p.answered and p.score == 0 for p in result.parts), where
        return
    if case.baseline is None:
        assert expect.score == "0"
    else:
        baseline = run.results[("first", case.baseline)]
        if expect.score == "==":
            assert result.identity() == baseline.identity(), where
        assert result.score <= baseline.score, where
    if expect.score == "0":
        assert result.score == 0, where
    failed = [c for c in result.cells if not c.ok]
    if expect.failed_cells is not None:
        assert len(failed) == expect.failed_cells, where
    assert all(c.error_type in expect.cell_errors for c in failed) or expect.failed_cells is None, where
    for grade_id in expect.failing_parts:
        part = next(p for p in result.parts if p.grade_id == grade_id)
        assert part.checks and all(not c.passed for c in part.checks) and part.score == 0, where
    assert {p.grade_id for p in result.parts if not p.answered} == set(expect.unanswered), where
    if expect.message:
        parts = expect.failing_parts or {p.grade_id for p in result.parts}
        messages = [c.message for g in parts for c in failing_checks(result, g)]
        assert any(expect.message in m for m in messages), where


@pytest.mark.parametrize("case", [c for c in CASES if c.alone], ids=[c.name for c in CASES if c.alone])
def test_graded_alone_or_in_the_batch_the_same(case, run):
    if run.tier not in case.contained_by:
        pytest.skip(f"the {run.tier} tier does not contain {case.name}: not run under it")
    assert run.alone[case.name].identity() == run.results[("case", case.name)].identity()


def test_honest_submissions_graded_after_every_trick_are_unchanged(run):
    reference = run.results[("first", "reference")]
    assert reference.score == 10 and all(c.ok for c in reference.cells), summary(reference)
    last = run.results[("last", "reference")]
    assert last.identity() == reference.identity(), summary(last)
    for key, after in run.results.items():  # after each case graded in a batch of its own, under its own limits
        if key[0] == "after":
            assert after.identity() == reference.identity(), (key, summary(after))


def test_nothing_outside_the_scratch_directory_changed(run):
    assert run.changed == [], f"files changed while grading under {run.tier}"
    for folder in ("/work", "/opt/autograde", "/tmp", str(REPO_ROOT), str(run.ctx.course)):
        assert not os.path.exists(os.path.join(folder, "TAMPERED")), folder


def test_no_process_is_left_running(run):
    assert run.children_left == set(), f"children of the grader left under {run.tier}"
    assert run.pool_left == {}, f"processes of sandbox uids left under {run.tier}"


def test_nothing_crossed_the_sandbox_boundary(run):
    """No trace outside: the secret in no result, nothing at the listeners, no marker (a reply was never unpickled)."""
    token = run.ctx.secret.removeprefix(SECRET_PREFIX)
    for key, result in run.results.items():
        assert token not in json.dumps(result.to_dict(), ensure_ascii=False), key
    assert run.received == []
    assert run.markers == []


def test_results_stay_small(run):
    """100 MB of prints, a 50 MB notebook: the stored result is a few kilobytes."""
    for key, result in run.results.items():
        assert len(json.dumps(result.to_dict(), ensure_ascii=False)) < 200_000, key


def test_reports_stay_small_and_say_what_they_cut(run):
    """A report is rendered from the bounded result: under 4 MiB whatever the submission held, and a cut is said."""
    from autograder.reporting.student_page import render_report

    for key, result in run.results.items():
        assert len(render_report(result).encode("utf-8")) < 4 * 1024**2, key
    flood = run.results.get(("case", "failing_cell_flood"))
    if flood is not None:
        assert flood.cell_errors_omitted == FLOOD_CELLS - 50, summary(flood)
        page = render_report(flood)
        assert f"另有 {FLOOD_CELLS - 50} 个出错的单元格没有列出…（已截断）" in page and f"{FLOOD_CELLS} 个" in page
    hand = run.results.get(("case", "hand_answer_4_million_numbers"))
    if hand is not None:
        rms = hand.hand_answers["rms"]
        assert rms[:8] == [1] * 8 and len(rms) == 9 and "已截断" in rms[-1] and "4000000" in rms[-1], rms
        assert "（已截断）" in render_report(hand)
