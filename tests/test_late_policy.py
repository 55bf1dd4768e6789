"""The late policy, its settings (nbgrader_config.py and flags) and the hand-in rules, without grading."""

import getpass
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder.cli import app
from autograder.intake.exchange import ExchangeLocation
from autograder.intake.handin import os_user_exists
from autograder.intake.handin import HandInError, HandInOptions, HandInSettings, assess, load_settings
from autograder.intake.late import LatePolicy, LatePolicyError
from autograder.results import SubmissionResult
from conftest import release_notebook

HOUR, DAY = 3600.0, 86400.0


@pytest.mark.parametrize("policy, raw, late, expected", [
    (LatePolicy(), 10, 5 * DAY, 0),
    (LatePolicy("fixed", points=3), 10, 1, 3),
    (LatePolicy("fixed", points=3), 10, 0, 0),  # on time: nothing
    (LatePolicy("fixed", points=3), 2, 1, 2),  # never more than the raw score
    (LatePolicy("percent_per_hour", percent=5), 10, 1, 0.5),  # a started hour counts in full
    (LatePolicy("percent_per_hour", percent=5), 10, HOUR, 0.5),
    (LatePolicy("percent_per_hour", percent=5), 10, HOUR + 1, 1.0),
    (LatePolicy("percent_per_day", percent=10), 7, 1, 1.0),  # percent of the maximum (10), not of the raw score
    (LatePolicy("percent_per_day", percent=10), 10, 3 * DAY - 1, 3.0),
    (LatePolicy("percent_per_day", percent=10, cap_percent=25), 10, 9 * DAY, 2.5),
    (LatePolicy("percent_per_day", percent=40), 3, 2 * DAY, 3),
    (LatePolicy("percent_per_day", percent=10), 0, 2 * DAY, 0),
])
def test_penalty(policy, raw, late, expected):
    assert policy.penalty(raw, 10, late) == pytest.approx(expected)


@pytest.mark.parametrize("kwargs, message", [
    (dict(method="weekly"), "unknown method 'weekly'"),
    (dict(method="fixed"), "needs points > 0"),
    (dict(method="percent_per_day"), "needs 0 < percent <= 100"),
    (dict(method="percent_per_hour", percent=150), "needs 0 < percent <= 100"),
    (dict(method="percent_per_day", percent=10, cap_percent=0), "cap_percent must be in (0, 100]"),
    (dict(method="fixed", points="two"), "points must be a number"),
    (dict(method="fixed", points=-1), "must not be negative"),
])
def test_a_misconfigured_policy_is_a_clear_error(kwargs, message):
    with pytest.raises(LatePolicyError, match=message.replace("(", r"\(").replace(")", r"\)")):
        LatePolicy(**kwargs)


def course_with(tmp_path: Path, settings: str) -> Path:
    course = tmp_path / "course"
    folder = course / "submitted" / "alice" / "rmsnorm"
    folder.mkdir(parents=True)
    nbformat.write(nbformat.read(release_notebook("rmsnorm"), as_version=4), folder / "rmsnorm.ipynb")
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'llm'\n"
                                               f"c.Exchange.root = {str(tmp_path / 'exchange')!r}\n" + settings)
    return course


def test_settings_come_from_nbgrader_config_and_flags_override(tmp_path):
    course = course_with(tmp_path, "c.Autograde.late_policy = 'percent_per_day'\nc.Autograde.late_percent = 10\n"
                                   "c.Autograde.late_cap_percent = 30\nc.Autograde.time_tolerance = 60\n")
    settings = load_settings(course)
    assert settings.policy == LatePolicy("percent_per_day", percent=10, cap_percent=30)
    assert settings.time_tolerance == 60
    assert settings.exchange == ExchangeLocation(tmp_path / "exchange", "llm")
    assert load_settings(course, HandInOptions(late_percent=5)).policy.percent == 5
    # another method on the command line does not inherit the file's numbers
    assert load_settings(course, HandInOptions(late_policy="fixed", late_points=1)).policy == LatePolicy("fixed", 1)


@pytest.mark.parametrize("settings, message", [
    ("c.Autograde.late_polcy = 'fixed'\n", "unknown setting(s) c.Autograde.late_polcy"),
    ("c.Autograde.late_policy = 'fixed'\n", "needs points > 0"),
    ("c.Autograde.late_policy = 'percent_per_week'\n", "unknown method 'percent_per_week'"),
    ("c.Autograde.time_tolerance = -5\n", "time_tolerance must be a number of seconds >= 0"),
    ("raise RuntimeError('typo')\n", "cannot load it: RuntimeError: typo"),
])
def test_bad_settings_name_the_file_and_the_setting(tmp_path, settings, message):
    course = course_with(tmp_path, settings)
    with pytest.raises(HandInError) as info:
        load_settings(course)
    assert message in str(info.value) and "nbgrader_config.py" in str(info.value)


def test_autograde_grade_refuses_a_bad_policy_before_grading(tmp_path):
    course = course_with(tmp_path, "c.Autograde.late_policy = 'percent_per_day'\n")
    done = CliRunner().invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                                    "--out", str(tmp_path / "out")])
    assert done.exit_code == 2 and "needs 0 < percent <= 100" in done.output
    assert not (tmp_path / "out" / "results").exists()
    done = CliRunner().invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                                    "--out", str(tmp_path / "out"), "--late-policy", "fixed", "--late-points", "-2"])
    assert done.exit_code == 2 and "must not be negative" in done.output


