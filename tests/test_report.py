"""The HTML reports: student text stays text, nothing hidden leaks, pages are offline, borrowed hand answers
are found. Results are built directly (no grading, no sandbox)."""

import csv
import html
import importlib.util
import re
import subprocess
import sys
import tomllib
from html.parser import HTMLParser

import pytest

from autograder import REPO_ROOT
from autograder.reporting.class_summary import TABLE_SCRIPT, TABLE_SCRIPT_HASH, render_summary
from autograder.reporting.copied_answers import BorrowedAnswers, find_borrowed_hand_answers
from autograder.reporting.formatting import DETAIL_LABELS, SAFE_DETAIL_KEYS, TIER_NOTES
from autograder.reporting.student_page import render_report
from autograder.results import CellRun, CheckResult, PartResult, SubmissionResult
from autograder.running.sandbox.tiers import PROTECTS
from browser import Chromium, chromium_path
from solutions.student_params import student_answers, student_params

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(document.cookie)>"
HOSTILE = f"{SCRIPT} {IMG}"
SEED = 918273645546372819


class Tags(HTMLParser):
    """Every start tag and its attributes, as a browser would parse them."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def check(name, grade_id, passed, points=1.0, message=None, details=None, diagnosis=None, description=None):
    return CheckResult(name=name, grade_id=grade_id, passed=passed, points=points if passed else 0.0,
                       max_points=points, description=description or f"检查 {name} 的说明",
                       message=message or ("通过" if passed else f"{name} 不对"), details=details or {},
                       diagnosis=diagnosis)


def rmsnorm_result(student_id="alice", hand_ok=True, hand_answers=None, **kw) -> SubmissionResult:
    parts = [
        PartResult("rmsnorm_hand", 2.0 if hand_ok else 0.0, 2.0, [
            check("test_hand_rms", "rmsnorm_hand", hand_ok),
            check("test_hand_output", "rmsnorm_hand", hand_ok)]),
        PartResult("rmsnorm_function", 2.5, 4.0, [
            check("test_function_float64_batched", "rmsnorm_function", True, 1.5),
            check("test_function_uses_eps_argument", "rmsnorm_function", True, 1.0),
            check("test_function_float32_default_eps", "rmsnorm_function", False, 1.0,
                  details={"shape": [2, 7, 32], "expected_shape": [2, 7, 32], "dtype": "torch.float32",
                           "max_abs_error": 0.25, "tolerance": "rtol=1e-05, atol=1e-05"},
                  diagnosis="eps_outside_root"),
            check("test_function_single_vector", "rmsnorm_function", False, 0.5)]),
        PartResult("rmsnorm_module", 4.0, 4.0, [
            check("test_module_parameters", "rmsnorm_module", True, 1.0),
            check("test_module_forward_backward_float64", "rmsnorm_module", True, 2.0),
            check("test_module_forward_float32", "rmsnorm_module", True, 1.0)]),
    ]
    if hand_answers is None:
        hand_answers = student_answers("rmsnorm", student_id) if hand_ok else {"rms": 1.0, "output": [0.0, 0.0]}
    fields = dict(student_id=student_id, assignment_id="rmsnorm", status="graded",
                  score=sum(p.score for p in parts), max_score=10.0, parts=parts, tier="bubblewrap", seed=SEED,
                  grader_version="0.1.0", notebook=f"/srv/course/submitted/{student_id}/rmsnorm/rmsnorm.ipynb",
                  hand_answers=hand_answers)
    fields.update(kw)
    return SubmissionResult(**fields)


def hostile_result() -> SubmissionResult:
    """gradient_flow, with markup wherever a student's text can reach the page."""
    parts = [
        PartResult("gradient_flow_choice", 0.0, 2.0, [
            check("test_choice_letter", "gradient_flow_choice", False, 2.0, message=f"`answer` 不对：{HOSTILE}",
                  description=f"选择题 {SCRIPT}", diagnosis=f"mistake {IMG}",
                  details={"dtype": HOSTILE, "shape": [SCRIPT]})]),
        PartResult("norm_stacks", 0.0, 4.0, [], answered=False,
                   message=f"未找到该题的答案单元格（可能被删除了）{SCRIPT}"),
        PartResult("layer_grad_norms", 4.0, 4.0, [check("test_grad_norms_match_reference", "layer_grad_norms", True, 4.0)]),
        PartResult("gradient_flow_observation", 0.0, 2.0, [], message="书面回答，由老师批改", by_hand=True),
    ]
    return SubmissionResult(
        student_id="erin", assignment_id="gradient_flow", status="graded", score=4.0, max_score=12.0, parts=parts,
        cells=[CellRun(19, None, False, "ValueError", HOSTILE), CellRun(21, "x", False, "Timeout", ""),
               CellRun(22, None, True)],
        message=f"提示 {IMG}", tier="rlimits", seed=SEED, grader_version="0.1.0",
        hand_answers={"answer": HOSTILE},
        written_answers={"gradient_flow_observation": f"第一行 {SCRIPT}\n第二行 {IMG}"},
    )


