"""The whole nbgrader round trip with real OS users: release, fetch, submit, collect, grade, late work, feedback.

An instructor (root, as this test runs in CI) and three students, each a real user created for the test
with their own home, in a temporary course and exchange outside the repository (students cannot read a
checkout in a private folder). Student 1 answers correctly, student 2 with a catalogued mistake, student 3
correctly but after the due date; student 1 also submits under a fourth roster student's id, with a
forged timestamp from before the due date. The students run nbgrader themselves (a world-readable copy
for Debian's python3.11, installed by scripts/dev.sh), the instructor runs nbgrader from this venv and
`autograde grade`. Then `release_feedback`, and each student's `fetch_feedback`.
"""

import csv
import io
import json
import pwd
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder.cli import app
from autograder.examples import apply_edits, mistakes
from conftest import run_nbgrader, source_notebook
from os_users import as_student, give, home_of, os_users, student_config

pytestmark = pytest.mark.slow

FAST = ["--cell-timeout", "8", "--probe-timeout", "8"]
MISTAKE = next(m for m in mistakes("rmsnorm") if m.name == "gamma_missing")
RUNNER = CliRunner()


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


@pytest.fixture(scope="module")
def students():
    """Three OS users with their own homes; removed afterwards, whatever happens (skips without root)."""
    with os_users(list("abc")) as names:
        yield names


def instructor(args: list[str], course: Path) -> subprocess.CompletedProcess:
    done = run_nbgrader(args, cwd=course)
    assert done.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{done.stderr[-3000:]}"
    return done


def answered(fetched: Path, edits=()) -> nbformat.NotebookNode:
    """The student's fetched notebook with its answer cells filled with the reference answers (by grade_id)."""
    nb = nbformat.read(fetched, as_version=4)
    reference = {c.metadata["nbgrader"]["grade_id"]: c.source
                 for c in nbformat.read(source_notebook("rmsnorm"), as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    filled = 0
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in reference:
            cell.source = reference[grade_id]
            filled += 1
    assert filled == len(reference) == 3
    return apply_edits(nb, edits, "rmsnorm")


def write_as(name: str, nb: nbformat.NotebookNode, path: Path) -> None:
    nbformat.write(nb, path)
    give(name, path)


@pytest.fixture(scope="module")
def roundtrip(students):
    a, b, c = students
    d = a[:-1] + "d"  # on the roster, no OS user: student a submits under this id
    base = Path(tempfile.mkdtemp(prefix="agt-roundtrip-", dir="/tmp"))
    try:
        base.chmod(0o755)
        course, exchange = base / "course", base / "exchange"
        course.mkdir()
        exchange.mkdir()
        exchange.chmod(0o1777)  # as nbgrader's docs set up /srv/nbgrader/exchange
        course_id = "llm-" + a[3:-1]
        (course / "nbgrader_config.py").write_text(
            "c = get_config()\n"
            f"c.CourseDirectory.course_id = {course_id!r}\n"
            f"c.CourseDirectory.root = {str(course)!r}\n"
            "c.CourseDirectory.source_directory = 'assignments'\n"
            "c.CourseDirectory.release_directory = 'release'\n"
            f"c.Exchange.root = {str(exchange)!r}\n"
            "c.Autograde.late_policy = 'percent_per_day'\n"
            "c.Autograde.late_percent = 20\n"
            "c.Autograde.late_cap_percent = 50\n")
        shutil.copytree(source_notebook("rmsnorm").parent, course / "assignments" / "rmsnorm")
        for student in (a, b, c, d):
            instructor(["db", "student", "add", student, "--last-name", student.upper()], course)
        instructor(["generate_assignment", "rmsnorm"], course)
        instructor(["release_assignment", "rmsnorm"], course)

        for student in students:  # each student's nbgrader knows the course and the exchange
            student_config(student, course_id, exchange)
            as_student(student, ["fetch_assignment", "rmsnorm"])
            fetched = home_of(student) / "rmsnorm" / "rmsnorm.ipynb"
            assert fetched.is_file() and fetched.stat().st_uid == pwd.getpwnam(student).pw_uid

        homes = {s: home_of(s) for s in students}
        write_as(a, answered(homes[a] / "rmsnorm" / "rmsnorm.ipynb"), homes[a] / "rmsnorm" / "rmsnorm.ipynb")
        write_as(b, answered(homes[b] / "rmsnorm" / "rmsnorm.ipynb", MISTAKE.edits),
                 homes[b] / "rmsnorm" / "rmsnorm.ipynb")
        write_as(c, answered(homes[c] / "rmsnorm" / "rmsnorm.ipynb"), homes[c] / "rmsnorm" / "rmsnorm.ipynb")
        as_student(a, ["submit", "rmsnorm"])
        as_student(b, ["submit", "rmsnorm"])
        # the due date falls here: after a's and b's submissions landed, before c's and the forged one
        due = utc_now()
        instructor(["db", "assignment", "add", "rmsnorm", f"--duedate={stamp(due)}"], course)
        while utc_now() <= due + timedelta(seconds=1):
            time.sleep(0.2)
        as_student(c, ["submit", "rmsnorm"])
        # a submits under d's id, claiming (in timestamp.txt and the folder name) a time before the due date
        forged = due - timedelta(hours=1)
        as_student(a, ["submit", "rmsnorm", f"--student={d}", f"--Exchange.timestamp_format={stamp(forged)}"])

        collected = instructor(["collect", "rmsnorm"], course)
        for student in (a, b, c, d):
            assert (course / "submitted" / student / "rmsnorm" / "rmsnorm.ipynb").is_file(), collected.stderr
        assert (course / "submitted" / d / "rmsnorm" / "timestamp.txt").read_text().startswith(stamp(forged)[:19])

        out = course / "autograde"
        graded = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                                     "--out", str(out), *FAST])
        assert graded.exit_code == 0, graded.output
        yield dict(course=course, exchange=exchange, course_id=course_id, out=out, due=due, forged=forged,
                   a=a, b=b, c=c, d=d, homes=homes, grade_output=graded.output)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def results_by_student(out: Path) -> dict:
    return {r["student"]: r for r in json.loads((out / "results.json").read_text())}


