"""`autograde grade` end to end: a small class in nbgrader's layout, the outputs, the gradebook, resume after kill -9."""

import contextlib
import csv
import io
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder.cli import app
from autograder.examples import notebook_with_edits
from autograder.results import SubmissionResult
from conftest import release_notebook, run_nbgrader, source_notebook
from hostile.corpus import Context, by_name as hostile_case, plant_course, submission
from hostile.watch import leftover_pool_processes, live_children
from solutions.student_params import student_answers

pytestmark = pytest.mark.slow

FORMULA_ID = '=HYPERLINK("x")'
RMS_RETURN = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"
RUNNER = CliRunner()
FAST = ["--cell-timeout", "8", "--probe-timeout", "8"]


def typed_hand_answers(answers: dict) -> list[tuple[str, str]]:
    nb = nbformat.read(source_notebook("rmsnorm"), as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "hand_answer")
    region = cell.source.split("### BEGIN SOLUTION\n", 1)[1].split("### END SOLUTION", 1)[0]
    return [(region, "".join(f"{k} = {v!r}\n" for k, v in answers.items()))]


def make_course(root: Path) -> Path:
    """A course folder: nbgrader config, a roster in the gradebook, and submissions in nbgrader's layout."""
    root.mkdir(parents=True)
    shutil.copy(Path(__file__).parent.parent / "nbgrader_config.py", root)
    work = {
        "alice": nbformat.read(source_notebook("rmsnorm"), as_version=4),
        FORMULA_ID: nbformat.read(release_notebook("rmsnorm"), as_version=4),
        "carol": notebook_with_edits("rmsnorm", typed_hand_answers(student_answers("rmsnorm", "alice"))),
        "erin": notebook_with_edits("rmsnorm", [(RMS_RETURN, "raise ValueError('<script>alert(1)</script>')")]),
    }
    for student, nb in work.items():
        folder = root / "submitted" / student / "rmsnorm"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "rmsnorm.ipynb")
        (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")
    broken = root / "submitted" / "bob" / "rmsnorm"
    broken.mkdir(parents=True)
    (broken / "rmsnorm.ipynb").write_text('{"cells": [')  # cut short
    (broken / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")
    roster = root / "roster.csv"
    roster.write_text("id,first_name,last_name,email\n" + "\n".join(
        f'"{s.replace(chr(34), chr(34) * 2)}",,,' for s in ["alice", "bob", "carol", "dave", "erin", FORMULA_ID]) + "\n")
    done = run_nbgrader(["db", "student", "import", str(roster)], cwd=root)
    assert done.returncode == 0, done.stderr
    return root


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("cli") / "course")
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                                 "--out", str(course / "out"), *FAST])
    assert result.exit_code == 0, result.output
    return course, result.output



def stored_identities(root: Path) -> list[str]:
    """What each result file in root/out says, as "identical results" compares it (no digests, keys or timings)."""
    return sorted(json.dumps(SubmissionResult.from_dict(
        {k: v for k, v in json.loads(p.read_text()).items() if k not in ("notebook_sha256", "cache_key")}).identity(),
        sort_keys=True) for p in (root / "out" / "results").glob("*/*.json"))


def nbgrader_export(root: Path) -> list[tuple[str, str]]:
    """(student, score) rows of `nbgrader export` in the course at `root`."""
    done = run_nbgrader(["export", "--to", str(root / "export.csv")], cwd=root)
    assert done.returncode == 0, done.stderr
    return sorted((r["student_id"], r["score"]) for r in csv.DictReader(open(root / "export.csv")))

def test_results_json_lists_every_submission_and_check(graded_course):
    course, output = graded_course
    rows = json.loads((course / "out" / "results.json").read_text())
    by_student = {r["student"]: r for r in rows}
    assert set(by_student) == {"alice", "bob", "carol", "dave", "erin", FORMULA_ID}
    assert by_student["dave"]["status"] == "missing" and by_student["dave"]["checks"] == []  # on the roster, none
    assert by_student["alice"]["score"] == 10 and by_student["alice"]["status"] == "graded"
    assert by_student["bob"]["status"] == "error" and by_student["bob"]["score"] == 0
    assert by_student[FORMULA_ID]["score"] == 0
    assert by_student["carol"]["score"] == 8  # the hand part (2 points) lost: another student's numbers
    for check in by_student["alice"]["checks"]:
        assert set(check) >= {"name", "grade_id", "passed", "points", "max_points", "message", "diagnosis"}
    assert "Grading summary" in output and "errors" in output and "out of" in output