# --- escaping ---------------------------------------------------------------------------------------------


def without_the_table_script(page: str) -> str:
    """The summary's one script is ours (TABLE_SCRIPT, allowed by its hash and nothing else): the page without it."""
    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    assert scripts == [TABLE_SCRIPT], "one script, the table's"
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page)[1]
    assert f"script-src '{TABLE_SCRIPT_HASH}'" in csp and "unsafe-inline" not in csp.split("script-src")[1]
    return page.replace(f"<script>{TABLE_SCRIPT}</script>", "")


def assert_no_live_markup(page: str):
    if "<script>" in page and TABLE_SCRIPT in page:
        page = without_the_table_script(page)
    tags = Tags(page).tags
    assert not [t for t, _ in tags if t in ("script", "img", "iframe", "object", "embed", "link")], "live markup"
    assert not [(t, a) for t, a in tags for name in a if name.startswith("on")], "an event handler attribute"
    assert "<script" not in page.lower()


def test_student_text_is_escaped_in_the_report():
    page = render_report(hostile_result())
    assert_no_live_markup(page)
    assert html.escape(SCRIPT) in page
    assert html.escape(IMG) in page
    # all of it is there, as text: message, description, diagnosis, written answer, cell error, typed answer
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    for piece in (f"answer 不对：{HOSTILE}", f"选择题 {SCRIPT}", f"可能的错误：mistake {IMG}",
                  f"第一行 {SCRIPT}\n第二行 {IMG}", f"提示 {IMG}", HOSTILE):
        assert piece in text, piece


def test_student_text_is_escaped_in_the_summary():
    hostile = hostile_result()
    hostile.student_id = f"x{SCRIPT}"
    hostile.cells[1].error_message = IMG
    broken = rmsnorm_result("dave", status="error", message=f"无法读取 {IMG}", parts=[])
    page = render_summary([hostile, broken, rmsnorm_result("bob")], roster=[f"y{IMG}", "bob"])
    assert_no_live_markup(page)
    assert html.escape(SCRIPT) in page and html.escape(IMG) in page


def test_written_answer_is_plain_text_and_pending_until_graded():
    page = render_report(hostile_result())
    match = re.search(r'<div class="written pre">(.*?)</div>', page, re.S)
    assert match and html.unescape(match.group(1)) == f"第一行 {SCRIPT}\n第二行 {IMG}"
    assert "待批改 · 2 分" in page and "另有 2 分待批改" in page and "部分待批改" in page
    assert "不计分" not in page


def test_the_instructors_grade_and_comment_show_in_the_report():
    result = hostile_result()
    changed = result.apply_manual_grades({"gradient_flow_observation": (1.5, f"评语 {SCRIPT}")})
    assert changed and result.score == 5.5 and result.pending_points == 0
    assert not result.apply_manual_grades({"gradient_flow_observation": (1.5, f"评语 {SCRIPT}")})  # idempotent
    page = render_report(result)
    assert_no_live_markup(page)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert f"评语 {SCRIPT}" in text and "老师的评语" in text
    assert "1.5 / 2 分" in page and "待批改" not in page and "5.5" in page
    # an override of an auto-graded part counts too, and taking it away restores the checks' score
    result.apply_manual_grades({"layer_grad_norms": (1.0, "")})
    assert result.score == 1.0 and result.pending_points == 2
    result.apply_manual_grades({})
    assert result.score == 4.0


