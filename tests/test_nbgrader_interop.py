"""nbgrader's own tools on a course `autograde grade` has graded: autograde, generate_feedback, export, formgrader.

Real nbgrader 0.9.6 on a real SQLite gradebook; formgrader served by a real `jupyter server` on 127.0.0.1 with a
token, its REST API used as an instructor's browser uses it, and its pages loaded in headless Chromium.
"""

import csv
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder import REPO_ROOT
from autograder.cli import app
from autograder.examples import mistakes, notebook_with_edits
from browser import MATHJAX_CDN, MATHJAX_LOCAL, Chromium, chromium_path
from conftest import run_nbgrader, source_notebook

pytestmark = pytest.mark.slow

ASSIGNMENT = "gradient_flow"
WRITTEN = "gradient_flow_observation"
BOB_TEXT = "bob 的观察：层数加深后 Post-Norm 第 1 层的梯度和最后一层差得越来越多，Pre-Norm 的恒等路径让它稳定。"
FAST = ["--cell-timeout", "10", "--probe-timeout", "10"]
RUNNER = CliRunner()


def make_course(root: Path) -> Path:
    """A course folder as the instructor has it: config, the assignment's source, a roster, two submissions
    (alice: the reference, her written answer the example; bob: the reference with a wrong choice letter and his
    own written answer)."""
    root.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(REPO_ROOT / "assignments" / ASSIGNMENT, root / "assignments" / ASSIGNMENT)
    (root / "exchange").mkdir()
    wrong_letter = next(m for m in mistakes(ASSIGNMENT) if m.name == "wrong_letter")
    bob = notebook_with_edits(ASSIGNMENT, wrong_letter.edits)
    cell = next(c for c in bob.cells if c.metadata.get("nbgrader", {}).get("grade_id") == WRITTEN)
    cell.source = BOB_TEXT
    for student, nb in (("alice", nbformat.read(source_notebook(ASSIGNMENT), as_version=4)), ("bob", bob)):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")
    (root / "roster.csv").write_text("id,first_name,last_name,email\nalice,Alice,Li,\nbob,Bob,Wang,\n")
    done = run_nbgrader(["db", "student", "import", "roster.csv"], cwd=root)
    assert done.returncode == 0, done.stderr
    return root


def allow_unsandboxed_nbgrader(course: Path) -> None:
    """The course's switch that lets nbgrader's own Autograde run student code (no sandbox): off by default."""
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write("\nc.Autograde.allow_unsandboxed_nbgrader = True\n")
        # nbgrader's own kernel runs the whole notebook; its default 30 s a cell is short on a loaded 2-core machine
        f.write("c.ExecutePreprocessor.timeout = 300\n")


def autograde(course: Path, *extra: str) -> str:
    result = RUNNER.invoke(app, ["grade", ASSIGNMENT, "--submissions", str(course / "submitted"),
                                 "--out", str(course / "out"), *FAST, *extra])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.output


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    """nbgrader exits 0 even when a notebook failed: its log is checked too."""
    done = run_nbgrader(list(args), cwd=course)
    assert done.returncode == 0, done.stdout + done.stderr
    log = done.stdout + done.stderr
    assert "[ERROR]" not in log and "| ERROR]" not in log and "failed to validate" not in log, log[-4000:]
    return done


def gradebook_scores(course: Path) -> dict[str, dict[str, tuple]]:
    """student -> grade_id -> (auto_score, manual_score, needs_manual_grade), read with plain SQL."""
    with sqlite3.connect(course / "gradebook.db") as db:
        rows = db.execute(
            "SELECT s.student_id, c.name, g.auto_score, g.manual_score, g.needs_manual_grade FROM grade g "
            "JOIN base_cell c ON g.cell_id = c.id JOIN submitted_notebook n ON g.notebook_id = n.id "
            "JOIN submitted_assignment s ON n.assignment_id = s.id").fetchall()
    scores: dict[str, dict[str, tuple]] = {}
    for student, name, auto, manual, needs in rows:
        scores.setdefault(student, {})[name] = (auto, manual, bool(needs))
    return scores