def test_grades_csv_has_the_roster_and_escapes_formulas(graded_course):
    course, _ = graded_course
    rows = list(csv.reader(io.StringIO((course / "out" / "grades.csv").read_text())))
    assert rows[0] == ["student", "rmsnorm", "rmsnorm_raw", "rmsnorm_penalty", "rmsnorm_flags", "rmsnorm_pending",
                       "rmsnorm_submitted", "total"]
    table = {r[0]: r[1:] for r in rows[1:]}
    # no due date: no penalty, and no exchange to check; handed in when timestamp.txt says, in the course's zone (UTC)
    assert table["alice"] == ["10", "10", "0", "", "0", "2026-11-30 10:00:00 UTC", "10"]
    assert table["dave"] == ["0", "0", "0", "missing", "0", "", "0"]  # dave is on the roster, submitted nothing
    assert "'" + FORMULA_ID in table and FORMULA_ID not in table  # a spreadsheet shows it as text


def test_who_needs_action_is_named_in_the_output_grades_csv_and_results_json(graded_course):
    """Issue 23, item 7: a corrupt notebook (bob), a missing submission (dave), an unanswered one (the release
    notebook) and copied hand answers (carol's fit alice's numbers) are each a flag, not the same silent 0."""
    course, output = graded_course
    said = " ".join(output.split())  # the console wraps long lines
    out = course / "out"
    assert f"needs action: full lists in {out / 'summary.html'} (Needs action) and {out / 'grades.csv'}" in said, said
    for line in ("error (1): bob/rmsnorm", "missing (1): dave/rmsnorm", f"unanswered (1): {FORMULA_ID}/rmsnorm",
                 "copied (1): carol/rmsnorm (fits alice's numbers)"):
        assert line in said, (line, said)
    assert "conflict (" not in said and "alice/rmsnorm" not in said.split("needs action:")[1].split("Grading")[0]
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    flags = {r[0]: r[rows[0].index("rmsnorm_flags")] for r in rows[1:]}
    assert flags == {"alice": "", "bob": "error", "carol": "copied", "dave": "missing", "erin": "",
                     "'" + FORMULA_ID: "unanswered"}, flags
    results = {r["student"]: r for r in json.loads((out / "results.json").read_text())}
    assert {s: r["flags"] for s, r in results.items()} == {
        "alice": [], "bob": ["error"], "carol": ["copied"], "dave": ["missing"], "erin": [], FORMULA_ID: ["unanswered"]}
    assert (results["dave"]["score"], results["dave"]["max_score"], results["dave"]["left_out"]) == (0, 10, None)
    # the unanswered flag is the hand-in's: the student's report says it, in Chinese
    assert [f["kind"] for f in results[FORMULA_ID]["handin"]["flags"]] == ["unanswered"]
    from autograder.recording.outputs import safe_name

    report = (out / "reports" / safe_name(FORMULA_ID) / "rmsnorm.html").read_text()
    assert "这份提交没有作答" in report
    # the summary's full lists, and the same words as the table's flags
    summary = (out / "summary.html").read_text()
    lists = dict(re.findall(r'<p class="note names" data-action="(\w+)">(.*?)</p>', summary))
    assert set(lists) == {"error", "missing", "unanswered", "copied"}, lists
    assert "bob/rmsnorm" in lists["error"] and "dave/rmsnorm" in lists["missing"] and "carol/rmsnorm" in lists["copied"]
    assert re.search(r'<tr data-flags="copied"><td data-v="carol">', summary)
    assert re.search(r'<tr data-flags="unanswered"><td data-v="[^"]*HYPERLINK', summary)