def test_pending_written_answers_in_the_summary_and_the_csv(tmp_path):
    from autograder.recording.outputs import write_grades_csv

    pending, graded = hostile_result(), hostile_result()
    graded.student_id = "fay"
    graded.apply_manual_grades({"gradient_flow_observation": (2.0, "")})
    page = render_summary([pending, graded], roster=["erin", "fay"])
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "Pending (待批改)" in text and "1 submission with 2 points" in text and "erin (2 pts)" in text
    assert "fay (" not in text
    write_grades_csv([pending, graded], ["erin", "fay"], ["gradient_flow"], tmp_path / "grades.csv")
    rows = list(csv.DictReader(open(tmp_path / "grades.csv", encoding="utf-8")))
    assert [(r["student"], r["gradient_flow"], r["gradient_flow_pending"]) for r in rows] == [
        ("erin", "4", "2"), ("fay", "6", "0")]


# --- offline, complete, nothing hidden ------------------------------------------------------------------------


def resource_references(page: str) -> list:
    """Attributes that would make a browser fetch something (in-page #anchors and links to the reports beside the
    summary, `reports/...`, are fine)."""
    return [(tag, name, value) for tag, attrs in Tags(page).tags for name, value in attrs.items()
            if name in ("src", "srcset", "action", "data", "poster", "background", "xlink:href", "href")
            and not (value or "").startswith("#")
            and not (tag == "a" and name == "href" and re.fullmatch(r"reports/[^/:?#]+/\w+\.html", value or ""))
            or name == "style" and "url(" in (value or "")]


def test_report_is_offline():
    for page in (render_report(rmsnorm_result()), render_report(hostile_result())):
        assert not re.search(r"https?://", page)
        assert resource_references(page) == []
        style = "".join(re.findall(r"<style>(.*?)</style>", page, re.S))
        assert "url(" not in style and "@import" not in style
        assert not [t for t, _ in Tags(page).tags if t in ("script", "link", "iframe", "img")]


def test_summary_is_offline_and_embeds_an_svg_plot():
    results = [rmsnorm_result("alice"), rmsnorm_result("bob", hand_ok=False), hostile_result()]
    page = without_the_table_script(render_summary(results, roster=["alice", "bob", "carol"]))
    assert page.count("<svg") == 2 and page.count("</svg>") == 2  # one plot per assignment
    assert "<?xml" not in page and "<!DOCTYPE svg" not in page
    assert not re.search(r"https?://", page)
    assert resource_references(page) == []
    assert not [t for t, _ in Tags(page).tags if t in ("script", "link", "iframe", "img")]


def test_every_part_and_check_appears():
    result = rmsnorm_result()
    page = html.unescape(render_report(result))
    for part in result.parts:
        assert part.grade_id in page
        assert f"{part.score:g} / {part.max_score:g} 分" in page
        for c in part.checks:
            assert c.name in page and c.description in page
    assert page.count("✓") == 7 and page.count("✗") == 2
    assert "作业 1：RMSNorm" in page and "手算 RMSNorm" in page  # titles from the source notebook
    assert "8.5" in page and "/ 10" in page


def test_hidden_seed_never_appears():
    results = [rmsnorm_result("alice"), hostile_result()]
    for page in [render_report(r) for r in results] + [render_summary(results)]:
        assert str(SEED) not in page
        assert f"{SEED:x}" not in page


def test_only_whitelisted_details_appear():
    details = {"shape": [2, 3], "expected_shape": [2, 3], "dtype": "torch.float64", "max_abs_error": 0.5,
               "tolerance": "rtol=1e-10, atol=1e-10", "share_outside": 0.123456789, "input": "SECRET-INPUT-7731",
               "expected": [3.14159265358], "param_shapes": {"gamma": [99991]}, "nan": 424242}
    result = rmsnorm_result()
    result.parts[1].checks[2].details = details
    page = render_report(result)
    labels = re.findall(r'<span class="chip"><b>(.*?)</b>', page)
    assert sorted(labels) == sorted(DETAIL_LABELS[k] for k in SAFE_DETAIL_KEYS)
    for key in ("share_outside", "param_shapes", "SECRET"):
        assert key not in page, key
    for leaked in ("SECRET-INPUT-7731", "3.14159265358", "99991", "424242", "0.123456789", "12%"):
        assert leaked not in page, leaked
    for shown in ("[2, 3]", "torch.float64", "0.5", "rtol=1e-10, atol=1e-10"):
        assert shown in page, shown


