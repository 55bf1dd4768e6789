"""The README's instructor commands, taken from the README itself (so the two cannot drift), run as written in a
temporary course and exchange: the shared-server workflow with nbgrader's exchange, and the LMS workflow.

Only what cannot run here is replaced: `sudo` and /srv/nbgrader/exchange (a temporary exchange instead),
`source .venv/bin/activate` (this venv is first on PATH), the student ids (`alice`, ...: OS users with names unique
to the run) and the students' part, played by the test where the README says "students fetch, work, submit" and
after `nbgrader release_feedback`: in the shared-server workflow each student is a real OS user (created for the test,
removed afterwards: tests/os_users.py; root only, as in CI) who runs the README's student steps as themselves
(`nbgrader fetch_assignment`, an answer, `nbgrader submit`, then `nbgrader fetch_feedback`), so the grader judges
identity as on a real server.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from autograder import REPO_ROOT
from conftest import release_notebook, source_notebook
from os_users import as_student, give, home_of, os_users, student_config

pytestmark = pytest.mark.slow

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
STUDENTS_STEP = "students fetch, work, submit"


def bash_block(heading: str) -> list[str]:
    """The first ```bash block after `heading`, as command lines (comments dropped, the students' step kept)."""
    section = README.split(heading, 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = []
    for line in block.splitlines():
        if line.lstrip().startswith("#"):
            if STUDENTS_STEP in line:
                lines.append(STUDENTS_STEP)
            continue
        command = re.split(r"\s{2,}#\s", line, maxsplit=1)[0].strip()
        if command:
            lines.append(command)
    return lines


def environment(exchange: Path) -> dict:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", PYTHONUTF8="1",
                NBGRADER_EXCHANGE=str(exchange), COLUMNS="200")


def run(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README command failed: {command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def new_course(root: Path, roster: list[tuple[str, str]]) -> Path:
    course = root / "course"
    course.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", course)
    shutil.copytree(source_notebook("rmsnorm").parent, course / "assignments" / "rmsnorm")
    with open(course / "roster.csv", "w", newline="") as f:
        csv.writer(f).writerows([("id", "first_name", "last_name", "email"),
                                 *((sid, sid.title(), "Student", email) for sid, email in roster)])
    return course


COURSE_ID = "gpt2-to-modern"  # the repository's nbgrader_config.py
NO_IDENTITY = {"identity", "feedback_withheld", "unverified"}


def students_submit(ids: dict, exchange: Path) -> None:
    """The README's student steps, each as the student's OS user: alice hands in the reference answers, bob the
    untouched release notebook; carol hands in nothing."""
    for student, answer in ((ids["alice"], source_notebook("rmsnorm")), (ids["bob"], None)):
        student_config(student, COURSE_ID, exchange)
        as_student(student, ["fetch_assignment", "rmsnorm"])
        fetched = home_of(student) / "rmsnorm"
        # the checker and its requirements travel with the release (release/<id>/)
        assert {"check_notebook.py", "student-requirements.txt"} <= {p.name for p in fetched.iterdir()}
        if answer:
            shutil.copy(answer, fetched / "rmsnorm.ipynb")
            give(student, fetched / "rmsnorm.ipynb")
        as_student(student, ["submit", "rmsnorm"])  # under their own user name: the id


def students_fetch_feedback(ids: dict) -> dict:
    """Student step 6, as each student who submitted: their report, fetched from the exchange."""
    reports = {}
    for student in (ids["alice"], ids["bob"]):
        as_student(student, ["fetch_feedback", "rmsnorm"])
        files = sorted((home_of(student) / "rmsnorm" / "feedback").rglob("*.html"))
        assert len(files) == 1, files
        reports[student] = files[0].read_text(encoding="utf-8")
    return reports


@pytest.fixture
def students():
    """alice, bob and carol as OS users (names unique to the run), removed afterwards; skips without root."""
    with os_users(["alice", "bob", "carol"]) as names:
        yield dict(zip(["alice", "bob", "carol"], names))


@pytest.fixture
def shared_exchange():
    """A folder the students can reach (pytest's tmp_path is root's alone) for the exchange; removed afterwards."""
    base = Path(tempfile.mkdtemp(prefix="agt-readme-", dir="/tmp"))
    try:
        base.chmod(0o755)
        yield base / "exchange"  # made by the README's own `mkdir -p ... && chmod 1777 ...`
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_shared_server_workflow_as_the_readme_writes_it(tmp_path, students, shared_exchange):
    commands = bash_block("### On a shared server or JupyterHub, with nbgrader's exchange")
    assert any(c.startswith("autograde grade") for c in commands) and STUDENTS_STEP in commands
    assert any(c.startswith("nbgrader release_feedback") for c in commands)
    alice, bob, carol = students["alice"], students["bob"], students["carol"]
    exchange = shared_exchange
    course = new_course(tmp_path, [(alice, "alice@uni.edu"), (bob, "bob@uni.edu"), (carol, "")])
    env = environment(exchange)
    outputs, feedback = {}, {}
    for command in commands:
        if command == STUDENTS_STEP:
            students_submit(students, exchange)
            continue
        if command.startswith("source "):
            continue  # the venv: already first on PATH
        command = command.replace("/srv/nbgrader/exchange", str(exchange)).replace("sudo ", "")
        command = re.sub(r"\b(alice|bob|carol)\b", lambda m: students[m.group(1)], command)
        if command.startswith("export "):
            name, value = command[len("export "):].split("=", 1)
            env[name] = value
            continue
        outputs.setdefault(command, []).append(run(command, course, env).stdout)
        if command.startswith("nbgrader release_feedback"):
            feedback = students_fetch_feedback(students)
    assert (exchange.stat().st_mode & 0o7777) == 0o1777  # the README's exchange, as nbgrader's docs set it up

    grading = course / "grading"
    results = {r["student"]: r for r in json.loads((grading / "results.json").read_text())}
    # the README's due date is long past: both are late, and the policy the first run was given costs 2 points
    assert results[alice]["raw_score"] == 10 and results[alice]["late_penalty"] == 2, results[alice]
    assert results[alice]["score"] == 8 and results[bob]["score"] == 0
    assert results[alice]["handin"]["policy"] == "2 points off if late"
    assert results[alice]["handin"]["extension_seconds"] == 2 * 86400  # the extension, seen by the last run
    assert set(results) == {alice, bob, carol} and results[carol]["status"] == "missing"
    # each submission was found in the exchange's inbound folder, written by its own student: identity holds
    for student in (alice, bob):
        handin = results[student]["handin"]
        assert handin["submitter"] == student and handin["observed_at"], handin  # observed: its inbound folder
        assert handin["time_source"] == "timestamp.txt", handin
        assert not (NO_IDENTITY | {"time"}) & {f["kind"] for f in handin["flags"]}, handin
        assert not NO_IDENTITY & set(results[student]["flags"]), results[student]["flags"]
    assert results[alice]["handin"]["flags"] == [] and results[bob]["flags"] == ["unanswered"]
    table = {r["student"]: r for r in csv.DictReader(io.StringIO((grading / "grades.csv").read_text()))}
    assert sorted(table) == sorted([alice, bob, carol])  # the roster
    assert not NO_IDENTITY & set(";".join(r["rmsnorm_flags"] for r in table.values()).split(";")), table
    exported = {r["student_id"]: r for r in csv.DictReader(open(course / "grades.csv"))}  # nbgrader export
    assert float(exported[alice]["raw_score"]) == 10 and float(exported[alice]["score"]) == 8
    dry = next(v for k, v in outputs.items() if "--dry-run" in k)[0]
    assert "dry run (nbgrader layout): 2 submission(s) would be graded" in dry
    grades = [k for k in outputs if k.startswith("autograde grade") and "--dry-run" not in k]
    assert len(grades) == 2 and "--late-policy" in grades[0] and "--late" not in grades[1], grades
    assert all("withheld" not in out for k in grades for out in outputs[k]), outputs[grades[0]]
    # release_feedback published both reports; each student fetched their own, nobody else's
    assert len(list((exchange / COURSE_ID / "feedback").glob("*.html"))) == 2
    assert sorted(feedback) == sorted([alice, bob])
    for student, html in feedback.items():
        assert f"学号 <b>{student}</b>" in html and all(o not in html for o in (alice, bob, carol) if o != student)
    assert "迟交扣分" in feedback[alice] and "<b>8</b> / 10" in feedback[alice]
    # the README releases the feedback again after the extension: what alice fetched last says it
    released = [i for i, c in enumerate(commands) if c.startswith("nbgrader release_feedback")]
    assert len(released) == 2 and released[-1] > commands.index(grades[1]), released
    assert "含延期" in feedback[alice] and "含延期" not in feedback[bob]
    assert "extension rmsnorm alice" in " ".join(commands[commands.index(grades[0]):commands.index(grades[1])])
    # after the extension, a plain grade (exit 0: `run` checks it) reuses the stored policy and regrades nothing
    regraded = outputs[grades[1]][-1]
    assert "graded 0 submission(s); 2 unchanged" in regraded and "settings changed" not in regraded, regraded
    assert json.loads((grading / "settings.json").read_text())["late_policy"] == \
        {"method": "fixed", "points": 2, "percent": 0, "cap_percent": None}


def test_the_lms_workflow_as_the_readme_writes_it(tmp_path):
    commands = bash_block("### From an LMS download (Canvas, Moodle)")
    assert [c.split()[:2] for c in commands] == [["autograde", "grade"]] * 2 + [["autograde", "lms-grades"]]
    course = new_course(tmp_path, [("alice", "alice@uni.edu"), ("bob", "bob@uni.edu")])
    env = environment(tmp_path / "exchange")
    run("nbgrader db student import roster.csv", course, env)
    with zipfile.ZipFile(course / "submissions.zip", "w") as zf:  # as Canvas names a download
        zf.write(source_notebook("rmsnorm"), "zhangalice_101_7001_rmsnorm.ipynb")
        zf.write(release_notebook("rmsnorm"), "libob_late_102_7002_rmsnorm-2.ipynb")
    (course / "canvas-gradebook.csv").write_text(
        "Student,ID,SIS User ID,SIS Login ID,Section,rmsnorm (123456)\n    Points Possible,,,,,10\n"
        '"Zhang, Alice",101,,alice,A,\n"Li, Bob",102,,bob,A,\n')
    outputs = [run(command, course, env).stdout for command in commands]
    assert "Canvas user 101 -> SIS Login ID 'alice'" in outputs[0] and "nothing is graded" in outputs[0]
    rows = list(csv.reader(open(course / "grading" / "lms" / "canvas-gradebook.csv")))
    assert [r[-1] for r in rows[2:]] == ["10", "0"]
    assert "2 score(s)" in outputs[2]
