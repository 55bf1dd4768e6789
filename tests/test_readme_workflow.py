"""The README's instructor commands, taken from the README itself (so the two cannot drift), run as written in a
temporary course and exchange: the shared-server workflow with nbgrader's exchange, and the LMS workflow.

Only what cannot run here is replaced: `sudo` and /srv/nbgrader/exchange (a temporary exchange instead),
`source .venv/bin/activate` (this venv is first on PATH), and the students' part, played by the test where the
README says "students fetch, work, submit": each fetches with nbgrader, puts in an answer and submits under their
id (as this user, so the course sets c.Autograde.check_owner = False, as the README says for one-owner setups).
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import REPO_ROOT
from conftest import release_notebook, source_notebook

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


def students_submit(root: Path, exchange: Path, env: dict) -> None:
    """alice hands in the reference answers, bob the untouched release notebook."""
    for student, answer in (("alice", source_notebook("rmsnorm")), ("bob", None)):
        home = root / f"home-{student}"
        home.mkdir()
        (home / "nbgrader_config.py").write_text(
            f"c = get_config()\nc.CourseDirectory.course_id = 'gpt2-to-modern'\nc.Exchange.root = {str(exchange)!r}\n")
        run("nbgrader fetch_assignment rmsnorm", home, env)
        assert {"check_notebook.py", "student-requirements.txt"} <= {p.name for p in (home / "rmsnorm").iterdir()}  # with it
        if answer:
            shutil.copy(answer, home / "rmsnorm" / "rmsnorm.ipynb")
        run(f"nbgrader submit rmsnorm --student={student}", home, env)


def test_the_shared_server_workflow_as_the_readme_writes_it(tmp_path):
    commands = bash_block("### On a shared server or JupyterHub, with nbgrader's exchange")
    assert any(c.startswith("autograde grade") for c in commands) and STUDENTS_STEP in commands
    exchange = tmp_path / "exchange"
    course = new_course(tmp_path, [("alice", "alice@uni.edu"), ("bob", "bob@uni.edu"), ("carol", "")])
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.Autograde.check_owner = False  # one OS user submits for everyone here\n")
    env = environment(exchange)
    outputs = {}
    for command in commands:
        if command == STUDENTS_STEP:
            students_submit(tmp_path, exchange, env)
            continue
        if command.startswith("source "):
            continue  # the venv: already first on PATH
        command = command.replace("/srv/nbgrader/exchange", str(exchange)).replace("sudo ", "")
        if command.startswith("export "):
            name, value = command[len("export "):].split("=", 1)
            env[name] = value
            continue
        outputs.setdefault(command, []).append(run(command, course, env).stdout)

    grading = course / "grading"
    results = {r["student"]: r for r in json.loads((grading / "results.json").read_text())}
    # the README's due date is long past: both are late, and the policy the first run was given costs 2 points
    assert results["alice"]["raw_score"] == 10 and results["alice"]["late_penalty"] == 2, results["alice"]
    assert results["alice"]["score"] == 8 and results["bob"]["score"] == 0
    assert results["alice"]["handin"]["policy"] == "2 points off if late"
    assert results["alice"]["handin"]["extension_seconds"] == 2 * 86400  # the extension, seen by the last run
    assert set(results) == {"alice", "bob", "carol"} and results["carol"]["status"] == "missing"
    table = {r["student"]: r for r in csv.DictReader(io.StringIO((grading / "grades.csv").read_text()))}
    assert sorted(table) == ["alice", "bob", "carol"]  # the roster
    exported = {r["student_id"]: r for r in csv.DictReader(open(course / "grades.csv"))}  # nbgrader export
    assert float(exported["alice"]["raw_score"]) == 10 and float(exported["alice"]["score"]) == 8
    dry = next(v for k, v in outputs.items() if "--dry-run" in k)[0]
    assert "dry run (nbgrader layout): 2 submission(s) would be graded" in dry
    assert len(list((exchange / "gpt2-to-modern" / "feedback").glob("*.html"))) == 2  # release_feedback
    grades = [k for k in outputs if k.startswith("autograde grade") and "--dry-run" not in k]
    assert len(grades) == 2 and "--late-policy" in grades[0] and "--late" not in grades[1], grades
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