def test_status_error_shows_its_message():
    message = "笔记本文件不是有效的 JSON，可能已损坏；请用 Jupyter 重新保存后提交"
    parts = [PartResult(g, 0.0, m, [], answered=False, message=message)
             for g, m in (("rmsnorm_hand", 2.0), ("rmsnorm_function", 4.0), ("rmsnorm_module", 4.0))]
    page = render_report(rmsnorm_result("dave", status="error", message=message, parts=parts, score=0.0,
                                        hand_answers={}))
    assert message in page and "无法评分" in page
    assert all(f'id="part-{p.grade_id}"' in page for p in parts)


def test_unanswered_part_shows_its_message():
    page = html.unescape(render_report(hostile_result()))
    assert "未找到该题的答案单元格（可能被删除了）" in page


def test_hand_numbers_and_typed_answers_are_shown():
    result = rmsnorm_result("alice", hand_ok=False, hand_answers={"rms": 12.5, "output": None})
    page = render_report(result)
    params = student_params("rmsnorm", "alice")
    assert "[" + ", ".join(f"{v:.10g}" for v in params["x"]) + "]" in page
    assert "12.5" in page and "未填写，或无法读取" in page
    # never the right answers
    right = student_answers("rmsnorm", "alice")
    assert f"{right['rms']:.10g}" not in page and f"{right['rms']:.4g}" not in page


def test_failed_cells_and_tier_are_shown():
    page = render_report(hostile_result())
    assert "运行出错的单元格" in page and "第 20 个" in page and "ValueError" in page and "超时" in page
    assert "rlimits" in page and "资源限制" in page
    assert "0.1.0" in page


def test_every_tier_has_a_chinese_note():
    assert set(TIER_NOTES) == set(PROTECTS)


def test_diagnosis_is_named_by_its_chinese_title():
    from autograder.checks.diagnosis import variants_of

    page = html.unescape(render_report(rmsnorm_result()))
    variant = variants_of("rmsnorm")["eps_outside_root"]
    assert f"可能的错误：{variant.heading}" in page and "eps_outside_root" not in page.replace(
        "test_function_float32_default_eps", "")
    assert page.count(variant.explanation) == 1


def test_a_one_mistake_submission_shows_its_explanation_once_per_part(tmp_path):
    """A missing square root fails several checks in two parts: the explanation is shown once per part."""
    from autograder.checks.diagnosis import variants_of
    from autograder.engine import GradingOptions, grade_submission
    from grading_helpers import TEST_LIMITS, edited_notebook

    notebook = edited_notebook("rmsnorm", [("rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)",
                                            "rms = torch.mean(xc * xc, dim=-1, keepdim=True) + eps")],
                               tmp_path / "rmsnorm.ipynb")
    result = grade_submission(notebook, "rmsnorm", "alice", GradingOptions(limits=TEST_LIMITS))
    named = [c for p in result.parts for c in p.checks if c.diagnosis == "no_sqrt"]
    assert len(named) >= 3, [(c.name, c.diagnosis) for p in result.parts for c in p.checks]
    parts = {c.grade_id for c in named}
    page = html.unescape(render_report(result))
    explanation = variants_of("rmsnorm")["no_sqrt"].explanation
    assert page.count(explanation) == len(parts)
    assert "no_sqrt" not in page


# --- hand answers that fit another student's numbers -------------------------------------------------------


def test_borrowed_hand_answers_are_found_and_shown():
    alice = rmsnorm_result("alice", hand_ok=False, hand_answers=student_answers("rmsnorm", "bob"))
    bob = rmsnorm_result("bob")
    carol = rmsnorm_result("carol", hand_ok=False)  # wrong, but nobody's numbers
    found = find_borrowed_hand_answers([alice, bob, carol], roster=["alice", "bob", "carol", "zoe"])
    assert found == [BorrowedAnswers("rmsnorm", "alice", "bob", ("output", "rms"), False)]
    page = render_summary([alice, bob, carol], roster=["alice", "bob", "carol", "zoe"])
    assert "答案与学生 bob 的参数吻合" in page
    assert "alice's answers fit bob's numbers" in html.unescape(page)


