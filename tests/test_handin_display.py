"""Issue 23, items 2-4, without grading: times in the course's zone (nbgrader's c.NbGraderAPI.timezone), feedback
withheld only where the OS's owner means something and always said, Canvas's late mark, the course's settings for an
LMS download, and the reports in the files the LMS takes back. Hand-ins and results are built directly."""

import csv
import io
import os
import zipfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from autograder.intake.discovery import discover
from autograder.intake.exchange import ExchangeLocation
from autograder.intake.handin import HandInError, facts, load_settings, os_user_exists, parse_time
from autograder.intake.lms import parse_canvas_name, read_export
from autograder.recording.lms_export import CANVAS_FEEDBACK, MOODLE_FEEDBACK_NAME, lms_feedback
from autograder.intake.late import LatePolicy
from autograder.recording.outputs import write_grades_csv
from autograder.results import SubmissionResult
from autograder.reporting.class_summary import render_summary
from autograder.recording.feedback import feedback_page, write_feedback
from autograder.intake.local_time import NBGRADER_TIMESTAMP_FORMAT, NBGRADER_TIMEZONE, TimeDisplay
from autograder.reporting.student_page import render_report
from autograder.class_run import _handin_facts, settings_course
from autograder.run_summary import RunSummary
from conftest import source_notebook


def course_with(tmp_path: Path, *lines: str) -> Path:
    course = tmp_path / "course"
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text("c = get_config()\n" + "".join(f"{line}\n" for line in lines))
    return course


def submission_folder(tmp_path: Path, student: str, timestamp: str) -> Path:
    folder = tmp_path / "submitted" / student / "rmsnorm"
    folder.mkdir(parents=True)
    (folder / "rmsnorm.ipynb").write_text("{}")
    (folder / "timestamp.txt").write_text(timestamp)
    return folder


def result_with(handin, student="alice", score=10.0) -> SubmissionResult:
    result = SubmissionResult(student, "rmsnorm", "graded", score, 10.0)
    result.handin = handin
    return result


def test_nbgraders_own_defaults():
    """What nbgrader shows without a setting (nbgrader.apps.api.NbGraderAPI's traits) is our default too."""
    from nbgrader.apps.api import NbGraderAPI

    traits = NbGraderAPI.class_traits()
    assert (traits["timezone"].default_value, traits["timestamp_format"].default_value) \
        == (NBGRADER_TIMEZONE, NBGRADER_TIMESTAMP_FORMAT) == ("UTC", "%Y-%m-%d %H:%M:%S %Z")


@pytest.mark.parametrize("late, policy, charged, shown, summary", [
    (3 * 3600 + 30, LatePolicy("percent_per_hour", percent=10), 4.0, "迟交 3 小时 30 秒", "3h 30s"),
    (86400 + 1, LatePolicy("percent_per_day", percent=10), 2.0, "迟交 1 天 1 秒", "1d 1s"),
])
def test_the_lateness_a_student_reads_is_exact_to_the_second(tmp_path, late, policy, charged, shown, summary):
    """A penalty counts every started hour or day; the lateness shown beside it keeps every unit down to the second:
    3 hours and 30 seconds, charged as 4 started hours, never reads "3 小时" (nor 1 day and 1 second "1 天")."""
    from autograder.intake.handin import with_penalty

    course = course_with(tmp_path, 'c.NbGraderAPI.timezone = "Asia/Shanghai"')
    due = parse_time("2026-12-02 00:00 Asia/Shanghai")
    submitted = (due + timedelta(hours=8, seconds=late)).strftime("%Y-%m-%d %H:%M:%S.000000 Asia/Shanghai")
    handin = facts("alice", "rmsnorm", submission_folder(tmp_path, "alice", submitted), None, load_settings(course),
                   due, None)
    assert handin.seconds_late == late
    result = result_with(with_penalty(handin, policy, 10.0, 10.0))
    assert result.handin.penalty == charged
    assert shown in render_report(result)
    assert f'>{summary}<' in render_summary([result], ["alice"])


