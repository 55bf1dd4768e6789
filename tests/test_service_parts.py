"""The service's parts without a hub: its settings (every bad value named), the practice secrets (one-way, rotating as
configured), the store's budget (refunds give an attempt back; waiting attempts count) and the notebook's intake."""

import hashlib
import hmac
from datetime import date
from pathlib import Path

import pytest

pytest.importorskip("jupyterhub")

from autograder.course import student_seed  # noqa: E402
from autograder.service.app import clean_filename, notebook_problem  # noqa: E402
from autograder.service.practice import attempt_secret, practice_secret  # noqa: E402
from autograder.service.settings import ServiceSettingsError, load_service_settings  # noqa: E402
from autograder.service.store import GRADED, QUEUED, REFUNDED, Refused, Store  # noqa: E402

IDS = ["rmsnorm", "swiglu"]


def settings_of(tmp_path, text: str):
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n" + text)
    return load_service_settings(tmp_path, IDS)


def test_settings_defaults_and_per_assignment_overrides(tmp_path):
    s = settings_of(tmp_path, 'c.AutogradeService.attempts_per_day = 3\n'
                              'c.AutogradeService.assignments = {"swiglu": {"feedback": "score", "attempts_total": None}}\n')
    assert s.policy("rmsnorm").attempts_per_day == 3 and s.policy("rmsnorm").feedback == "report"
    assert s.policy("swiglu").attempts_per_day == 3 and s.policy("swiglu").feedback == "score"
    assert s.policy("swiglu").attempts_total is None and s.policy("rmsnorm").attempts_total == 20
    assert s.instructors_group == "instructors" and s.rate_per_minute == 6


@pytest.mark.parametrize("line, named", [
    ("c.AutogradeService.attempts_per_dya = 3", "unknown setting(s) c.AutogradeService.attempts_per_dya"),
    ("c.AutogradeService.attempts_per_day = 0", "c.AutogradeService.attempts_per_day must be a whole number >= 1"),
    ("c.AutogradeService.attempts_total = True", "c.AutogradeService.attempts_total must be a whole number >= 1"),
    ("c.AutogradeService.feedback = 'full'", "c.AutogradeService.feedback must be 'report' or 'checks' or 'score'"),
    ("c.AutogradeService.practice_inputs = 'week'", "c.AutogradeService.practice_inputs must be 'attempt'"),
    ("c.AutogradeService.after_due = 'grade'", "c.AutogradeService.after_due must be 'refuse'"),
    ("c.AutogradeService.hand_verdict = 1", "c.AutogradeService.hand_verdict must be True or False"),
    ("c.AutogradeService.rate_per_minute = 0", "c.AutogradeService.rate_per_minute must be a whole number >= 1"),
    ("c.AutogradeService.instructors_group = ' '", "c.AutogradeService.instructors_group must be a hub group"),
    ("c.AutogradeService.assignments = {'mla2': {}}", "no assignment 'mla2'"),
    ("c.AutogradeService.assignments = {'rmsnorm': {'colour': 1}}", "c.AutogradeService.assignments['rmsnorm']"),
    ("c.AutogradeService.assignments = ['rmsnorm']", "c.AutogradeService.assignments must be a dict"),
    ("c.AutogradeService.assignments = {'rmsnorm': {'feedback': 'all'}}", "c.AutogradeService.feedback must be"),
])
def test_a_bad_setting_is_named(tmp_path, line, named):
    with pytest.raises(ServiceSettingsError, match=None) as raised:
        settings_of(tmp_path, line + "\n")
    assert named in str(raised.value), str(raised.value)
    assert "nbgrader_config.py" in str(raised.value)


def test_the_practice_secret_is_one_way_and_each_rotation_draws_its_own_inputs():
    course = b"0123456789abcdef" * 4
    practice = practice_secret(course)
    assert practice == hmac.new(course, b"autograde practice inputs v1", hashlib.sha256).hexdigest().encode()
    assert course not in practice
    day, other_day = date(2026, 12, 3), date(2026, 12, 4)
    per_attempt = {attempt_secret(practice, "attempt", n, day) for n in (1, 2, 3)}
    assert len(per_attempt) == 3
    assert attempt_secret(practice, "attempt", 1, day) == attempt_secret(practice, "attempt", 1, other_day)
    assert attempt_secret(practice, "day", 1, day) == attempt_secret(practice, "day", 7, day)
    assert attempt_secret(practice, "day", 1, day) != attempt_secret(practice, "day", 1, other_day)
    assert attempt_secret(practice, "fixed", 1, day) == attempt_secret(practice, "fixed", 9, other_day)
    final = student_seed(course, "rmsnorm", "alice")
    seeds = {student_seed(s, "rmsnorm", "alice") for s in per_attempt | {attempt_secret(practice, "fixed", 1, day)}}
    assert final not in seeds and len(seeds) == 4
    with pytest.raises(ValueError, match="unknown rotation"):
        attempt_secret(practice, "hourly", 1, day)