def test_borrowed_from_a_roster_student_without_a_submission():
    zoe = student_answers("rmsnorm", "zoe")
    nearly = {"rms": zoe["rms"] * (1 + 2e-4), "output": [v * (1 - 2e-4) for v in zoe["output"]]}
    alice = rmsnorm_result("alice", hand_ok=False, hand_answers=nearly)
    assert [(b.student_id, b.other_student_id) for b in find_borrowed_hand_answers([alice], ["alice", "zoe"])] \
        == [("alice", "zoe")]
    assert find_borrowed_hand_answers([alice], None) == []  # zoe is neither in the roster nor in the results
    off = {"rms": zoe["rms"] * 1.01, "output": zoe["output"]}
    assert find_borrowed_hand_answers([rmsnorm_result("alice", hand_ok=False, hand_answers=off)], ["zoe"]) == []


def test_passing_hand_checks_are_not_flagged():
    bob = rmsnorm_result("bob")
    twin = rmsnorm_result("alice", hand_ok=True, hand_answers=student_answers("rmsnorm", "bob"))
    assert find_borrowed_hand_answers([bob, twin], ["alice", "bob"]) == []


# --- packaging and screenshots ---------------------------------------------------------------------------


def test_templates_are_package_data():
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "reporting/templates/*.j2" in pyproject["tool"]["setuptools"]["package-data"]["autograder"]
    for name in ("base.html.j2", "report.html.j2", "summary.html.j2"):
        assert (REPO_ROOT / "autograder" / "reporting" / "templates" / name).is_file()


def test_screenshot_is_not_blank(tmp_path):
    chromium_path()  # skips without chromium, fails under AUTOGRADE_REQUIRE_BROWSER=1 (.ci/run)
    spec = importlib.util.spec_from_file_location("screenshot", REPO_ROOT / "scripts" / "screenshot.py")
    screenshot = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(screenshot)
    page = tmp_path / "report.html"
    page.write_text(render_report(rmsnorm_result("carol", hand_ok=False)), encoding="utf-8")
    png = screenshot.chromium_screenshot(page, tmp_path / "report.png", 1280, 900)
    from PIL import Image

    with Image.open(png) as image:
        assert image.size == (1280, 900)
        gray = image.convert("L")
        low, high = gray.getextrema()
        assert high - low > 100, "a blank page"
        histogram = gray.histogram()
        assert max(histogram) < 0.97 * sum(histogram), "almost one colour: nothing rendered"
        assert sum(1 for n in histogram if n) > 20


def test_the_summary_of_2000_students_stays_under_5_mb():
    """Every assignment for 2,000 students, some flagged: one table row per student, links to each report."""
    from autograder.assignments import assignment_ids
    from autograder.results import Flag, HandIn

    ASSIGNMENTS = assignment_ids()
    results = []
    for i in range(2000):
        for aid in ASSIGNMENTS:
            r = rmsnorm_result(f"2024{i:06d}", hand_answers={}, assignment_id=aid)
            if i % 7 == 0:
                r.handin = HandIn(seconds_late=3600.0, penalty=1.0, flags=[Flag("time", "late-ish " * 5, "晚")])
            results.append(r)
    page = render_summary(results, roster=[f"2024{i:06d}" for i in range(2010)])
    assert len(page.encode()) < 5 * 1024**2, len(page.encode())
    table = page.split('<table id="students">')[1].split("</table>")[0]
    assert table.count("<tr data-flags=") == 2010
    assert table.count('href="reports/') == 2000 * len(ASSIGNMENTS)
    assert table.count('data-flags="late time"') == 286 and table.count('data-flags="missing"') == 10


def test_report_and_summary_in_chromium_no_console_errors_nothing_fetched(tmp_path):
    """The pages as a browser shows them: no console error, no CSP violation, no request off the page, the text there."""
    chromium_path()
    graded = hostile_result()
    graded.student_id = "fay"
    graded.apply_manual_grades({"gradient_flow_observation": (1.5, f"评语 {SCRIPT}")})
    pages = {"report-pending": render_report(hostile_result()), "report-graded": render_report(graded),
             "summary": render_summary([hostile_result(), graded, rmsnorm_result("bob")], roster=["erin", "fay", "bob"])}
    expected = {"report-pending": ["另有 2 分待批改", "待批改 · 2 分", f"第一行 {SCRIPT}"],
                "report-graded": ["老师的评语", f"评语 {SCRIPT}", "1.5 / 2 分"],
                "summary": ["Pending (待批改)", "erin (2 pts)"]}
    with Chromium() as browser:
        for name, html_text in pages.items():
            path = tmp_path / f"{name}.html"
            path.write_text(html_text, encoding="utf-8")
            tab = browser.open(path.as_uri())
            text = tab.text()
            for piece in expected[name]:
                assert piece in text, (name, piece)
            assert tab.errors == [] and tab.blocked == [], (name, tab.errors, tab.blocked)
            # the report runs no script; the summary only its sort-and-filter table script (allowed by its hash)
            assert tab.evaluate("document.querySelectorAll('script').length") == (1 if name == "summary" else 0)