def test_a_due_date_in_the_courses_zone_shows_as_given_with_the_zone_named(tmp_path):
    """Due `2026-12-02 02:09 Asia/Shanghai` is 2026-12-01 18:09 UTC: the report, the summary and grades.csv show
    2026-12-02 02:09 and name the zone when the course's zone is Asia/Shanghai; UTC (nbgrader's default) otherwise."""
    course = course_with(tmp_path, 'c.NbGraderAPI.timezone = "Asia/Shanghai"')
    settings = load_settings(course)
    assert settings.display == TimeDisplay("Asia/Shanghai", NBGRADER_TIMESTAMP_FORMAT)
    due = parse_time("2026-12-02 02:09 Asia/Shanghai")
    assert due == datetime(2026, 12, 1, 18, 9)  # stored as nbgrader stores it: naive UTC
    folder = submission_folder(tmp_path, "alice", "2026-12-02 03:00:00.000000 Asia/Shanghai")  # 51 minutes late
    handin = facts("alice", "rmsnorm", folder, None, settings, due, None)
    result = result_with(handin)
    report = render_report(result)
    assert "2026-12-02 02:09:00 CST (Asia/Shanghai)" in report and "2026-12-02 03:00:00 CST (Asia/Shanghai)" in report
    assert "2026-12-01 18:09" not in report and "迟交 51 分钟" in report
    summary = render_summary([result], ["alice"])
    assert "2026-12-02 02:09:00 CST (Asia/Shanghai)" in summary and "2026-12-01 18:09" not in summary
    write_grades_csv([result], ["alice"], ["rmsnorm"], tmp_path / "grades.csv")
    row = next(csv.DictReader(io.StringIO((tmp_path / "grades.csv").read_text())))
    assert row["rmsnorm_submitted"] == "2026-12-02 03:00:00 CST (Asia/Shanghai)"

    # the same hand-in in a course that sets no zone: nbgrader's default, UTC, named
    plain = facts("alice", "rmsnorm", folder, None, load_settings(course_with(tmp_path / "plain")), due, None)
    assert "2026-12-01 18:09:00 UTC" in render_report(result_with(plain))
    # the course's own format, and the zone still named
    course = course_with(tmp_path / "fmt", 'c.NbGraderAPI.timezone = "Asia/Shanghai"',
                         'c.NbGraderAPI.timestamp_format = "%d.%m.%Y %H:%M"')
    own = facts("alice", "rmsnorm", folder, None, load_settings(course), due, None)
    assert "02.12.2026 02:09 (Asia/Shanghai)" in render_report(result_with(own))


def test_an_unknown_zone_is_a_clear_error(tmp_path):
    with pytest.raises(HandInError, match="c.NbGraderAPI.timezone: unknown time zone 'Mars/Olympus'"):
        load_settings(course_with(tmp_path, 'c.NbGraderAPI.timezone = "Mars/Olympus"'))


def test_the_extension_is_printed_in_the_courses_zone(tmp_path):
    from typer.testing import CliRunner

    from autograder.cli import app
    from conftest import run_nbgrader

    course = course_with(tmp_path, 'c.NbGraderAPI.timezone = "Asia/Shanghai"',
                         'c.CourseDirectory.root = "' + str(tmp_path / "course") + '"')
    (course / "roster.csv").write_text("id,first_name,last_name,email\nalice,,,\n")
    for args in (["db", "student", "import", "roster.csv"],
                 ["db", "assignment", "add", "rmsnorm", "--duedate=2026-12-02 02:09:00 Asia/Shanghai"]):
        done = run_nbgrader(args, cwd=course)
        assert done.returncode == 0, done.stderr
    done = CliRunner().invoke(app, ["extension", "rmsnorm", "alice", "--days", "1", "--course", str(course)])
    assert done.exit_code == 0, done.output
    assert "due 2026-12-03 02:09:00 CST (Asia/Shanghai)" in done.output, done.output


