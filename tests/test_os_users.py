"""The tests with real OS users (tests/os_users.py) skip without root, or fail under AUTOGRADE_REQUIRE_ROOT=1
(.ci/run), as the browser tests do without chromium."""

import pytest

import os_users
from autograder import REPO_ROOT


def test_without_root_they_skip_or_fail_when_required(monkeypatch):
    monkeypatch.setattr(os_users.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os_users, "REQUIRE_ROOT", False)
    with pytest.raises(pytest.skip.Exception, match="only as root"):
        os_users.require_root()
    monkeypatch.setattr(os_users, "REQUIRE_ROOT", True)
    with pytest.raises(pytest.fail.Exception, match="AUTOGRADE_REQUIRE_ROOT"):
        os_users.require_root()
    with pytest.raises(pytest.fail.Exception, match="AUTOGRADE_REQUIRE_ROOT"):
        with os_users.os_users(["x"]):  # nothing is created
            pass


def test_without_useradd_they_skip_or_fail_when_required(monkeypatch):
    monkeypatch.setattr(os_users.os, "geteuid", lambda: 0)
    monkeypatch.setattr(os_users.shutil, "which", lambda name: None if name == "useradd" else f"/usr/sbin/{name}")
    monkeypatch.setattr(os_users, "REQUIRE_ROOT", False)
    with pytest.raises(pytest.skip.Exception, match="useradd"):
        os_users.require_root()
    monkeypatch.setattr(os_users, "REQUIRE_ROOT", True)
    with pytest.raises(pytest.fail.Exception, match="AUTOGRADE_REQUIRE_ROOT"):
        os_users.require_root()


def test_ci_requires_root():
    assert "export AUTOGRADE_REQUIRE_ROOT=1" in (REPO_ROOT / ".ci" / "run").read_text()