# --- rendered where it is graded ----------------------------------------------------------------------------

@pytest.mark.parametrize("make", [rmsnorm_result, hostile_result], ids=["rmsnorm", "hostile"])
def test_a_worker_renders_the_report_and_result_file_byte_for_byte_as_the_run_would(make, tmp_path):
    """The run sends a submission's recording facts (the instructor's grades, the hand-in but its penalty) with the
    job; the worker finishes the result and renders its files: the same bytes as finishing and rendering it in the
    run after grading (autograder.recording.rendered)."""
    import copy
    import json
    from dataclasses import asdict
    from datetime import datetime, timedelta

    from autograder.intake.handin import HandInSettings, assess, facts
    from autograder.intake.late import LatePolicy
    from autograder.intake.validate import sanitize_record
    from autograder.recording.outputs import encode_result
    from autograder.recording.rendered import RecordingFacts, checked, finish

    result = make()
    digest = result.graded_sha256 = "d1" * 32  # the engine says what it graded: cached under that digest only
    folder = tmp_path / result.student_id / result.assignment_id
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")
    notebook = folder / f"{result.assignment_id}.ipynb"
    settings = HandInSettings(policy=LatePolicy("percent_per_day", percent=10, cap_percent=50))
    due, extension = datetime(2026, 11, 28, 9), timedelta(hours=3)
    manual = {result.parts[-1].grade_id: (1.5, f"评语 {SCRIPT}")}

    here = copy.deepcopy(result)  # the run's way, after grading
    sanitize_record(here)
    here.apply_manual_grades(manual)
    here.handin = assess(here, folder, notebook, settings, due, extension)
    expected = (render_report(here), encode_result(here, digest, "k3y"))

    sent = RecordingFacts(manual, facts(result.student_id, result.assignment_id, folder, notebook, settings, due,
                                        extension), settings.policy, digest, "k3y").to_dict()
    there = copy.deepcopy(result)  # the worker's: the facts through the job's JSON
    rendered = finish(there, RecordingFacts.from_dict(json.loads(json.dumps(sent))))
    assert (rendered.report, rendered.result_file) == expected
    assert there.handin.penalty > 0 and there.handin == here.handin and there.score == here.score
    assert checked(asdict(rendered), there, digest, "k3y") == rendered
    # the run writes only files of the result it holds, under the key it sent
    assert checked(asdict(rendered), there, digest, "another") is None
    assert checked({**asdict(rendered), "report": None}, there, digest, "k3y") is None
    other = copy.deepcopy(there)
    other.student_id = "mallory"
    assert checked(asdict(rendered), other, digest, "k3y") is None


# --- what to fix first, each mistake once, what an undiagnosed failure checked (issue 24, item 1) -------------------


def two_mistakes_result() -> SubmissionResult:
    """rmsnorm with two diagnosed mistakes: no_sqrt costs 2.5 points over two parts, eps_outside_root 1 point; and an
    undiagnosed failure."""
    result = rmsnorm_result()
    function, module = result.parts[1], result.parts[2]
    function.checks[0] = check("test_function_float64_batched", "rmsnorm_function", False, 1.5, diagnosis="no_sqrt",
                               message="`rms_norm` 的输出与参考实现不一致：最大绝对误差 0.731",
                               details={"max_abs_error": 0.731, "tolerance": "rtol=1e-10, atol=1e-10"})
    module.checks[2] = check("test_module_forward_float32", "rmsnorm_module", False, 1.0, diagnosis="no_sqrt")
    function.score, module.score = 1.0, 3.0
    result.score = sum(p.score for p in result.parts)
    return result