def test_the_budget_counts_waiting_and_graded_attempts_and_gives_refunded_ones_back(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'service.sqlite'}")

    def add(user="alice", day="2026-12-03", now=None, per_day=2, total=3):
        return store.add(user, "rmsnorm", "rmsnorm.ipynb", b"{}", day, "report", lambda n: f"secret {n}",
                         per_day, total, 100, now=now)

    first, second = add(now=1000), add(now=1001)
    assert (first.number, second.number) == (1, 2) and first.state == QUEUED
    with pytest.raises(Refused, match="每天 2 次"):
        add(now=1002)
    assert store.used("alice", "rmsnorm", "2026-12-03") == (2, 2)
    assert add(user="bob", now=1002).number == 1  # another student's budget is their own
    claimed = store.claim(10)
    assert [a.id for a in claimed] == [first.id, second.id, claimed[2].id] and claimed[0].secret == "secret 1"
    store.finish(first.id, REFUNDED, None, None, {"status": "error"}, None, "ours")
    store.finish(second.id, GRADED, 8, 8, {"score": 8}, {"seed": 1})
    assert store.used("alice", "rmsnorm", "2026-12-03") == (1, 1)
    third = add(now=1003)
    assert third.number == 3  # numbers count every attempt (each draws its own inputs), the budget only those kept
    with pytest.raises(Refused, match="每天 2 次"):
        add(now=1004)
    fourth = add(day="2026-12-04", now=90000)
    assert fourth.number == 4
    with pytest.raises(Refused, match="共 3 次"):
        add(day="2026-12-05", now=200000)
    # the attempts being graded when the service stopped (bob's, claimed above, and the third now) are queued again
    # when it starts
    assert [a.id for a in store.claim(1)] == [third.id]
    assert store.requeue_interrupted() == 2 and store.get(third.id).state == QUEUED
    assert store.position(fourth) == 2 and store.waiting() == 3  # bob's and the third are ahead of the fourth
    with pytest.raises(Refused, match="每分钟最多 2 次"):
        store.add("carol", "rmsnorm", "x.ipynb", b"{}", "2026-12-05", "report", str, None, None, 2, now=300000)
        store.add("carol", "rmsnorm", "x.ipynb", b"{}", "2026-12-05", "report", str, None, None, 2, now=300001)
        store.add("carol", "rmsnorm", "x.ipynb", b"{}", "2026-12-05", "report", str, None, None, 2, now=300002)
    store.close()


def test_the_upload_is_read_as_the_students_checker_reads_it():
    assert notebook_problem(b"\xff\xfe not utf-8") == "笔记本文件不是 UTF-8 编码，可能已损坏；请用 Jupyter 重新保存"
    assert notebook_problem(b"{not json") and "JSON" in notebook_problem(b"{not json")
    assert notebook_problem(b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}') is None
    assert clean_filename("../../etc/passwd", "rmsnorm") == "rmsnorm.ipynb"
    assert clean_filename("C:\\fakepath\\my\u202enb.ipynb", "rmsnorm").endswith(".ipynb")
    assert clean_filename("a" * 500 + ".ipynb", "rmsnorm") == "rmsnorm.ipynb"  # cut to 120, no longer .ipynb
    assert clean_filename("作业一.ipynb", "rmsnorm") == "作业一.ipynb"


# --- the same store on PostgreSQL (issue 26: "the same schema on PostgreSQL through SQLAlchemy") ------------------


