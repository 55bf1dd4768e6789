"""`autograde selftest` passes on this repository, and would catch a grader that is wrong."""

import pytest

from autograder import selftest

pytestmark = pytest.mark.slow


def test_selftest_passes():
    lines = []
    assert selftest.run_selftest(echo=lines.append) == 0, "\n".join(lines)
    assert lines[-1].startswith("18/18 as expected")


def test_selftest_fails_when_the_release_would_score(monkeypatch):
    # point the release side at the references: the grader would then wrongly give release notebooks marks
    monkeypatch.setattr(selftest, "release_path", selftest.reference_path)
    lines = []
    assert selftest.run_selftest(echo=lines.append) == 1
    assert "WRONG" in "\n".join(lines)
