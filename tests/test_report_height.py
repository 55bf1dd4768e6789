"""Issue 24, item 1: the report of the demo student with the most failed checks in llama_block fits a desktop screen
and a phone within the heights the issue sets, and needs no sideways scrolling on the phone. Graded with the real
engine (one submission), measured in headless Chromium."""

from browser import Chromium, chromium_path

STUDENT = "2024010005"
LIMITS = {(1280, False): 1925, (390, True): 3533}  # CSS pixels of document.documentElement.scrollHeight


def test_the_demo_class_s_longest_llama_block_report_fits_the_issue_s_heights(tmp_path, record_property):
    chromium_path()  # skips without chromium, fails under AUTOGRADE_REQUIRE_BROWSER=1 (.ci/run)
    from autograder.engine import GradingOptions, Submission, grade_batch
    from autograder.reporting.student_page import render_report
    from autograder.tools.demo import CLASS, build_demo_course
    from grading_helpers import TEST_LIMITS

    # the demo class's llama_block students with catalogued mistakes; the named one has the most of them
    mistaken = {s.id: s.work["llama_block"].removeprefix("mistake:").split(",") for s in CLASS
                if s.work.get("llama_block", "").startswith("mistake:")}
    assert set(mistaken) == {"2024010005", "2024010006", "2024010018"}, mistaken
    assert max(mistaken, key=lambda sid: len(mistaken[sid])) == STUDENT
    assert sorted(len(m) for m in mistaken.values()) == [1, 1, 2]

    course = build_demo_course(tmp_path / "course", tuple(s for s in CLASS if s.id == STUDENT))
    (result,) = grade_batch([Submission(course.notebooks[(STUDENT, "llama_block")], "llama_block", STUDENT)],
                            GradingOptions(limits=TEST_LIMITS))
    assert result.student_id == STUDENT and result.status == "graded", result.message
    failed = [c for p in result.parts for c in p.checks if not c.passed]
    assert {c.diagnosis for c in failed} >= {"no_rope", "qk_length_one"}, [(c.name, c.diagnosis) for c in failed]
    assert len(failed) >= 10

    page = tmp_path / "report.html"
    page.write_text(render_report(result), encoding="utf-8")
    heights = {}
    with Chromium() as browser:
        tab = browser.open(page.as_uri())
        assert tab.errors == [] and tab.blocked == []
        for (width, mobile), limit in LIMITS.items():
            tab.set_width(width, mobile)
            assert tab.evaluate("window.innerWidth") == width
            heights[width] = tab.evaluate("document.documentElement.scrollHeight")
            if mobile:  # no sideways scrolling on a phone
                scroll, client = tab.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
                assert scroll <= client, (scroll, client)
    record_property("summary_line", f"report height of {STUDENT}/llama_block ({len(failed)} failed checks): "
                                    + ", ".join(f"{heights[w]} px at {w} px (limit {limit})"
                                                for (w, _), limit in LIMITS.items()))
    for (width, _), limit in LIMITS.items():
        assert heights[width] <= limit, heights