def inbound_submission(tmp_path: Path, student: str, timestamp: str) -> tuple[Path, HandInSettings]:
    """A collected submission and its inbound folder in an exchange (written by the user running the test)."""
    exchange = ExchangeLocation(tmp_path / "exchange", "llm")
    inbound = exchange.inbound / f"{student}+rmsnorm+{timestamp}+xyz"
    collected = tmp_path / "submitted" / student / "rmsnorm"
    for folder in (inbound, collected):
        folder.mkdir(parents=True)
        (folder / "rmsnorm.ipynb").write_text("{}")
        (folder / "timestamp.txt").write_text(timestamp)
    return collected, HandInSettings(policy=LatePolicy("fixed", points=4), exchange=exchange)


def utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


def test_the_owner_must_be_the_student_and_the_time_what_the_exchange_saw(tmp_path):
    me = getpass.getuser()
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    result = SubmissionResult(me, "rmsnorm", "graded", 10.0, 10.0)

    honest, settings = inbound_submission(tmp_path / "1", me, utc(now))
    handin = assess(result, honest, honest / "rmsnorm.ipynb", settings, due=now - timedelta(hours=2), extension=None)
    assert handin.flags == [] and handin.time_source == "timestamp.txt" and handin.submitter == me
    assert handin.penalty == 4 and 2 * HOUR - 5 < handin.seconds_late < 2 * HOUR + 5
    extended = assess(result, honest, None, settings, due=now - timedelta(hours=2), extension=timedelta(hours=3))
    assert extended.penalty == 0 and extended.seconds_late == 0

    # timestamp.txt (and the folder name) claim a time a day ago: the time the folder changed last is used
    forged, settings = inbound_submission(tmp_path / "2", me, utc(now - timedelta(days=1)))
    handin = assess(result, forged, forged / "rmsnorm.ipynb", settings, due=now - timedelta(hours=2), extension=None)
    assert [f.kind for f in handin.flags] == ["time"] and handin.time_source == "exchange"
    assert handin.penalty == 4
    # `touch -d` cannot move it back: the ctime changes with it
    inbound = next(settings.exchange.inbound.iterdir())
    os.utime(inbound / "rmsnorm.ipynb", (0, 0))
    assert assess(result, forged, None, settings, due=now - timedelta(hours=2), extension=None).penalty == 4

    # submitted under the id of another OS user than the one who wrote it: identity, and its feedback withheld
    other_user = next(name for name in ("daemon", "bin", "nobody") if name != me and os_user_exists(name))
    other = SubmissionResult(other_user, "rmsnorm", "graded", 10.0, 10.0)
    collected, settings = inbound_submission(tmp_path / "3", other_user, utc(now))
    handin = assess(other, collected, None, settings, due=None, extension=None)
    assert [f.kind for f in handin.flags] == ["identity", "feedback_withheld"]
    assert handin.submitter == me and handin.penalty == 0

    # an id no OS user has (a course run as one user): ownership means nothing there; unverified, feedback written
    nobody = SubmissionResult("someone-else", "rmsnorm", "graded", 10.0, 10.0)
    stranger, settings = inbound_submission(tmp_path / "4", "someone-else", utc(now))
    handin = assess(nobody, stranger, None, settings, due=None, extension=None)
    assert [f.kind for f in handin.flags] == ["unverified"] and "no OS user is named" in handin.flags[0].message
    other = nobody

    # an exchange whose inbound folder lacks the submission: unverified, timestamp.txt used
    (collected / "timestamp.txt").write_text(utc(now - timedelta(minutes=1)))
    handin = assess(other, collected, None, settings, due=None, extension=None)
    assert [f.kind for f in handin.flags] == ["unverified"] and handin.time_source == "timestamp.txt"


def test_a_submission_without_timestamp_txt_is_said_to_have_none(tmp_path):
    """Absent is not "not a valid time": said only where lateness counts (a due date), and never both."""
    from autograder.intake.handin import facts

    folder = tmp_path / "submitted" / "alice" / "rmsnorm"
    folder.mkdir(parents=True)
    settings = HandInSettings(policy=LatePolicy("fixed", points=4))
    due = datetime(2026, 11, 30, 12)
    handin = facts("alice", "rmsnorm", folder, None, settings, due, None)
    assert [(f.kind, f.message_zh) for f in handin.flags] == [("time", "提交中没有 timestamp.txt，提交时间未知")]
    assert "valid" not in handin.flags[0].message and handin.submitted_at is None and handin.seconds_late == 0
    assert facts("alice", "rmsnorm", folder, None, settings, None, None).flags == []  # no due date: nothing to say
    (folder / "timestamp.txt").write_text("yesterday-ish")
    unreadable = facts("alice", "rmsnorm", folder, None, settings, due, None)
    assert [f.message_zh for f in unreadable.flags] == ["提交中的 timestamp.txt 不是一个有效的时间"]


def test_the_hand_in_time_keeps_nbgraders_microseconds(tmp_path):
    """formgrader compares the gradebook's time with its own reading of timestamp.txt exactly."""
    from nbgrader.utils import parse_utc

    from autograder.intake.handin import facts

    folder = tmp_path / "submitted" / "alice" / "rmsnorm"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-11-30 18:09:01.654321 Asia/Shanghai")
    handin = facts("alice", "rmsnorm", folder, None, HandInSettings(), datetime(2026, 12, 1), None)
    assert datetime.fromisoformat(handin.submitted_exact) == parse_utc("2026-11-30 18:09:01.654321 Asia/Shanghai")
    assert handin.submitted_exact == "2026-11-30 10:09:01.654321".replace(" ", "T")
    assert handin.submitted_at == "2026-11-30 10:09:01 UTC"  # what the pages show