def export(course: Path) -> dict:
    dest = course / "export.csv"
    instructor(["export", f"--to={dest}"], course)
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(dest.read_text()))}


def test_scores_penalties_and_flags(roundtrip):
    a, b, c, d = (roundtrip[k] for k in "abcd")
    results = results_by_student(roundtrip["out"])
    assert set(results) == {a, b, c, d}
    # a: right, on time
    assert (results[a]["raw_score"], results[a]["late_penalty"], results[a]["score"]) == (10, 0, 10)
    assert results[a]["handin"]["flags"] == [] and results[a]["handin"]["submitter"] == a
    assert results[a]["handin"]["seconds_late"] == 0
    # b: the catalogued mistake loses exactly its checks, on time
    failed = {ch["name"] for ch in results[b]["checks"] if not ch["passed"]}
    assert failed == set(MISTAKE.failing)
    assert 0 < results[b]["raw_score"] < 10 and results[b]["late_penalty"] == 0
    assert results[b]["score"] == results[b]["raw_score"] and results[b]["handin"]["flags"] == []
    # c: right, less than a day late: 20% of 10 for the started day
    assert (results[c]["raw_score"], results[c]["late_penalty"], results[c]["score"]) == (10, 2, 8)
    assert 0 < results[c]["handin"]["seconds_late"] < 86400
    assert results[c]["handin"]["flags"] == [] and results[c]["handin"]["time_source"] == "timestamp.txt"
    # d: written by a, not d; timestamp.txt forged to before the due date: the observed time is used
    kinds = {f["kind"] for f in results[d]["handin"]["flags"]}
    assert kinds == {"identity", "feedback_withheld", "time"}, results[d]["handin"]  # a is a student: it means something
    assert results[d]["handin"]["submitter"] == a and results[d]["handin"]["time_source"] == "exchange"
    assert results[d]["handin"]["seconds_late"] > 0
    assert (results[d]["raw_score"], results[d]["late_penalty"], results[d]["score"]) == (10, 2, 8)


def test_grades_csv_shows_raw_penalty_final_and_flags(roundtrip):
    a, b, c, d = (roundtrip[k] for k in "abcd")
    rows = {r["student"]: r for r in csv.DictReader(io.StringIO((roundtrip["out"] / "grades.csv").read_text()))}
    assert (rows[a]["rmsnorm"], rows[a]["rmsnorm_raw"], rows[a]["rmsnorm_penalty"], rows[a]["rmsnorm_flags"]) \
        == ("10", "10", "0", "")
    assert (rows[c]["rmsnorm"], rows[c]["rmsnorm_raw"], rows[c]["rmsnorm_penalty"], rows[c]["total"]) \
        == ("8", "10", "2", "8")
    assert set(rows[d]["rmsnorm_flags"].split(";")) == {"identity", "feedback_withheld", "time"}
    assert rows[b]["rmsnorm_flags"] == "" and float(rows[b]["rmsnorm"]) < 10