def test_feedback_is_withheld_only_where_the_owner_means_something_and_said_for_whom(tmp_path):
    """An inbound folder written by the grader's user: a student with no OS user of that name (a course run as one
    user) is `unverified` and gets feedback; one whose OS user exists but did not write it is withheld, and the run's
    output, the summary and grades.csv say for whom and why. Every path printed exists."""
    me = os.getuid()
    other_user = next(name for name in ("daemon", "bin", "nobody") if os_user_exists(name)
                      and __import__("pwd").getpwnam(name).pw_uid != me)
    exchange = ExchangeLocation(tmp_path / "exchange", "llm")
    settings = load_settings(None)
    settings = type(settings)(policy=settings.policy, exchange=exchange)
    results = []
    for student in ("no-such-os-user", other_user):
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
        inbound = exchange.inbound / f"{student}+rmsnorm+{stamp}+x"
        inbound.mkdir(parents=True)
        (inbound / "timestamp.txt").write_text(stamp)
        folder = submission_folder(tmp_path, student, stamp)
        results.append(result_with(facts(student, "rmsnorm", folder, None, settings, None, None), student))
    unverified, withheld = results
    assert [f.kind for f in unverified.flags] == ["unverified"]
    # an id with no OS user, but written by an owner named like another student of the roster: identity after all
    me_name = __import__("pwd").getpwuid(me).pw_name
    forged = facts("no-such-os-user", "rmsnorm", tmp_path / "submitted" / "no-such-os-user" / "rmsnorm", None,
                   type(settings)(policy=settings.policy, exchange=exchange, roster=frozenset({me_name})), None, None)
    assert [f.kind for f in forged.flags] == ["identity", "feedback_withheld"]
    assert [f.kind for f in withheld.flags] == ["identity", "feedback_withheld"]
    feedback = tmp_path / "course" / "feedback"
    for r in results:
        write_feedback(feedback, r, tmp_path / "submitted" / r.student_id / "rmsnorm", "rmsnorm.ipynb", "<p>report</p>")
    assert feedback_page(feedback, unverified).is_file() and not feedback_page(feedback, withheld).exists()
    assert (feedback_page(feedback, unverified).parent / "timestamp.txt").is_file()

    summary = RunSummary(tmp_path / "out", results, 2, 0, tmp_path / "gradebook.db", feedback, ["rmsnorm"])
    lines = summary.feedback_lines()
    assert lines[0] == f"feedback: 1 report(s) in {feedback}/<student>/<assignment>/  (nbgrader release_feedback)"
    assert any(line.startswith(f"feedback withheld: {other_user}/rmsnorm: submitted under the id {other_user!r} but "
                               "written by the OS user(s)") for line in lines), lines
    assert not any("no-such-os-user" in line for line in lines)
    assert "--release-flagged-feedback" in lines[-1]
    released = RunSummary(tmp_path / "out", results, 2, 0, tmp_path / "gradebook.db", feedback, ["rmsnorm"],
                          release_flagged=True)
    assert not any(line.startswith("feedback withheld") for line in released.feedback_lines())
    # a run that is no course's: no feedback/ printed that does not exist
    elsewhere = RunSummary(tmp_path / "out", results, 2, 0, tmp_path / "gradebook.db", None, ["rmsnorm"])
    assert "the reports above are the students' feedback" in elsewhere.feedback_lines()[0]

    assert "feedback_withheld" in render_summary(results, [r.student_id for r in results])
    write_grades_csv(results, [r.student_id for r in results], ["rmsnorm"], tmp_path / "grades.csv")
    flags = {row["student"]: row["rmsnorm_flags"] for row in csv.DictReader(open(tmp_path / "grades.csv"))}
    assert flags == {"no-such-os-user": "unverified", other_user: "identity;feedback_withheld"}


def canvas_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "canvas"
    folder.mkdir()
    for name in ("zhangalice_101_5001_rmsnorm.ipynb", "libob_late_102_5003_rmsnorm.ipynb"):
        (folder / name).write_bytes(source_notebook("rmsnorm").read_bytes())
    return folder