def our_scores(course: Path) -> dict[str, dict[str, float | None]]:
    """student -> grade_id -> the auto score autograde gives (None: graded by hand), from results.json."""
    rows = json.loads((course / "out" / "results.json").read_text())
    return {r["student"]: {p["grade_id"]: (None if p["by_hand"] else p["score"] if p["manual_score"] is None
                                           else None) for p in r["parts"]} for r in rows}


def exported(course: Path) -> dict[str, dict]:
    nbgrader(course, "export", "--to", str(course / "export.csv"))
    return {r["student_id"]: r for r in csv.DictReader(open(course / "export.csv", encoding="utf-8"))}


# --- nbgrader autograde and generate_feedback after autograde grade ----------------------------------------


def test_nbgrader_autograde_and_feedback_work_after_autograde_grade_which_then_restores_its_scores(tmp_path):
    course = make_course(tmp_path / "course")
    autograde(course)
    ours = our_scores(course)
    assert {s: {g: a for g, (a, _, _) in parts.items()} for s, parts in gradebook_scores(course).items()} == ours
    assert ours["alice"]["gradient_flow_choice"] == 2.0 and ours["bob"]["gradient_flow_choice"] == 0.0

    # the instructor's choice: nbgrader's own autograde (unsandboxed) and feedback, on the same course
    allow_unsandboxed_nbgrader(course)
    done = nbgrader(course, "autograde", ASSIGNMENT, "--force")
    assert "Notebook failed to validate" not in done.stderr and "does not exist in the database" not in done.stderr
    executed = nbformat.read(course / "autograded" / "alice" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code"), "nbgrader did not run it"
    theirs = gradebook_scores(course)
    # nbgrader's own scores replaced ours (its kernel, e.g., has no student id, so the choice cell fails there)
    assert any(theirs[s][g][0] != ours[s][g] for s in ours for g in ours[s]), theirs
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    for student in ("alice", "bob"):
        page = (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "nbgrader" in page.lower() and "总分" not in page  # nbgrader's page, not our report
    assert float(exported(course)["alice"]["max_score"]) == 12.0

    # the next `autograde grade` (nothing to regrade) puts our scores and our feedback back, and says so
    output = autograde(course)
    assert "graded 0 submission(s)" in output
    assert re.search(r"restored autograde's scores of [12] submission", " ".join(output.split())), output
    assert "restored autograde's reports of 2 submission(s)" in " ".join(output.split()), output
    assert {s: {g: a for g, (a, _, _) in parts.items()} for s, parts in gradebook_scores(course).items()} == ours
    for student in ("alice", "bob"):
        assert "总分" in (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    # and nothing to restore the time after
    assert "restored" not in autograde(course)
    assert {r: float(row["raw_score"]) for r, row in exported(course).items()} == {"alice": 10.0, "bob": 8.0}


def test_the_other_order_nbgrader_first_then_autograde(tmp_path):
    """The order that always worked still does: generate_assignment and nbgrader autograde, then autograde grade."""
    course = make_course(tmp_path / "course")
    allow_unsandboxed_nbgrader(course)
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    nbgrader(course, "autograde", ASSIGNMENT)
    output = autograde(course)
    assert "graded 2 submission(s)" in output
    ours = our_scores(course)
    assert {s: {g: a for g, (a, _, _) in parts.items()} for s, parts in gradebook_scores(course).items()} == ours
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")


# --- formgrader: the written answer graded by hand -----------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Formgrader:
    """`jupyter server` with nbgrader's formgrader on the course, on 127.0.0.1, with a token."""

    def __init__(self, course: Path, log: Path):
        self.course, self.token, self.port = course, secrets.token_hex(16), free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        jupyter = Path(sys.executable).parent / "jupyter"
        cmd = [str(jupyter), "server", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={course}", "--ServerApp.jpserver_extensions="
               "{'nbgrader.server_extensions.formgrader': True}"]
        if os.geteuid() == 0:
            cmd.append("--allow-root")
        env = dict(os.environ, PATH=str(jupyter.parent) + os.pathsep + os.environ.get("PATH", ""),
                   JUPYTER_CONFIG_DIR=str(log.parent / "jupyter-config"), PYTHONUTF8="1")
        self.log = open(log, "wb")
        self.process = subprocess.Popen(cmd, cwd=course, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                self.api("GET", "/api/status")
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"jupyter server did not start: {log.read_text()[-3000:]}")
                time.sleep(0.3)

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(self.base + path, method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Authorization": f"token {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            return json.loads(reply.read() or b"null")

    def url(self, path: str) -> str:
        return self.base + path

    def login(self, browser: Chromium) -> None:
        """As an instructor does: the server's login page, the token typed in; the browser keeps the cookie."""
        page = browser.open(self.base + "/login")
        page.submit(f"document.querySelector('input[type=password]').value = {json.dumps(self.token)};"
                    "document.querySelector('form').submit()")
        assert page.evaluate("location.pathname") != "/login", page.text()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("formgrader") / "course")
    autograde(course)
    return course


@pytest.fixture(scope="module")
def formgrader(graded):
    server = Formgrader(graded, graded.parent / "jupyter-server.log")
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser(formgrader):
    chromium_path()  # skip here (or fail, under AUTOGRADE_REQUIRE_BROWSER=1) when there is no browser
    if not (MATHJAX_LOCAL / "MathJax.js").is_file():
        pytest.fail("Debian's libjs-mathjax is missing (scripts/dev.sh installs it): formgrader's page needs MathJax")
    with Chromium(offline={MATHJAX_CDN: MATHJAX_LOCAL}) as chromium:
        formgrader.login(chromium)
        yield chromium


def submissions(formgrader) -> dict[str, dict]:
    return {s["student"]: s for s in formgrader.api("GET", f"/formgrader/api/submitted_notebooks/{ASSIGNMENT}/{ASSIGNMENT}")}


def test_the_gradebook_and_autograded_notebooks_are_what_formgrader_needs(graded, formgrader):
    listed = submissions(formgrader)
    assert set(listed) == {"alice", "bob"}
    for student, row in listed.items():
        assert row["needs_manual_grade"] and row["max_written_score"] == 2.0 and row["max_score"] == 12.0
        assert (graded / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").is_file()
    grades = formgrader.api("GET", f"/formgrader/api/grades?submission_id={listed['bob']['id']}")
    written = next(g for g in grades if g["name"] == WRITTEN)
    assert written["needs_manual_grade"] and written["auto_score"] is None and written["cell_type"] == "markdown"
    comments = formgrader.api("GET", f"/formgrader/api/comments?submission_id={listed['bob']['id']}")
    assert WRITTEN in {c["name"] for c in comments}


def test_formgraders_pages_show_each_submission_with_the_students_text(graded, formgrader, browser):
    listed = submissions(formgrader)
    table = browser.open(formgrader.url(f"/formgrader/gradebook/{ASSIGNMENT}/{ASSIGNMENT}"),
                         ready="document.querySelectorAll('tbody tr td a').length >= 2")
    text = table.text()
    assert "Submission #1" in text and "Submission #2" in text and text.count("/ 2\t") >= 2, text  # written: of 2
    # both rows marked "Needs Manual Grade?" (formgrader's tick), from the gradebook autograde wrote
    assert table.evaluate("document.querySelectorAll('td.needs-manual-grade span.glyphicon-ok').length") == 2
    assert table.errors == [] and table.blocked == [], (table.errors, table.blocked)
    for student, fragment in (("bob", BOB_TEXT), ("alice", "示例观察")):
        page = browser.open(formgrader.url(f"/formgrader/submissions/{listed[student]['id']}/"),
                            ready="document.querySelectorAll('input.score').length > 0")
        assert fragment in page.text()
        assert page.errors == [] and page.blocked == [], (page.errors, page.blocked)
        assert page.evaluate("typeof MathJax !== 'undefined'")  # served from Debian's copy, not the CDN
    assert any(url.startswith(MATHJAX_CDN) for url in page.served)


def test_a_manual_grade_and_comment_from_formgrader_survive_a_forced_regrade(graded, formgrader, browser):
    bob = submissions(formgrader)["bob"]
    grade = next(g for g in formgrader.api("GET", f"/formgrader/api/grades?submission_id={bob['id']}")
                 if g["name"] == WRITTEN)
    comment = next(c for c in formgrader.api("GET", f"/formgrader/api/comments?submission_id={bob['id']}")
                   if c["name"] == WRITTEN)
    remark = "观察到了 <b>Post-Norm</b> 的问题，但没有解释连乘。"
    assert formgrader.api("PUT", f"/formgrader/api/grade/{grade['id']}", {"manual_score": 1.5})["manual_score"] == 1.5
    formgrader.api("PUT", f"/formgrader/api/comment/{comment['id']}", {"manual_comment": remark})
    # a comment on an answer cell of an auto-graded part (formgrader has one box per solution cell)
    alice = submissions(formgrader)["alice"]
    code_box = next(c for c in formgrader.api("GET", f"/formgrader/api/comments?submission_id={alice['id']}")
                    if c["name"] == "layer_grad_norms_code")
    formgrader.api("PUT", f"/formgrader/api/comment/{code_box['id']}", {"manual_comment": "代码很清楚。"})

    # formgrader's own page shows it
    score, box = f"document.getElementById('{WRITTEN}')", f"document.getElementById('{WRITTEN}-comment')"
    page = browser.open(formgrader.url(f"/formgrader/submissions/{bob['id']}/"),
                        ready=f"{score} && {score}.value !== '' && {box}.value !== ''")
    assert page.evaluate(f"{score}.value") == "1.5"
    assert page.evaluate(f"{box}.value") == remark
    assert page.errors == [], page.errors

    output = autograde(graded, "--force")
    assert "graded 2 submission(s)" in output
    scores = gradebook_scores(graded)
    assert scores["bob"][WRITTEN] == (None, 1.5, False) and scores["alice"][WRITTEN][2]  # alice still pending
    assert formgrader.api("GET", f"/formgrader/api/grade/{grade['id']}")["manual_score"] == 1.5
    row = exported(graded)["bob"]
    assert float(row["raw_score"]) == 9.5 and float(row["score"]) == 9.5 and float(row["max_score"]) == 12.0

    report = browser.open((graded / "out" / "reports" / "bob" / f"{ASSIGNMENT}.html").as_uri())
    text = report.text()
    assert remark in text and "老师的评语" in text and "1.5 / 2 分" in text and "待批改" not in text
    assert report.evaluate("document.querySelectorAll('.alert b').length") >= 1
    assert report.evaluate("Array.from(document.querySelectorAll('b')).every(b => b.textContent !== 'Post-Norm')")
    assert report.errors == [], report.errors
    alice = browser.open((graded / "out" / "reports" / "alice" / f"{ASSIGNMENT}.html").as_uri()).text()
    assert "另有 2 分待批改" in alice and "待批改 · 2 分" in alice and "代码很清楚。" in alice
    results = {r["student"]: r for r in json.loads((graded / "out" / "results.json").read_text())}
    assert results["bob"]["raw_score"] == 9.5 and results["bob"]["pending_points"] == 0
    assert results["alice"]["pending_points"] == 2
    rows = {r["student"]: r for r in csv.DictReader(open(graded / "out" / "grades.csv", encoding="utf-8"))}
    assert (rows["bob"][ASSIGNMENT], rows["bob"][f"{ASSIGNMENT}_pending"]) == ("9.5", "0")
    assert (rows["alice"][ASSIGNMENT], rows["alice"][f"{ASSIGNMENT}_pending"]) == ("10", "2")

    summary = browser.open((graded / "out" / "summary.html").as_uri())
    assert "Pending (待批改)" in summary.text() and "alice (2 pts)" in summary.text()
    assert "bob (" not in summary.text()
    assert summary.errors == [], summary.errors


# --- a class collected through nbgrader's exchange: formgrader lists it as graded; its Autograde refuses ----------

COLLECTED = "rmsnorm"  # no written part: formgrader's status for a graded submission is "graded"


def nbgrader_api(course: Path):
    """nbgrader's own API on the course, configured as formgrader is (the course's nbgrader_config.py)."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from autograder.intake.handin import load_course_config

    config = load_course_config(course)
    return NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)


def collected_course(root: Path, students: dict[str, nbformat.NotebookNode]) -> Path:
    """A course whose submissions went the exchange's way: generate and release, each student's `nbgrader submit`
    (timestamp.txt with microseconds), the instructor's `nbgrader collect`."""
    root.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(REPO_ROOT / "assignments" / COLLECTED, root / "assignments" / COLLECTED)
    exchange = [f"--Exchange.root={root / 'exchange'}"]
    (root / "exchange").mkdir()
    (root / "roster.csv").write_text("id,first_name,last_name,email\n" + "".join(
        f"{s},{s.title()},Test,\n" for s in students))
    nbgrader(root, "db", "student", "import", "roster.csv")
    nbgrader(root, "generate_assignment", COLLECTED, "--force")
    nbgrader(root, "release_assignment", COLLECTED, *exchange)
    for student, nb in students.items():
        home = root.parent / f"home-{student}"
        (home / COLLECTED).mkdir(parents=True)
        nbformat.write(nb, home / COLLECTED / f"{COLLECTED}.ipynb")
        nbgrader(home, "submit", COLLECTED, "--course=gpt2-to-modern", f"--student={student}", *exchange)
    nbgrader(root, "collect", COLLECTED, *exchange)
    for student in students:
        stamp = (root / "submitted" / student / COLLECTED / "timestamp.txt").read_text()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} UTC", stamp.strip()), stamp
    return root


def grade_collected(course: Path, *extra: str) -> str:
    result = RUNNER.invoke(app, ["grade", COLLECTED, "--submissions", str(course / "submitted"),
                                 "--out", str(course / "out"), *FAST, *extra])
    assert result.exit_code in (0, 1), result.output + repr(result.exception)  # 1: the exchange's owner is root
    return result.output


def test_formgrader_lists_an_exchange_collected_class_as_graded_with_our_scores(tmp_path):
    gamma_missing = next(m for m in mistakes(COLLECTED) if m.name == "gamma_missing")
    course = collected_course(tmp_path / "course", {
        "alice": nbformat.read(source_notebook(COLLECTED), as_version=4),
        "bob": notebook_with_edits(COLLECTED, gamma_missing.edits)})
    grade_collected(course)
    ours = {r["student"]: (r["score"], r["max_score"]) for r in json.loads((course / "out" / "results.json").read_text())}
    assert set(ours) == {"alice", "bob"} and ours["alice"][0] > ours["bob"][0], ours

    api = nbgrader_api(course)
    assert api.get_autograded_students(COLLECTED) == {"alice", "bob"}
    listed = {s["student"]: s for s in api.get_submissions(COLLECTED)}
    for student, (score, max_score) in ours.items():
        row = listed[student]
        assert row["autograded"] and row["submitted"] and not row["needs_manual_grade"], row
        assert (row["score"], row["max_score"]) == (score, max_score), row
        # the gradebook's time is nbgrader's own reading of timestamp.txt, to the microsecond
        stamp = (course / "submitted" / student / COLLECTED / "timestamp.txt").read_text()
        assert row["timestamp"] == api.get_submitted_timestamp(COLLECTED, student).isoformat(), (row, stamp)

    server = Formgrader(course, tmp_path / "jupyter-server.log")
    try:
        served = {s["student"]: s for s in server.api("GET", f"/formgrader/api/submissions/{COLLECTED}")}
        assert {s: (r["autograded"], r["score"]) for s, r in served.items()} == \
            {s: (True, score) for s, (score, _) in ours.items()}
        chromium_path()
        with Chromium(offline={MATHJAX_CDN: MATHJAX_LOCAL}) as chromium:
            server.login(chromium)
            page = chromium.open(server.url(f"/formgrader/manage_submissions/{COLLECTED}"),
                                 ready="document.querySelectorAll('td.status span.label').length >= 2")
            text = page.text()
            assert "needs autograding" not in text, text
            assert page.evaluate("document.querySelectorAll('td.status span.label-success').length") == 2, text
            for score, max_score in ours.values():
                assert f"{score:g} / {max_score:g}" in text, (score, text)
            assert page.errors == [] and page.blocked == [], (page.errors, page.blocked)
    finally:
        server.close()


def test_nbgrader_autograde_through_formgrader_is_refused_and_runs_no_student_code(tmp_path):
    marker = tmp_path / "written-by-student-code"
    nb = nbformat.read(source_notebook(COLLECTED), as_version=4)
    nb.cells.insert(1, nbformat.v4.new_code_cell(f"open({str(marker)!r}, 'w').write('ran outside the sandbox')"))
    course = collected_course(tmp_path / "course", {"mallory": nb})
    grade_collected(course)
    assert not marker.exists()  # the sandbox has its own /tmp
    before = gradebook_scores(course)
    page = course / "autograded" / "mallory" / COLLECTED / f"{COLLECTED}.ipynb"
    assert page.is_file()

    server = Formgrader(course, tmp_path / "jupyter-server.log")
    try:
        # formgrader's Autograde button: what its page posts
        reply = server.api("POST", f"/formgrader/api/submission/{COLLECTED}/mallory/autograde", {})
        assert reply["success"] is False, reply
        assert "autograde grade" in reply["log"] + reply.get("error", ""), reply
        assert not marker.exists(), "nbgrader's Autograde ran the student's code"
        assert gradebook_scores(course) == before
        listed = {s["student"]: s for s in server.api("GET", f"/formgrader/api/submissions/{COLLECTED}")}
        assert not listed["mallory"]["autograded"]  # nbgrader removed the autograded/ folder it had made
    finally:
        server.close()
    # the CLI too
    done = run_nbgrader(["autograde", COLLECTED, "--force"], cwd=course)
    assert done.returncode != 0 and "autograde grade" in done.stdout + done.stderr, done.stderr[-3000:]
    assert not marker.exists() and gradebook_scores(course) == before

    # the next `autograde grade` writes the autograded notebook again: formgrader lists it graded
    output = grade_collected(course)
    assert "restored the autograded notebooks of 1 submission(s)" in " ".join(output.split()), output
    assert page.is_file() and nbgrader_api(course).get_autograded_students(COLLECTED) == {"mallory"}

    # the switch restores nbgrader's own behaviour: then its kernel runs the student's code, marker and all
    allow_unsandboxed_nbgrader(course)
    nbgrader(course, "autograde", COLLECTED, "--force")
    assert marker.read_text() == "ran outside the sandbox"


def test_the_course_config_puts_the_guard_before_nbgraders_own_autograde_steps():
    """nbgrader_config.py's list is the guard, then nbgrader 0.9.6's default list unchanged."""
    from nbgrader.converters.autograde import Autograde
    from traitlets.utils.importstring import import_item

    from autograder.intake.handin import load_course_config
    from autograder.recording.nbgrader_guard import RefuseUnsandboxed

    listed = load_course_config(REPO_ROOT).Autograde.autograde_preprocessors
    assert [import_item(p) for p in listed] == [RefuseUnsandboxed, *Autograde.class_traits()["autograde_preprocessors"].default()]


def test_the_autograde_settings_known_per_nbgrader_version_are_nbgraders_own():
    """Reading the course's settings takes c.Autograde's nbgrader settings from a table (no nbconvert import before
    the workers start): the installed nbgrader must have its entry, equal to what its Autograde class says."""
    from importlib import metadata

    from nbgrader.converters.autograde import Autograde

    from autograder.intake import handin

    version = metadata.version("nbgrader")
    assert version in handin.NBGRADER_AUTOGRADE_KEYS, f"add nbgrader {version}'s Autograde settings to the table"
    assert handin.NBGRADER_AUTOGRADE_KEYS[version] == set(Autograde.class_trait_names(config=True))
    assert handin._nbgrader_autograde_keys() == set(Autograde.class_trait_names(config=True)) | {
        "allow_unsandboxed_nbgrader"}