def test_unanswered_is_a_notebook_whose_code_and_answers_are_as_released(tmp_path):
    from autograder.class_run import _notebook_facts

    def facts(notebook: dict | Path, assignment: str = "rmsnorm"):
        path = tmp_path / "nb.ipynb"
        path.write_text(json.dumps(notebook)) if isinstance(notebook, dict) else shutil.copy(notebook, path)
        return _notebook_facts(assignment, path.read_bytes())

    assert facts(release_notebook("rmsnorm")) == (None, True)
    assert facts(release_notebook("gradient_flow"), "gradient_flow") == (None, True)  # with a written answer
    assert facts(source_notebook("rmsnorm")) == (None, False)
    assert facts(source_notebook("rope")) == ("rope", False)  # another assignment's notebook: that flag instead
    released = json.loads(release_notebook("rmsnorm").read_text())
    answer = {"cell_type": "code", "metadata": {}, "source": "def rms_norm(x, gamma, eps): return x", "outputs": [],
              "execution_count": None}
    assert facts({**released, "cells": released["cells"] + [answer]}) == (None, False)  # an answer in a new cell
    solution = [c for c in released["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("solution")]
    assert facts({**released, "cells": [c for c in released["cells"] if c not in solution]}) == (None, True)
    written = json.loads(release_notebook("gradient_flow").read_text())
    for cell in written["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("metadata", {}).get("nbgrader", {}).get("solution"):
            cell["source"] = "梯度在 Pre-Norm 中更稳定"
    assert facts(written, "gradient_flow") == (None, False)  # only a written answer
    assert facts({"cells": []}) == (None, False) and facts({"nbformat": 4, "cells": "x"}) == (None, False)


def test_gradebook_export_shows_the_same_scores(graded_course):
    course, _ = graded_course
    done = run_nbgrader(["export", "--to", str(course / "export.csv")], cwd=course)
    assert done.returncode == 0, done.stderr
    exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(course / "export.csv"))}
    results = {r["student"]: r["score"] for r in json.loads((course / "out" / "results.json").read_text())}
    for student, score in results.items():
        assert exported[student] == score, student
    assert exported["dave"] == 0


def test_every_report_renders_and_feedback_sits_where_nbgrader_expects_it(graded_course):
    course, _ = graded_course
    for student in ("alice", "bob", "carol", "erin"):
        report = (course / "out" / "reports" / student / "rmsnorm.html").read_text()
        assert report.startswith("<!DOCTYPE html>") or report.lstrip().lower().startswith("<!doctype html>")
        assert student in report
        feedback = course / "feedback" / student / "rmsnorm"
        assert (feedback / "rmsnorm.html").exists() and (feedback / "timestamp.txt").exists()
    erin = (course / "out" / "reports" / "erin" / "rmsnorm.html").read_text()
    assert "<script>alert(1)</script>" not in erin and "&lt;script&gt;" in erin


def test_summary_flags_hand_answers_that_fit_another_student(graded_course):
    course, _ = graded_course
    summary = (course / "out" / "summary.html").read_text()
    assert "carol" in summary and "答案与学生 alice 的参数吻合" in summary


@pytest.mark.parametrize("args,fragment", [
    (["grade", "rmsnorm", "--submissions", "/no/such/folder"], "no such file or directory"),
    (["grade", "attention", "--submissions", "."], "no such assignment"),
])
def test_bad_arguments_exit_non_zero_with_a_message(args, fragment, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = RUNNER.invoke(app, args)
    assert result.exit_code != 0 and fragment in result.output
    assert list(tmp_path.iterdir()) == []  # no output folder, no lock file left for a run that never started


def test_an_empty_folder_exits_non_zero(tmp_path):
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(tmp_path), "--out", str(tmp_path / "o")])
    assert result.exit_code != 0 and "no submissions" in result.output