def test_canvas_late_mark_makes_the_hand_in_late(tmp_path):
    """Canvas says `_late` and nothing of when: late by the least the course's policy counts, flagged, and the report
    never says 按时提交 for it; alice (no mark, no time) is not late.""" 
    course = course_with(tmp_path, 'c.Autograde.late_policy = "percent_per_day"', "c.Autograde.late_percent = 10")
    settings = load_settings(course)
    found = {f.student_id: f for f in discover(canvas_folder(tmp_path), ["rmsnorm"], layout="canvas").found}
    assert found["canvas:102"].lms_late and not found["canvas:101"].lms_late
    due = datetime(2026, 12, 1, 18, 9)
    handin, penalized = _handin_facts("canvas:102", "rmsnorm", found["canvas:102"], settings, due, None, None)
    assert penalized and handin.lms_late and handin.seconds_late > 0 and handin.submitted_at is None
    result = result_with(handin, "canvas:102", score=9.0)
    result.handin.penalty = settings.policy.penalty(9.0, 10.0, handin.seconds_late)
    assert result.final_score == 8.0  # one started day: 10% of 10
    assert [f.kind for f in handin.flags] == ["time", "unmapped"] and "SpeedGrader" in handin.flags[0].message
    report = render_report(result)
    assert "按时提交" not in report and "迟交 （LMS 标记，提交时间未知）" in report and "未知（LMS 标记为迟交）" in report
    assert "LMS 标记这份作业为迟交" in report
    alice, _ = _handin_facts("canvas:101", "rmsnorm", found["canvas:101"], settings, None, None, None)
    assert [f.kind for f in alice.flags] == ["unmapped"] and not alice.lms_late and alice.seconds_late == 0


def test_an_lms_download_reads_the_courses_settings(tmp_path, monkeypatch):
    """An LMS zip is no course's submitted/: its settings come from --course, else the --gradebook's folder, else the
    current folder (as nbgrader reads it), whichever holds nbgrader_config.py."""
    course = course_with(tmp_path, 'c.Autograde.late_policy = "fixed"', "c.Autograde.late_points = 2")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert settings_course(None, None, course / "gradebook.db") == course.resolve()
    assert settings_course(None, course, tmp_path / "out" / "gradebook.db") == course.resolve()
    assert settings_course(None, None, tmp_path / "out" / "gradebook.db") is None
    monkeypatch.chdir(course)
    assert settings_course(None, None, tmp_path / "out" / "gradebook.db") == course.resolve()
    assert load_settings(settings_course(None, None, tmp_path / "out" / "gradebook.db")).policy \
        == LatePolicy("fixed", points=2)


MOODLE_WORKSHEET = ("Identifier,Full name,Email address,Status,Grade\n"
                    "Participant 201,Alice Zhang,alice@uni.edu,Submitted,\n"
                    "Participant 202,Bob_Li Jr,bob@uni.edu,Submitted,\n"
                    "Participant 203,Carol Wang,carol@uni.edu,Submitted,\n")
CANVAS_GRADEBOOK = ("Student,ID,SIS User ID,SIS Login ID,Section,rmsnorm (9001)\n"
                    "    Points Possible,,,,,10\n"
                    '"Zhang, Alice",101,,alice,A,\n'
                    '"Li, Bob",102,,bob,A,\n')


def reports_for(tmp_path: Path, *students: str) -> dict:
    reports = {}
    for student in students:
        path = tmp_path / "reports" / student.replace(":", "_") / "rmsnorm.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"<p>{student}</p>")
        reports[student] = path
    return reports


def moodle_imports(member: str) -> tuple[str, str, str] | None:
    """Moodle's own reading of a name in an uploaded feedback zip (mod/assign/feedback/file/importziplib.php,
    is_valid_filename_for_import; help text `feedbackzip_help`: "the participant id ... should be the second part of
    each filename immediately after the users full name"): (participant id, plugin type, plugin name) of the first
    path part that splits on `_` into at least four pieces with a numeric second one."""
    for part in member.split("/"):
        info = part.split("_", 4)
        if len(info) >= 4 and info[1].isdigit():
            return info[1], info[2], info[3]
    return None


def test_moodle_feedback_zip_uses_the_names_moodle_imports(tmp_path):
    (tmp_path / "w.csv").write_text(MOODLE_WORKSHEET)
    export = read_export(tmp_path / "w.csv")
    roster = {"alice": "alice@uni.edu", "bob": "bob@uni.edu"}
    reports = reports_for(tmp_path, "alice", "bob", "moodle:203")  # carol is unmapped: graded under her Moodle id
    done = lms_feedback(export, "rmsnorm", reports, roster, tmp_path / "lms")
    assert done.path.name == "rmsnorm-moodle-feedback.zip" and done.without == []
    with zipfile.ZipFile(done.path) as zf:
        members = {m: zf.read(m).decode() for m in zf.namelist()}
    assert members == {"Alice Zhang_201_assignfeedback_file_/rmsnorm.html": "<p>alice</p>",
                       "Bob Li Jr_202_assignfeedback_file_/rmsnorm.html": "<p>bob</p>",  # no `_` in the name
                       "Carol Wang_203_assignfeedback_file_/rmsnorm.html": "<p>moodle:203</p>"}
    for member in members:
        assert MOODLE_FEEDBACK_NAME.match(member), member
    assert {moodle_imports(m) for m in members} == {(p, "assignfeedback", "file") for p in ("201", "202", "203")}
    # a student with nothing graded is listed, not given someone else's report
    fewer = lms_feedback(export, "rmsnorm", reports_for(tmp_path, "alice"), roster, tmp_path / "lms2")
    assert fewer.without == ["Bob_Li Jr (202)", "Carol Wang (203)"]


