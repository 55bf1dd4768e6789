"""The browser tests' driver (tests/browser.py) sees what it must: console errors, exceptions, off-machine requests;
and without chromium it skips, or fails under AUTOGRADE_REQUIRE_BROWSER=1 (.ci/run)."""

import pytest

import browser
from browser import Chromium, chromium_path


def test_no_chromium_skips_or_fails_when_required(monkeypatch):
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setattr(browser, "REQUIRE", False)
    with pytest.raises(pytest.skip.Exception):
        chromium_path()
    monkeypatch.setattr(browser, "REQUIRE", True)
    with pytest.raises(pytest.fail.Exception, match="AUTOGRADE_REQUIRE_BROWSER"):
        chromium_path()


def test_ci_requires_the_browser():
    from autograder import REPO_ROOT

    assert "export AUTOGRADE_REQUIRE_BROWSER=1" in (REPO_ROOT / ".ci" / "run").read_text()


def test_errors_and_off_machine_requests_are_caught(tmp_path):
    chromium_path()
    page = tmp_path / "bad.html"
    page.write_text('<!DOCTYPE html><html><body><p>正文</p><script>console.error("boom"); missing_function();</script>'
                    '<img src="https://example.com/tracker.png"></body></html>', encoding="utf-8")
    with Chromium(timeout=30) as chromium:
        tab = chromium.open(page.as_uri())
        assert tab.text().strip() == "正文"
        errors = tab.errors
        assert any("boom" in e for e in errors) and any("missing_function" in e for e in errors), errors
        assert tab.blocked == ["https://example.com/tracker.png"]
        good = tmp_path / "good.html"
        good.write_text("<!DOCTYPE html><p>好</p>", encoding="utf-8")
        clean = chromium.open(good.as_uri())
        assert clean.errors == [] and clean.blocked == []