def test_the_top_names_the_costliest_mistakes_first_with_links_to_their_explanations():
    from autograder.checks.diagnosis import variants_of

    page = render_report(two_mistakes_result())
    variants = variants_of("rmsnorm")
    top = page.split('id="part-')[0]  # everything above the first part
    fix = re.search(r'<div class="fix">(.*?)</div>', top, re.S)[1]
    items = re.findall(r'<li><a href="#([^"]+)">(.*?)</a>', fix)
    assert [html.unescape(title) for _, title in items] == [variants["no_sqrt"].heading,
                                                           variants["eps_outside_root"].heading]
    assert "共失 2.5 分" in fix and "共失 1 分" in fix and "第 2、3 部分" in fix
    for anchor, title in items:  # each link lands on that mistake's explanation (its first part's)
        box = re.search(rf'<div class="alert warn mistake" id="{anchor}"><b>可能的错误：(.*?)</b>', page)
        assert box and box[1] == title, anchor
    assert items[0][0].startswith("mistake-rmsnorm_function-")
    # the part scores at the top, each linking its part
    rows = re.search(r'<div class="part-rows">(.*?)</section>', top, re.S)[1]
    assert re.findall(r'href="#part-(\w+)"', rows) == ["rmsnorm_hand", "rmsnorm_function", "rmsnorm_module"]
    assert "1 / 4" in rows and "3 / 4" in rows and "2 / 2" in rows


def test_a_tie_goes_to_the_first_parts_first_mistake():
    result = two_mistakes_result()
    result.parts[1].checks[0].max_points = 1.0  # no_sqrt: 1 + 1, eps_outside_root: 1 ... make them equal
    result.parts[2].checks[2].max_points = 0.0
    page = render_report(result)
    fix = re.search(r'<div class="fix">(.*?)</div>', page, re.S)[1]
    assert re.findall(r'<li><a href="#(mistake-[\w-]+)"', fix) == ["mistake-rmsnorm_function-1",
                                                                   "mistake-rmsnorm_function-2"]


def test_without_a_named_mistake_the_top_names_the_part_that_lost_most():
    result = rmsnorm_result(hand_ok=False)  # hand: 2 lost, undiagnosed; function: 1.5 lost, one diagnosed
    result.parts[1].checks[2].diagnosis = None
    page = render_report(result)
    fix = re.search(r'<div class="fix">(.*?)</div>', page, re.S)[1]
    assert "失分最多的部分" in fix and 'href="#part-rmsnorm_hand"' in fix and "共失 2 分" in fix
    assert "手算 RMSNorm" in fix and "可能的错误" not in fix


def test_full_marks_say_so_in_one_line_and_nothing_to_fix():
    result = rmsnorm_result()
    for part in result.parts:
        for c in part.checks:
            c.passed, c.points, c.diagnosis, c.message = True, c.max_points, None, "通过"
        part.score = part.max_score
    result.score = 10.0
    page = render_report(result)
    assert "所有自动评分的检查都通过了" in page and "先改这里" not in page and 'class="fix"' not in page
    assert page.count("✓") == 9 and "✗" not in page
    assert page.count('<details class="passed-checks">') == 3 and "通过的检查（3 项，4 分）" in page
    assert ">通过<" not in page  # no "通过" message line under passed checks


def test_an_unreadable_notebook_shows_no_overview():
    message = "笔记本文件不是有效的 JSON，可能已损坏；请用 Jupyter 重新保存后提交"
    parts = [PartResult(g, 0.0, m, [], answered=False, message=message)
             for g, m in (("rmsnorm_hand", 2.0), ("rmsnorm_function", 4.0), ("rmsnorm_module", 4.0))]
    page = render_report(rmsnorm_result("dave", status="error", message=message, parts=parts, score=0.0,
                                        hand_answers={}))
    assert 'id="overview"' not in page and "先改这里" not in page and "所有自动评分的检查都通过了" not in page
    assert page.count(message) == 1 and page.count("这份提交无法评分，见上方的说明") == 3