def test_canvas_reports_are_files_named_for_each_student(tmp_path):
    (tmp_path / "g.csv").write_text(CANVAS_GRADEBOOK)
    export = read_export(tmp_path / "g.csv")
    done = lms_feedback(export, "rmsnorm", reports_for(tmp_path, "alice", "bob"), {"alice": "", "bob": ""},
                        tmp_path / "lms")
    names = sorted(p.name for p in done.path.iterdir())
    assert done.path.name == "rmsnorm-canvas-feedback"
    assert names == [CANVAS_FEEDBACK.format(name="LiBob", user="102", file="rmsnorm.html"),
                     CANVAS_FEEDBACK.format(name="ZhangAlice", user="101", file="rmsnorm.html")] \
        == ["LiBob_102_rmsnorm.html", "ZhangAlice_101_rmsnorm.html"]
    # not a name Canvas's own downloads use (<name>_<user id>_<attachment id>_<file>): never read back as a submission
    assert all(parse_canvas_name(n) is None for n in names)
    assert (done.path / "ZhangAlice_101_rmsnorm.html").read_text() == "<p>alice</p>"


def test_a_due_date_with_an_extension_in_local_time(tmp_path):
    course = course_with(tmp_path, 'c.NbGraderAPI.timezone = "Asia/Shanghai"')
    folder = submission_folder(tmp_path, "alice", "2026-12-02 03:00:00 Asia/Shanghai")
    handin = facts("alice", "rmsnorm", folder, None, load_settings(course), parse_time("2026-12-02 02:09 Asia/Shanghai"),
                   timedelta(days=1))
    report = render_report(result_with(handin))
    assert "2026-12-03 02:09:00 CST (Asia/Shanghai)" in report and "按时提交" in report


def test_the_right_hand_answers_follow_the_course_setting_and_the_students_extension(tmp_path):
    """c.Autograde.show_hand_answers_after_due (default off) travels in the hand-in; the report shows the right answers
    only when rendered after the due date with the student's extension; `autograde report --course` re-renders with
    the course's setting as it is now."""
    from autograder.recording.outputs import ResultStore
    from autograder.commands.report import rerender
    from solutions.student_params import student_answers

    right = f"{student_answers('rmsnorm', 'alice')['rms']:.10g}"
    due = parse_time("2026-12-02 02:09 Asia/Shanghai")
    folder = submission_folder(tmp_path, "alice", "2026-12-02 01:00:00 Asia/Shanghai")
    assert load_settings(course_with(tmp_path / "plain")).show_answers_after_due is False  # the default
    with pytest.raises(HandInError, match="show_hand_answers_after_due must be True or False"):
        load_settings(course_with(tmp_path / "bad", 'c.Autograde.show_hand_answers_after_due = "yes"'))
    course = course_with(tmp_path, "c.Autograde.show_hand_answers_after_due = True")
    handin = facts("alice", "rmsnorm", folder, None, load_settings(course), due, timedelta(days=1))
    assert handin.show_answers_after_due and handin.due == "2026-12-02 18:09:00 UTC"

    def result_of(h):
        result = result_with(h, score=8.0)
        result.hand_answers = {"rms": 1.0, "output": None}
        return result

    result = result_of(handin)
    after_due_before_extension = datetime(2026, 12, 2, 12, 0, tzinfo=timezone.utc)
    assert right not in render_report(result, now=after_due_before_extension)
    assert f"正确答案 {right}" in render_report(result, now=datetime(2026, 12, 2, 18, 10, tzinfo=timezone.utc))
    assert f"正确答案 {right}" in render_report(result, now=datetime(2027, 6, 1, tzinfo=timezone.utc))

    off = facts("alice", "rmsnorm", folder, None, load_settings(course_with(tmp_path / "off")), due, None)
    assert not off.show_answers_after_due and right not in render_report(result_of(off))

    # re-rendered with --course: the course's setting now; without: the one it was graded under
    out = tmp_path / "out"
    past = facts("alice", "rmsnorm", folder, None, load_settings(course_with(tmp_path / "off")),
                 parse_time("2020-01-01 00:00 UTC"), None)
    ResultStore(out).save(result_of(past))
    report = out / "reports" / "alice" / "rmsnorm.html"
    rerender(out)  # (rendered now: this machine's clock may be before 2026-12-02 18:09 UTC; the due date is moved back)
    assert right not in report.read_text()
    rerender(out, course)
    assert f"正确答案 {right}" in report.read_text()
    rerender(out, course_with(tmp_path / "off"))
    assert right not in report.read_text()