def _postgres_bin() -> Path | None:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL server of Debian's, started here for this module: its own data folder, a socket folder of its
    own, no TCP; as the `postgres` user when this runs as root (PostgreSQL refuses root)."""
    import os
    import pwd
    import shutil
    import subprocess
    import tempfile

    pytest.importorskip("psycopg")
    binaries = _postgres_bin()
    if binaries is None:
        if os.environ.get("AUTOGRADE_REQUIRE_HUB") == "1":
            pytest.fail("PostgreSQL is not installed (scripts/dev.sh installs Debian's postgresql as root)")
        pytest.skip("PostgreSQL is not installed (apt-get install postgresql)")
    run_as: list[str] = []
    folder = Path(tempfile.mkdtemp(prefix="autograde-postgres-", dir="/tmp"))
    if os.getuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
        run_as = ["runuser", "-u", "postgres", "--"]
    data, socket_dir = folder / "data", folder
    subprocess.run([*run_as, str(binaries / "initdb"), "-D", str(data), "-U", "autograde", "--auth=trust",
                    "--no-sync"], check=True, capture_output=True, timeout=120)
    subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-w", "-l", str(folder / "log"), "-o",
                    f"-k {socket_dir} -c listen_addresses='' -c fsync=off", "start"], check=True,
                   capture_output=True, timeout=120)
    try:
        subprocess.run([*run_as, str(binaries / "createdb"), "-h", str(socket_dir), "-U", "autograde", "service"],
                       check=True, capture_output=True, timeout=60)
        yield f"postgresql+psycopg://autograde@/service?host={socket_dir}"
    finally:
        subprocess.run([*run_as, str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(folder, ignore_errors=True)


def test_the_same_store_on_postgresql(postgres_url):
    import sqlalchemy as sa

    store = Store(postgres_url)
    try:
        assert store.engine.dialect.name == "postgresql"
        attempts = [store.add(user, "rmsnorm", "rmsnorm.ipynb", b"\x00{}" * 1000, "2026-12-03", "report",
                              lambda n: f"secret {n}", 2, 3, 100, now=1000 + i)
                    for i, user in enumerate(["alice", "alice", "bob"])]
        with pytest.raises(Refused, match="每天 2 次"):
            store.add("alice", "rmsnorm", "rmsnorm.ipynb", b"{}", "2026-12-03", "report", str, 2, 3, 100, now=2000)
        claimed = store.claim(2)
        assert [a.id for a in claimed] == [attempts[0].id, attempts[1].id]
        assert claimed[0].notebook == b"\x00{}" * 1000 and claimed[1].secret == "secret 2"
        store.finish(claimed[0].id, REFUNDED, None, None, {"status": "error"}, None, "ours")
        store.finish(claimed[1].id, GRADED, 8, 8, {"score": 8, "score_text": "8 / 8"}, {"seed": 7})
        assert store.used("alice", "rmsnorm", "2026-12-03") == (1, 1)
        assert store.get(claimed[1].id, full=True).result == {"seed": 7}
        assert store.position(attempts[2]) == 0 and store.waiting() == 1
        assert [a.number for a in store.history("alice")] == [2, 1]
        with store.engine.connect() as db:  # the schema as SQLAlchemy made it there
            columns = {c["name"] for c in sa.inspect(db).get_columns("attempts")}
        assert {"id", "user", "notebook", "secret", "view", "result"} <= columns
    finally:
        store.close()


def test_an_attempt_is_given_back_only_for_a_reason_of_ours():
    from autograder.engine import GRADER_ERROR
    from autograder.results import STATUS_ERROR, CheckResult, PartResult, SubmissionResult
    from autograder.service.grading import _ours

    def result(message="", status=STATUS_ERROR, **flags):
        check = CheckResult("test_x", "part", False, 0, 1, "", "", check_bug=flags.pop("check_bug", False))
        return SubmissionResult(student_id="alice", assignment_id="rmsnorm", status=status, score=0, max_score=1,
                                message=message, parts=[PartResult("part", 0, 1, [check])], **flags)

    assert _ours(result(f"{GRADER_ERROR}（KeyError），请联系老师 (grader error: KeyError: 'x')"))
    assert _ours(result(infrastructure_error=True)) and _ours(result(status="graded", check_bug=True))
    # the student's own: an unreadable notebook, the memory their code's data took, a wrong answer
    assert not _ours(result("笔记本文件不是 UTF-8 编码"))
    assert not _ours(result("这份提交无法评分：评它时评分进程的内存超出了限制（你的代码返回的数据太大？），请联系老师"))
    assert not _ours(result(status="graded"))
    assert not _ours(result(f"x {GRADER_ERROR}"))  # only the engine's own message, from its start


def test_the_batch_folders_of_a_killed_service_are_removed_and_no_others(tmp_path):
    import subprocess

    from autograder.service.grading import BATCH_PREFIX, batch_folder_prefix, remove_stale_batch_folders

    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    dead = tmp_path / f"{BATCH_PREFIX}{gone.pid}-abc"
    (dead / "attempt").mkdir(parents=True)
    (dead / "attempt" / "rmsnorm.ipynb").write_text("{}")
    alive = tmp_path / (batch_folder_prefix() + "def")  # this process's own: grading now
    alive.mkdir()
    foreign = tmp_path / f"{BATCH_PREFIX}1-ghi"  # pid 1 is alive (and another user's where not root)
    foreign.mkdir()
    unnamed = tmp_path / f"{BATCH_PREFIX}x1y2z3"  # not one of ours by its name
    unnamed.mkdir()
    target = tmp_path / "elsewhere"
    target.mkdir()
    link = tmp_path / f"{BATCH_PREFIX}{gone.pid}-jkl"  # a link with a dead pid's name: never followed
    link.symlink_to(target)
    assert remove_stale_batch_folders(tmp_path) == [dead]
    assert not dead.exists()
    assert alive.is_dir() and foreign.is_dir() and unnamed.is_dir() and target.is_dir() and link.is_symlink()