def test_gradebook_export_shows_raw_penalty_and_score(roundtrip):
    a, b, c, d = (roundtrip[k] for k in "abcd")
    rows = export(roundtrip["course"])
    results = results_by_student(roundtrip["out"])
    for student in (a, b, c, d):
        row = results[student]
        assert float(rows[student]["raw_score"]) == pytest.approx(row["raw_score"])
        assert float(rows[student]["late_submission_penalty"]) == pytest.approx(row["late_penalty"])
        assert float(rows[student]["score"]) == pytest.approx(row["score"])
        assert float(rows[student]["max_score"]) == 10
    assert float(rows[c]["late_submission_penalty"]) == 2 and float(rows[c]["score"]) == 8
    # the gradebook's time of d's submission is when it landed, not the forged one
    assert datetime.fromisoformat(rows[d]["timestamp"]) > roundtrip["due"] > roundtrip["forged"]
    assert datetime.fromisoformat(rows[a]["timestamp"]) <= roundtrip["due"]


def test_reports_and_summary_show_lateness_and_flags(roundtrip):
    a, c, d, out = roundtrip["a"], roundtrip["c"], roundtrip["d"], roundtrip["out"]
    late = (out / "reports" / c / "rmsnorm.html").read_text()
    assert "迟交扣分" in late and "最终得分" in late and "<b>8</b> / 10" in late
    flagged = (out / "reports" / d / "rmsnorm.html").read_text()
    assert f"由系统用户 {a} 写入" in flagged and "以交换目录记录的时间为准" in flagged
    on_time = (out / "reports" / a / "rmsnorm.html").read_text()
    assert "按时提交" in on_time and "由系统用户" not in on_time
    summary = (out / "summary.html").read_text()
    assert "Hand-in: late work and flags" in summary and f"written by the OS user(s) {a}" in summary


def test_feedback_reaches_each_student_and_nobody_else(roundtrip):
    a, b, c, d = (roundtrip[k] for k in "abcd")
    course = roundtrip["course"]
    # the report of the submission a made under d's id is withheld (it would go to a)
    assert not (course / "feedback" / d / "rmsnorm" / "rmsnorm.html").exists()
    instructor(["release_feedback", "rmsnorm"], course)
    everyone = (a, b, c, d)
    for student in (a, b, c):
        as_student(student, ["fetch_feedback", "rmsnorm"])
        files = sorted((roundtrip["homes"][student] / "rmsnorm" / "feedback").rglob("*.html"))
        assert len(files) == 1, files
        html = files[0].read_text()
        assert f"学号 <b>{student}</b>" in html
        assert all(other not in html for other in everyone if other != student)
        ours = (roundtrip["out"] / "reports" / student / "rmsnorm.html").read_text()
        assert html == ours
    late = next((roundtrip["homes"][c] / "rmsnorm" / "feedback").rglob("*.html")).read_text()
    assert "迟交扣分" in late


def test_an_extension_in_the_gradebook_removes_the_penalty(roundtrip):
    c, course, out = roundtrip["c"], roundtrip["course"], roundtrip["out"]
    given = RUNNER.invoke(app, ["extension", "rmsnorm", c, "--days", "1", "--course", str(course)])
    assert given.exit_code == 0, given.output
    again = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(out),
                                "--resume", *FAST])
    assert again.exit_code == 0, again.output
    assert "graded 0 submission(s)" in again.output  # nothing regraded: only the hand-in changed
    result = results_by_student(out)[c]
    assert (result["raw_score"], result["late_penalty"], result["score"]) == (10, 0, 10)
    assert result["handin"]["extension_seconds"] == 86400 and result["handin"]["seconds_late"] == 0
    row = export(course)[c]
    assert float(row["late_submission_penalty"]) == 0 and float(row["score"]) == 10


def test_the_instructor_can_release_a_flagged_submissions_feedback(roundtrip):
    d, course, out = roundtrip["d"], roundtrip["course"], roundtrip["out"]
    assert not (course / "feedback" / d / "rmsnorm" / "rmsnorm.html").exists()
    again = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(out),
                                "--resume", "--release-flagged-feedback", *FAST])
    assert again.exit_code == 0, again.output
    assert "graded 0 submission(s)" in again.output
    html = (course / "feedback" / d / "rmsnorm" / "rmsnorm.html").read_text()
    assert f"学号 <b>{d}</b>" in html and "由系统用户" in html