# --- timestamp.txt as nbgrader's exchange writes it: `%Z` of c.Exchange.timezone -------------------------------

ZONE_PROBE = """
import json, sys
from pathlib import Path
from autograder.intake.handin import facts, load_settings
seen = []
for course, folder in json.loads(sys.argv[1]):
    handin = facts("alice", "rmsnorm", Path(folder), None, load_settings(Path(course)), None, None)
    seen.append([handin.submitted_at if handin else None, [f.message for f in handin.flags] if handin else []])
print(json.dumps(seen))
"""

# c.Exchange.timezone (None: unset, nbgrader's UTC), timestamp.txt, the moment (UTC) or the flag's words
EXCHANGE_STAMPS = [
    ("Asia/Shanghai", "2026-10-15 23:58:00.500000 CST", "2026-10-15 15:58:00 UTC"),
    ("America/Chicago", "2026-11-01 01:30:00.000000 CDT", "2026-11-01 06:30:00 UTC"),  # the hour shown twice: first
    ("America/Chicago", "2026-11-01 01:30:00.000000 CST", "2026-11-01 07:30:00 UTC"),  # CDT, then CST
    (None, "2026-10-15 23:58:00.500000 UTC", "2026-10-15 23:58:00 UTC"),
    (None, "2026-10-15 23:58:00.500000 CST", "'CST' is not what c.Exchange.timezone (UTC) is called"),
]


def test_a_timestamp_in_the_exchanges_zone_is_the_same_moment_on_any_grading_machine(tmp_path):
    """nbgrader's exchange writes the hand-in time with the abbreviation of c.Exchange.timezone ("CST" for
    Asia/Shanghai); dateutil alone reads "CST" as the grading machine's own zone when that zone is called so
    (Shanghai's or Chicago's) and as UTC otherwise: the same hand-in was on time on one machine and late on another.
    It is read in c.Exchange.timezone whatever the machine's zone; an abbreviation that is not that zone's is flagged
    `time` (saying which setting to make), not guessed."""
    import json
    import subprocess
    import sys

    cases = []
    for n, (zone, stamp, _) in enumerate(EXCHANGE_STAMPS):
        course = course_with(tmp_path / str(n), *([f'c.Exchange.timezone = "{zone}"'] if zone else []))
        cases.append([str(course), str(submission_folder(tmp_path / str(n), "alice", stamp))])
    for machine in ("UTC", "Asia/Shanghai", "America/Chicago", "America/Los_Angeles"):
        done = subprocess.run([sys.executable, "-c", ZONE_PROBE, json.dumps(cases)], capture_output=True, text=True,
                              env={**os.environ, "TZ": machine}, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        for (zone, stamp, expected), (submitted, flags) in zip(EXCHANGE_STAMPS, json.loads(done.stdout)):
            if expected.endswith(" UTC"):
                assert (submitted, flags) == (expected, []), (machine, zone, stamp)
            else:
                assert submitted is None and len(flags) == 1 and expected in flags[0], (machine, zone, stamp, flags)
    with pytest.raises(HandInError, match="c.Exchange.timezone: unknown time zone 'CST'"):
        load_settings(course_with(tmp_path / "other", 'c.Exchange.timezone = "CST"'))