def test_the_command_ends_without_walking_its_objects_again_and_with_its_exit_code(tmp_path):
    """Once a command has written everything, `main` freezes the objects (the interpreter's end does not collect
    nbgrader's and SQLAlchemy's again); the exit code is the command's, and atexit handlers still run."""
    probe = ("import atexit, gc, sys\n"
             "atexit.register(lambda: print('frozen', gc.get_freeze_count()))\n"
             "sys.argv = ['autograde'] + sys.argv[1:]\n"
             "from autograder.cli import main\nmain()\n")
    ok = subprocess.run([sys.executable, "-c", probe, "version"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert int(ok.stdout.split("frozen")[-1]) > 10_000, ok.stdout
    bad = subprocess.run([sys.executable, "-c", probe, "grade", "rmsnorm", "--submissions", str(tmp_path),
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "no submissions" in bad.stdout + bad.stderr, (bad.stdout, bad.stderr)
    assert int(bad.stdout.split("frozen")[-1]) > 10_000, bad.stdout


def gradebook_rows(db: Path) -> tuple[int, int]:
    with sqlite3.connect(db) as con:
        submissions = con.execute("select count(*) from submitted_assignment").fetchone()[0]
        duplicates = con.execute("select count(*) from (select assignment_id, student_id, count(*) c "
                                 "from submitted_assignment group by 1, 2 having c > 1)").fetchone()[0]
    return submissions, duplicates


HOSTILE_IN_THE_CLASS = ("forged_reply_pickle", "setsid_daemon", "kill_every_process", "endless_loop_cell")


def test_resume_after_kill_9_gives_identical_results_and_gradebook(tmp_path):
    """A class with hostile submissions, killed with SIGKILL at a random point (seeded: AUTOGRADE_KILL_SEED
    repeats one), then resumed: the same results and gradebook as a run that was not interrupted."""
    course = make_course(tmp_path / "course")
    ctx = Context(tmp_path / "markers", plant_course(tmp_path / "planted", "HOSTILE-SECRET-x"), "HOSTILE-SECRET-x")
    ctx.marker_dir.mkdir()
    for i, name in enumerate(HOSTILE_IN_THE_CLASS):  # sorted after the others: the endless loop is graded last
        folder = course / "submitted" / f"h{i}-{name}" / "rmsnorm"
        submission(hostile_case(name), folder, ctx)
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:  # on the roster: in the gradebook too
        for i, name in enumerate(HOSTILE_IN_THE_CLASS):
            gradebook.add_student(f"h{i}-{name}")
    clean = tmp_path / "clean"
    shutil.copytree(course, clean)

    # a cell 4 s (the honest cells take milliseconds): the endless loop, graded last and twice a run (skipping, then
    # every cell), keeps the killed run going past the kill either way
    cmd = [sys.executable, "-m", "autograder.cli", "grade", "rmsnorm", "--submissions", "SUB", "--out", "OUT",
           "--cell-timeout", "4", "--probe-timeout", "8"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    args = [a.replace("SUB", str(course / "submitted")).replace("OUT", str(course / "out")) for a in cmd]
    seed = int(os.environ.get("AUTOGRADE_KILL_SEED", random.randrange(2**32)))
    rng = random.Random(seed)
    after_results, delay = rng.randint(0, 7), rng.uniform(0.0, 1.5)
    print(f"kill -9 seed {seed}: after {after_results} result(s) and {delay:.2f} s")
    children = live_children(os.getpid())
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(list((course / "out" / "results").glob("*/*.json"))) < after_results and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(list((course / "out" / "results").glob("*/*.json"))) < 9, f"the run finished before the kill (seed {seed})"

    resumed = subprocess.run(args + ["--resume"], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "unchanged since they were graded" in resumed.stdout
    full = subprocess.run([a.replace(str(course), str(clean)) for a in args], env=env, capture_output=True, text=True)
    assert full.returncode == 0, full.stderr[-2000:]

    assert stored_identities(course) == stored_identities(clean)
    assert gradebook_rows(course / "gradebook.db") == gradebook_rows(clean / "gradebook.db") == (9, 0)
    assert nbgrader_export(course) == nbgrader_export(clean)
    assert os.listdir(ctx.marker_dir) == [] and live_children(os.getpid()) == children
    assert leftover_pool_processes() == {}


KILLED_AT_THE_THIRD_RESULT_FILE = """
import os, signal, sys
from autograder.recording import batch, outputs
batch.EVERY, batch.SECONDS = 2, 600.0  # transactions of two results, however slowly they come
save, saves = outputs.ResultStore.save_encoded, []  # every result file is written by it
def killed_at_the_third(self, *args, **kwargs):
    saves.append(1)
    if len(saves) == 3:  # the second transaction has committed; its result files are not written yet
        os.kill(os.getpid(), signal.SIGKILL)
    return save(self, *args, **kwargs)
outputs.ResultStore.save_encoded = killed_at_the_third
from autograder.cli import main
sys.argv[0] = "autograde"
main()
"""


def test_a_kill_9_between_a_commit_and_its_result_files_loses_and_duplicates_nothing(tmp_path):
    """The gradebook is written in transactions of several results, each result file after its transaction: killed
    after the second transaction committed and before its result files were written, a restart grades exactly what
    has no result file and leaves the results and the gradebook of a run that was not interrupted."""
    course = make_course(tmp_path / "course")
    clean = tmp_path / "clean"
    shutil.copytree(course, clean)
    args = ["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(course / "out"),
            "--workers", "1", *FAST]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    killed = subprocess.Popen([sys.executable, "-c", KILLED_AT_THE_THIRD_RESULT_FILE, *args], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    _, stderr = killed.communicate(timeout=600)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(killed.pid, signal.SIGKILL)  # what it had started (its sandboxes' warm parent)
    assert killed.returncode == -signal.SIGKILL, stderr[-2000:]
    assert len(list((course / "out" / "results").glob("*/*.json"))) == 2  # the first transaction's
    assert gradebook_rows(course / "gradebook.db") == (4, 0)  # and the second's, committed: 4 of 5 submissions

    resumed = subprocess.run([sys.executable, "-m", "autograder.cli", *args], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "graded 3 submission(s); 2 unchanged" in resumed.stdout
    full = subprocess.run([sys.executable, "-m", "autograder.cli", *[a.replace(str(course), str(clean)) for a in args]],
                          env=env, capture_output=True, text=True)
    assert full.returncode == 0, full.stderr[-2000:]

    assert stored_identities(course) == stored_identities(clean) and len(stored_identities(course)) == 5
    assert gradebook_rows(course / "gradebook.db") == gradebook_rows(clean / "gradebook.db") == (5, 0)
    assert nbgrader_export(course) == nbgrader_export(clean)


def test_report_rerenders_from_stored_results_without_grading(graded_course, monkeypatch):
    course, _ = graded_course
    shutil.rmtree(course / "out" / "reports")
    (course / "out" / "summary.html").unlink()
    import autograder.engine

    monkeypatch.setattr(autograder.engine, "grade_batch", lambda *a, **k: pytest.fail("report must not grade"))
    result = RUNNER.invoke(app, ["report", "--out", str(course / "out")])
    assert result.exit_code == 0, result.output
    assert (course / "out" / "reports" / "alice" / "rmsnorm.html").exists()
    assert (course / "out" / "summary.html").exists()


def test_a_manual_score_from_formgrader_survives_a_regrade(graded_course):
    from nbgrader.api import Gradebook

    course, _ = graded_course
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade("rmsnorm_hand", "rmsnorm", "rmsnorm", "carol")
        grade.manual_score = 1.5  # the instructor's override in formgrader
        gb.db.commit()
    result = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                                 "--out", str(course / "out"), "--student", "carol", *FAST])
    assert result.exit_code == 0, result.output
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grade = gb.find_grade("rmsnorm_hand", "rmsnorm", "rmsnorm", "carol")
        assert grade.manual_score == 1.5 and grade.auto_score == 0.0 and grade.score == 1.5
        assert gb.find_submission("rmsnorm", "carol").score == 9.5


def test_a_blank_student_id_is_a_bad_submission_and_an_unknown_student_is_said_to_have_none(tmp_path):
    course = tmp_path / "course"
    for student in ("alice", "   "):
        folder = course / "submitted" / student / "rmsnorm"
        folder.mkdir(parents=True)
        nbformat.write(nbformat.read(source_notebook("rmsnorm"), as_version=4), folder / "rmsnorm.ipynb")
    args = ["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(course / "out"), *FAST]
    dry = RUNNER.invoke(app, [*args, "--dry-run", "--late-policy", "percent_per_day", "--late-percent", "10"])
    assert dry.exit_code == 0 and "1 submission(s) would be graded" in dry.output, dry.output
    assert "is blank: not graded" in dry.output, dry.output
    # and how it would be graded: the settings the run would take
    assert "late policy: 10% of the maximum per started day late" in dry.output, dry.output
    assert "hand-in times read in: UTC (c.Exchange.timezone)" in dry.output and "sandbox tier: " in dry.output

    nosuch = RUNNER.invoke(app, [*args, "--student", "nosuch"])
    assert nosuch.exit_code == 1, nosuch.output
    said = " ".join(nosuch.output.split())
    assert "--student nosuch: no submission of rmsnorm by that student in" in said, said
    assert "students with one there: alice" in said and "expected nbgrader's layout" not in said, said

    done = RUNNER.invoke(app, args)
    assert "is blank: not graded" in done.output, done.output
    results = json.loads((course / "out" / "results.json").read_text())
    assert [r["student"] for r in results] == ["alice"]
    assert "评分程序出错" not in done.output + (course / "out" / "summary.html").read_text()


# The run that records the grades imports none of what grading needs (autograder.jobs.worker grades): the
# catalogue, the hand answers and nbgrader's gradebook API come without torch, pytest or nbgrader's Jupyter server;
# nor nbconvert (the course's c.Autograde settings are checked against a table) nor alembic (a new gradebook's
# migration head is read off nbgrader's scripts).
RECORDING_PROCESS = """
import json, sys
from autograder.cli import app
try:
    app(sys.argv[1:], prog_name="autograde")
except SystemExit as exit_:
    code = exit_.code
heavy = sorted(m for m, module in sys.modules.items() if module is not None and (
    m.split(".")[0] in ("torch", "pytest", "jupyter_server", "nbconvert", "alembic", "rfc3987_syntax", "isoduration",
                        "arrow", "rfc3986_validator", "webcolors", "rfc3339_validator", "uri_template", "jsonpointer",
                        "fqdn")
    or m.startswith("nbgrader.server_extensions")))
print(json.dumps({"code": code, "heavy": heavy}))
"""


def test_the_recording_process_imports_neither_torch_nor_pytest_nor_nbgraders_server(tmp_path):
    course = make_course(tmp_path / "course")
    out = course / "out"
    for args in (["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(out), "--workers", "1",
                  *FAST], ["report", "--out", str(out), "--course", str(course)],
                 ["grade", "rmsnorm", "--submissions", str(course / "submitted"), "--out", str(tmp_path / "new"),
                  "--gradebook", str(tmp_path / "new.db"), "--workers", "1", *FAST]):  # a new gradebook
        done = subprocess.run([sys.executable, "-c", RECORDING_PROCESS, *args], capture_output=True, text=True,
                              cwd=course, timeout=600)
        seen = json.loads(done.stdout.strip().splitlines()[-1])
        assert seen == {"code": 0, "heavy": []}, (args[0], done.stderr[-2000:])
    # the run did what it does: reports with the hand answers checked, and the copied-answer check in the summary
    assert (out / "reports").is_dir() and any((out / "reports").rglob("*.html"))
    assert "rmsnorm" in (out / "summary.html").read_text(encoding="utf-8")


def test_every_reporting_module_imports_without_torch_or_pytest():
    probe = ("import importlib, json, pkgutil, sys\n"
             "import autograder.reporting as reporting\n"
             "names = [m.name for m in pkgutil.walk_packages(reporting.__path__, 'autograder.reporting.')]\n"
             "for name in names: importlib.import_module(name)\n"
             "print(json.dumps({'modules': names, 'heavy': sorted(m for m in sys.modules\n"
             "                                                 if m.split('.')[0] in ('torch', 'pytest'))}))\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "autograder.reporting.student_page" in seen["modules"] and "autograder.reporting.class_summary" in \
        seen["modules"], seen
    assert seen["heavy"] == [], done.stderr[-2000:]