def test_each_mistake_once_per_part_with_its_checks_one_line_each_and_their_numbers_reachable():
    from autograder.checks.diagnosis import variants_of

    result = two_mistakes_result()
    page = render_report(result)
    explanation = variants_of("rmsnorm")["no_sqrt"].explanation
    assert page.count(html.escape(explanation, quote=False)) == 2  # two parts, once each
    # under its mistake's box: a <details> whose summary is the ✗ line (the description, the points lost) and whose
    # body holds the message and the numbers
    boxes = re.findall(r'<div class="alert warn mistake" id="[^"]+">(.*?)</ul>\s*</div>', page, re.S)
    items = [re.search(r'<details class="check failed">\s*<summary>(.*?)</summary>(.*?)</details>', item, re.S)
             for box in boxes for item in box.split("<li>")[1:]]
    diagnosed = [c for part in result.parts for c in part.checks if not c.passed and c.diagnosis]
    assert len(items) == len(diagnosed) == 3
    for c, item in zip(diagnosed, items):
        summary, body = item[1], item[2]
        assert "✗" in summary and html.escape(c.description) in summary and f"−{c.max_points:g} 分" in summary
        assert c.name in body and c.message.replace("`", "") in html.unescape(re.sub(r"<[^>]+>", "", body))
    # the numbers of a diagnosed failure are on the page (inside its details)
    assert "最大绝对误差</b>0.731" in page and "rtol=1e-10, atol=1e-10" in page
    # the mistakes' boxes no longer repeat each check's title, nor the old sentence listing the checks
    assert "它解释了这些没通过的检查" not in page and "说明见本题上方" not in page


def test_an_undiagnosed_failure_says_what_was_checked_then_its_message():
    page = render_report(rmsnorm_result())  # test_function_single_vector: "… 不对", no mistake named
    item = re.search(r'<li class="check failed">(.*?)</li>', page, re.S)[1]
    text = html.unescape(re.sub(r"<[^>]+>", "", item))
    said = text.index("检查的是：检查 test_function_single_vector 的说明")
    assert said < text.index("test_function_single_vector 不对")
    assert "−0.5 分" in text


# --- the right hand answers after the due date ---------------------------------------------------------------------


def test_the_right_hand_answers_only_after_the_due_date_and_when_the_course_allows_it():
    from datetime import datetime

    from autograder.results import HandIn

    right = student_answers("rmsnorm", "alice")
    shown = f"{right['rms']:.10g}"

    def page(allowed: bool, now: datetime) -> str:
        result = rmsnorm_result("alice", hand_ok=False, hand_answers={"rms": 12.5, "output": None})
        result.handin = HandIn(due="2026-12-01 18:09:00 UTC", show_answers_after_due=allowed)
        return render_report(result, now=now)

    before, after = datetime(2026, 12, 1, 18, 8), datetime(2026, 12, 1, 18, 10)
    for text in (page(True, before), page(False, after), page(False, before)):
        assert shown not in text and "正确答案" not in text
        assert "12.5" in text  # what the student typed is always there
    text = page(True, after)
    assert f"正确答案 {shown}" in text and "12.5" in text
    output = "[" + ", ".join(f"{v:.10g}" for v in right["output"]) + "]"
    assert f"正确答案 {output}" in text and "未填写，或无法读取" in text
    assert_no_live_markup(text)
    # no due date: never
    result = rmsnorm_result("alice", hand_ok=False)
    from autograder.results import HandIn as H

    result.handin = H(show_answers_after_due=True)
    assert shown not in render_report(result, now=after)


def test_points_are_written_as_a_person_writes_them():
    from autograder.reporting.formatting import fmt_points

    assert [fmt_points(x) for x in (10, 10.0, 1.5, 1.25, 0.125, 0.375, 2 / 3, 0.1 + 0.2)] == \
        ["10", "10", "1.5", "1.25", "0.125", "0.375", "0.667", "0.3"]
    assert [fmt_points(x) for x in (float("nan"), "x", True)] == ["nan", "x", "True"]


def test_a_runs_warm_up_imports_the_page_and_compiles_the_summary_and_leaves_a_failure_to_where_it_is_used(
        monkeypatch):
    """warm_up_exports (called by a run on local workers when its first job starts): what writing a report and the
    class summary would otherwise do after the first result; a failure there is said where it is used."""
    code = ("import sys; from autograder.recording.rendered import warm_up_exports; warm_up_exports(); "
            "from autograder.reporting.formatting import _env; "
            "print('autograder.reporting.student_page' in sys.modules, sorted(key[1] for key in _env.cache.keys()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, check=True)
    assert done.stdout.strip() == "True ['base.html.j2', 'summary.html.j2']", done.stdout + done.stderr

    from autograder.recording.rendered import warm_up_exports
    from autograder.reporting import formatting

    def broken(name, *args, **kwargs):
        raise RuntimeError(f"template {name} cannot be read")

    monkeypatch.setattr(formatting._env, "get_template", broken)
    warm_up_exports()  # says nothing
    with pytest.raises(RuntimeError, match="summary.html.j2 cannot be read"):
        render_summary([])
