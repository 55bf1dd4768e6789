"""Issue 13: every grade survives the instructor's real workflow.

One assignment at a time into one OUT, the roster kept by `report`, the settings kept in OUT, extensions only for
roster students, another assignment's notebook flagged, one run at a time (locks), formula-safe CSVs, and Canvas and
Moodle downloads mapped to the roster and their gradebooks filled in. Courses are built in temporary folders as
tests/test_cli.py builds them; grading runs in one worker with short timeouts.
"""

import csv
import html
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from urllib.parse import unquote

import pytest
from typer.testing import CliRunner, Result

from autograder.cli import app
from autograder.recording.locking import LockedError, exclusive
from autograder.recording.outputs import safe_cell, safe_name, spreadsheet_safe
from conftest import release_notebook, run_nbgrader, source_notebook

pytestmark = pytest.mark.slow

RUNNER = CliRunner()
FAST = ["--cell-timeout", "8", "--probe-timeout", "8", "--workers", "1"]
ODD_ID = "x;=1+2;"  # a formula to a spreadsheet that splits on `;`
ROSTER = ["alice", "bob", "dave", "erin", ODD_ID]


def write_roster(course: Path, rows: list[tuple[str, str]]) -> None:
    """nbgrader's roster: (id, email) rows imported with `nbgrader db student import`."""
    roster = course / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email"])
        for sid, email in rows:
            writer.writerow([sid, "", "", email])
    done = run_nbgrader(["db", "student", "import", str(roster)], cwd=course)
    assert done.returncode == 0, done.stderr


def put(course: Path, student: str, assignment: str, notebook: Path) -> None:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(notebook, folder / f"{assignment}.ipynb")
    (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")


def make_course(root: Path) -> Path:
    """Two assignments, a roster of five (erin submits nothing), dave's rmsnorm is rope's notebook."""
    root.mkdir(parents=True)
    shutil.copy(Path(__file__).parent.parent / "nbgrader_config.py", root)
    put(root, "alice", "rmsnorm", source_notebook("rmsnorm"))
    put(root, "alice", "swiglu", source_notebook("swiglu"))
    put(root, "bob", "rmsnorm", release_notebook("rmsnorm"))
    put(root, "bob", "swiglu", source_notebook("swiglu"))
    put(root, ODD_ID, "rmsnorm", release_notebook("rmsnorm"))
    put(root, "dave", "rmsnorm", source_notebook("rope"))
    write_roster(root, [(s, "") for s in ROSTER])
    return root


def grade(course: Path, *assignments: str, out: str = "grading", extra=()) -> "Result":
    result = RUNNER.invoke(app, ["grade", *assignments, "--submissions", str(course / "submitted"),
                                 "--out", str(course / out), *FAST, *extra])
    return result


def exports(out: Path) -> tuple:
    return (json.loads((out / "results.json").read_text()), (out / "grades.csv").read_text(),
            (out / "summary.html").read_text())


def grades_table(out: Path) -> dict:
    rows = list(csv.reader(io.StringIO((out / "grades.csv").read_text())))
    return {r[0]: dict(zip(rows[0][1:], r[1:])) for r in rows[1:]}


@pytest.fixture(scope="module")
def courses(tmp_path_factory):
    """The same course graded assignment by assignment (one) and all at once (other)."""
    base = tmp_path_factory.mktemp("workflow")
    one = make_course(base / "one")
    shutil.copytree(one, base / "all")
    first = grade(one, "rmsnorm")
    assert first.exit_code == 0, first.output
    second = grade(one, "swiglu")
    assert second.exit_code == 0, second.output
    together = grade(base / "all", "rmsnorm", "swiglu")
    assert together.exit_code == 0, together.output
    return dict(one=one, all=base / "all", outputs=(first.output, second.output, together.output))


def test_one_assignment_at_a_time_equals_all_at_once(courses):
    one, together = exports(courses["one"] / "grading"), exports(courses["all"] / "grading")
    assert one[0] == together[0]  # results.json
    assert one[1] == together[1]  # grades.csv
    assert one[2] == together[2]  # summary.html
    table = grades_table(courses["one"] / "grading")
    assert sorted(table) == sorted(spreadsheet_safe(s) for s in ROSTER)  # the roster, erin included
    assert table["alice"]["rmsnorm"] == "10" and table["alice"]["swiglu"] == "10" and table["alice"]["total"] == "20"
    assert table["bob"]["swiglu"] == "10" and table["erin"]["total"] == "0"
    # the second run (swiglu only) printed the whole class, rmsnorm included
    assert "rmsnorm" in courses["outputs"][1].split("Grading summary")[1]


def test_report_without_course_keeps_the_roster(courses):
    out = courses["one"] / "grading"
    before = (out / "grades.csv").read_text()
    (out / "grades.csv").unlink()
    done = RUNNER.invoke(app, ["report", "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / "grades.csv").read_text() == before
    assert "erin" in grades_table(out)


def test_a_notebook_of_another_assignment_is_flagged(courses):
    out = courses["one"] / "grading"
    dave = next(r for r in json.loads((out / "results.json").read_text())
                if r["student"] == "dave" and r["assignment"] == "rmsnorm")
    assert [f["kind"] for f in dave["handin"]["flags"]] == ["wrong_assignment"]
    assert "这是 rope 的笔记本" in (out / "reports" / "dave" / "rmsnorm.html").read_text()
    summary = (out / "summary.html").read_text()
    assert re.search(r'<tr data-flags="[^"]*\bwrong_assignment\b[^"]*"><td data-v="dave">', summary)
    assert "this is a notebook of rope" in summary
    assert grades_table(out)["dave"]["rmsnorm_flags"] == "wrong_assignment"
    # the others are not flagged
    alice = next(r for r in json.loads((out / "results.json").read_text()) if r["student"] == "alice")
    assert not (alice["handin"] or {}).get("flags")


def test_the_summary_lists_every_student_with_links_and_one_vocabulary(courses):
    out = courses["one"] / "grading"
    summary = (out / "summary.html").read_text()
    table = summary.split('<table id="students">')[1].split("</table>")[0]
    assert table.count("<tr data-flags=") == len(ROSTER)
    links = re.findall(r'href="(reports/[^"]+)"', table)
    assert len(links) == 6  # every stored result
    for href in links:
        assert (out / unquote(html.unescape(href))).is_file(), href
    assert 'data-flags="missing"' in table  # erin
    for word in ("Best", "Out of", "Errors"):
        assert f">{word}</th>" in summary
    output = courses["outputs"][2]
    assert all(column in output for column in ("best", "out of", "errors"))


def test_every_csv_cell_is_safe_against_formulas(courses):
    text = (courses["one"] / "grading" / "grades.csv").read_text()
    assert_formula_safe(text)
    assert "x;'=1+2;" in text


FORMULA_AFTER_SEPARATOR = re.compile(r"(^|[,;\t|\r\n])\s*[=+@\-]")


def assert_formula_safe(text: str) -> None:
    """No cell, split on any separator a spreadsheet may use, starts with a formula character (plain numbers and
    an LMS's lone "-" aside)."""
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            if re.fullmatch(r"\s*-?\d+(\.\d+)?\s*|-", cell):
                continue
            assert not FORMULA_AFTER_SEPARATOR.search(cell), cell


@pytest.mark.parametrize("value,safe", [
    ("x;=1+2;", "x;'=1+2;"), ('=HYPERLINK("http://x")', '\'=HYPERLINK("http://x")'), ("a|@SUM(A1)", "a|'@SUM(A1)"),
    ("a\t+1", "a\t'+1"), ("a, -2+3", "a, '-2+3"), ("王芳", "王芳"), ("alice", "alice"), ("\tx", "'\tx"),
])
def test_spreadsheet_safe_after_every_separator(value, safe):
    assert spreadsheet_safe(value) == safe
    assert_formula_safe(safe_cell(value).replace('"', "") + "\n")


def test_a_changed_late_policy_stops_the_run_with_the_difference(courses, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(courses["one"], course)
    changed = grade(course, "rmsnorm", extra=["--late-policy", "fixed", "--late-points", "2"])
    assert changed.exit_code == 2, changed.output
    assert "late_policy.method: 'none' (stored) -> 'fixed' (this run)" in changed.output
    assert "late_policy.points: 0 (stored) -> 2 (this run)" in changed.output
    accepted = grade(course, "rmsnorm", extra=["--late-policy", "fixed", "--late-points", "2",
                                               "--accept-new-settings"])
    assert accepted.exit_code == 0, accepted.output
    assert json.loads((course / "grading" / "settings.json").read_text())["late_policy"]["method"] == "fixed"
    # the README's extension workflow: a plain `grade` afterwards reuses the stored policy (it is not given)
    plain = grade(course, "rmsnorm")
    assert plain.exit_code == 0, plain.output
    assert "settings changed" not in plain.output
    assert json.loads((course / "grading" / "settings.json").read_text())["late_policy"] == \
        {"method": "fixed", "points": 2, "percent": 0, "cap_percent": None}
    results = json.loads((course / "grading" / "results.json").read_text())
    assert {r["handin"]["policy"] for r in results if r["assignment"] == "rmsnorm" and r["handin"]} == \
        {"2 points off if late"}, results
    again = grade(course, "rmsnorm", extra=["--late-policy", "fixed", "--late-points", "2"])
    assert again.exit_code == 0, again.output  # the same settings again: it runs
    # a given, different value still stops; nbgrader_config.py's too
    other = grade(course, "rmsnorm", extra=["--late-points", "3"])
    assert other.exit_code == 2 and "late_policy.points: 2 (stored) -> 3 (this run)" in other.output, other.output
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.Autograde.late_policy = 'none'\n")
    configured = grade(course, "rmsnorm")
    assert configured.exit_code == 2 and "'fixed' (stored) -> 'none' (this run)" in configured.output


def test_an_extension_for_a_student_not_on_the_roster_is_refused(courses):
    course = courses["all"]
    done = RUNNER.invoke(app, ["extension", "rmsnorm", "alcie", "--days", "2", "--course", str(course)])
    assert done.exit_code == 2 and "'alcie' is not on the course's roster" in done.output
    assert "did you mean 'alice'" in done.output
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        with pytest.raises(MissingEntry):
            gb.find_student("alcie")
    longer = RUNNER.invoke(app, ["extension", "rmsnorm", "alice", "--days", "1", "--hours", "3.5", "--course",
                                 str(course)])
    assert longer.exit_code == 0 and "alice: rmsnorm extended by 1 day 3 hours 30 minutes" in longer.output, \
        longer.output
    ok = RUNNER.invoke(app, ["extension", "rmsnorm", "alice", "--days", "2", "--course", str(course)])
    assert ok.exit_code == 0, ok.output
    assert "alice: rmsnorm extended by 2 days" in ok.output and "0:00:00" not in ok.output, ok.output


def test_a_second_run_stops_while_the_first_completes(courses, tmp_path):
    course = tmp_path / "course"
    shutil.copytree(courses["all"], course)
    out = course / "grading"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    first = subprocess.Popen([sys.executable, "-m", "autograder.cli", "grade", "rmsnorm", "swiglu", "--force",
                              "--submissions", str(course / "submitted"), "--out", str(out), *FAST],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if json.loads((out / ".autograde.lock").read_text())["pid"] == first.pid:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.02)
        second = grade(course, "rmsnorm")
        report = RUNNER.invoke(app, ["report", "--out", str(out)])
        extension = RUNNER.invoke(app, ["extension", "rmsnorm", "alice", "--days", "1", "--course", str(course)])
        assert first.poll() is None, "the first run ended before the second started: nothing was tested"
    finally:
        stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stderr[-2000:]
    assert "graded 6 submission(s)" in stdout
    for other in (second, report):
        assert other.exit_code == 2 and f"pid {first.pid}" in other.output, other.output
        assert "output folder" in other.output
    assert extension.exit_code == 2 and f"pid {first.pid}" in extension.output and "gradebook" in extension.output
    assert grade(course, "rmsnorm").exit_code == 0  # free again


def test_a_killed_holder_leaves_no_lock(tmp_path):
    lock = tmp_path / "x.lock"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom autograder.recording.locking import exclusive\n"
                               f"with exclusive({str(lock)!r}, 'the thing', 'holder'):\n"
                               "    print('held', flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    with pytest.raises(LockedError, match=f"pid {holder.pid}"):
        with exclusive(lock, "the thing", "test"):
            pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with exclusive(lock, "the thing", "test"):
        assert json.loads(lock.read_text())["pid"] == os.getpid()


# --- LMS downloads ---------------------------------------------------------------------------------------------

LMS_ROSTER = [("alice", "alice@uni.edu"), ("bob", "bob@uni.edu"), ("carol", "carol.w@uni.edu")]
CANVAS_GRADEBOOK = (
    "Student,ID,SIS User ID,SIS Login ID,Section,rmsnorm (9001),Other (9002)\n"
    "    Points Possible,,,,,10.00,5.00\n"
    '"Zhang, Alice",101,20240001,alice,LLM-01,,4\n'
    '"Li, Bob",102,20240002,bob,LLM-01,,\n'
    '"=HYPERLINK(""http://evil"")",103,20240003,carol,LLM-01,,\n'
    '"Student, Test",999,,,LLM-01,,\n'
)
MOODLE_WORKSHEET = (
    "Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,Last modified (submission),"
    "Last modified (grade),Feedback comments\n"
    'Participant 201,Alice Zhang,alice@uni.edu,Submitted for grading,,10.00,Yes,"Monday, 30 November 2026, 10:00 AM",-,\n'
    'Participant 202,Bob Li,bob@uni.edu,Submitted for grading,,10.00,Yes,"Monday, 30 November 2026, 10:05 AM",-,\n'
    'Participant 203,@Carol;=1+1,carol.w@uni.edu,Submitted for grading,,10.00,Yes,"Monday, 30 November 2026, 11:00 AM",-,\n'
    "Participant 204,Dave Chen,dave@elsewhere.org,Submitted for grading,,10.00,Yes,-,-,\n"
)


def canvas_zip(path: Path) -> Path:
    """As Canvas names a download: alice on time, bob late and resubmitted (rmsnorm-1) with an extra file named
    after alice (a release notebook: 0), carol under a name she chose, user 104 not in the gradebook export."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(source_notebook("rmsnorm"), "zhangalice_101_5001_rmsnorm.ipynb")
        zf.write(source_notebook("rmsnorm"), "libob_late_102_5003_rmsnorm-1.ipynb")
        zf.write(release_notebook("rmsnorm"), "libob_late_102_5002_alice_rmsnorm.ipynb")
        zf.write(source_notebook("rmsnorm"), "wangcarol_103_5004_my homework.ipynb")
        zf.write(release_notebook("rmsnorm"), "chendave_104_5005_rmsnorm.ipynb")
    return path


def moodle_zip(path: Path) -> Path:
    """As Moodle names "Download all submissions" (in folders): bob's folder also holds alice_rmsnorm.ipynb, carol
    chose her own name, participant 204 is not on the roster; an online-text folder holds no notebook."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.write(source_notebook("rmsnorm"), "Alice Zhang_201_assignsubmission_file_/rmsnorm.ipynb")
        zf.write(source_notebook("rmsnorm"), "Bob Li_202_assignsubmission_file_/rmsnorm.ipynb")
        zf.write(release_notebook("rmsnorm"), "Bob Li_202_assignsubmission_file_/alice_rmsnorm.ipynb")
        zf.write(source_notebook("rmsnorm"), "Carol Wang_203_assignsubmission_file_/作业 最终版.ipynb")
        zf.write(release_notebook("rmsnorm"), "Dave Chen_204_assignsubmission_file_/rmsnorm.ipynb")
        zf.writestr("Alice Zhang_201_assignsubmission_onlinetext_/onlinetext.html", "<p>hi</p>")
    return path


@pytest.fixture(scope="module")
def lms_course(tmp_path_factory):
    course = tmp_path_factory.mktemp("lms") / "course"
    course.mkdir()
    shutil.copy(Path(__file__).parent.parent / "nbgrader_config.py", course)
    with open(course / "nbgrader_config.py", "a") as f:  # read for a zip too (the --gradebook's folder): Canvas's
        f.write('\nc.Autograde.late_policy = "fixed"\nc.Autograde.late_points = 2\n')  # late bob loses 2 points
    (course / "submitted").mkdir()
    write_roster(course, LMS_ROSTER)
    (course / "canvas.csv").write_text(CANVAS_GRADEBOOK, encoding="utf-8")
    (course / "moodle.csv").write_bytes(b"\xef\xbb\xbf" + MOODLE_WORKSHEET.encode())
    return course


def lms_grade(course: Path, archive: Path, roster: str, out: str, *extra: str):
    return RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(archive), "--lms-roster",
                               str(course / roster), "--gradebook", str(course / "gradebook.db"),
                               "--out", str(course / out), *FAST, *extra])


@pytest.mark.parametrize("kind", ["canvas", "moodle"])
def test_an_lms_download_maps_to_the_roster_replaces_nobody_and_its_gradebook_round_trips(lms_course, kind):
    archive = (canvas_zip if kind == "canvas" else moodle_zip)(lms_course / f"{kind}.zip")
    roster, out = f"{kind}.csv", lms_course / f"out-{kind}"
    layout = ["--layout", "canvas"] if kind == "canvas" else []  # Moodle's is recognised
    unmapped = "canvas:104" if kind == "canvas" else "moodle:204"

    dry = lms_grade(lms_course, archive, roster, out.name, *layout, "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert f"dry run ({kind} layout): 4 submission(s) would be graded" in dry.output
    assert not (out / "results").exists()
    how = {line.split("\t")[0].strip(): line.split("\t")[3] for line in dry.output.splitlines() if "\t" in line}
    assert set(how) == {"alice", "bob", "carol", unmapped}
    if kind == "canvas":
        assert how["alice"] == "Canvas user 101 -> SIS Login ID 'alice'" and "(Canvas: late)" in how["bob"]
    else:
        assert how["carol"] == "Moodle participant 203 -> email 'carol.w@uni.edu'"
        assert how["bob"] == "Moodle participant 202 -> email 'bob@uni.edu'"

    first = lms_grade(lms_course, archive, roster, out.name, *layout)
    assert first.exit_code == 0, first.output
    results = {(r["student"], r["assignment"]): r for r in json.loads((out / "results.json").read_text())}
    assert sorted(s for s, _ in results) == sorted(["alice", "bob", "carol", unmapped])
    # alice's 10 needs her own numbers for the hand part: the id is hers; bob's extra file did not replace it
    assert results[("alice", "rmsnorm")]["score"] == 10
    assert results[("bob", "rmsnorm")]["raw_score"] == 10  # his file named rmsnorm(-1).ipynb, not the extra one
    bob_report = (out / "reports" / "bob" / "rmsnorm.html").read_text()
    if kind == "canvas":  # Canvas's `_late`, under the course's late policy (nbgrader_config.py): late, 2 points off
        assert results[("bob", "rmsnorm")]["score"] == 8 and "按时提交" not in bob_report
        assert "迟交" in bob_report and "time" in grades_table(out)["bob"]["rmsnorm_flags"]
    else:
        assert results[("bob", "rmsnorm")]["score"] == 10
    assert f"settings: {lms_course.resolve() / 'nbgrader_config.py'}" in "".join(first.output.split("\n"))
    assert results[("carol", "rmsnorm")]["score"] == 10  # a name she chose
    assert results[(unmapped, "rmsnorm")]["left_out"] == "unmapped LMS id"
    assert [f["kind"] for f in results[(unmapped, "rmsnorm")]["handin"]["flags"]] == ["unmapped", "unanswered"]
    assert sorted(grades_table(out)) == ["alice", "bob", "carol"]  # the unmapped id is kept out
    assert "alice_rmsnorm.ipynb" in first.output and "is graded" in first.output  # bob's extra file, skipped
    assert "unmapped:" in first.output and unmapped in first.output
    assert unmapped in (out / "summary.html").read_text()

    again = lms_grade(lms_course, archive, roster, out.name, *layout)
    assert again.exit_code == 0, again.output
    assert "graded 0 submission(s); 4 unchanged" in again.output
    assert json.loads((out / "results.json").read_text()) == list(results.values())
    assert_the_lms_gradebook_round_trips(lms_course, kind, out)


def assert_the_lms_gradebook_round_trips(lms_course: Path, kind: str, out: Path) -> None:
    """`autograde lms-grades`: the LMS's export back with the scores, every other cell as it was (names made safe)."""
    done = RUNNER.invoke(app, ["lms-grades", "rmsnorm", "--lms-gradebook", str(lms_course / f"{kind}.csv"),
                               "--out", str(out)])
    assert done.exit_code == 0, done.output
    written = (out / "lms" / f"{kind}.csv").read_bytes()
    original = (lms_course / f"{kind}.csv").read_bytes()
    assert written.startswith(b"\xef\xbb\xbf") == original.startswith(b"\xef\xbb\xbf")
    assert_formula_safe(written.decode("utf-8-sig"))
    before = list(csv.reader(io.StringIO(original.decode("utf-8-sig"))))
    after = list(csv.reader(io.StringIO(written.decode("utf-8-sig"))))
    assert after[0] == before[0] and len(after) == len(before)
    column = before[0].index("rmsnorm (9001)" if kind == "canvas" else "Grade")
    expected = {"alice": "10", "bob": "8" if kind == "canvas" else "10", "carol": "10"}
    names = {"canvas": {"alice": "Zhang, Alice", "bob": "Li, Bob", "carol": "'=HYPERLINK(\"http://evil\")"},
             "moodle": {"alice": "Alice Zhang", "bob": "Bob Li", "carol": "'@Carol;'=1+1"}}[kind]
    name_col = 0 if kind == "canvas" else 1
    by_name = {row[name_col]: row for row in after[1:]}
    for student, score in expected.items():
        assert by_name[names[student]][column] == score, student
    for old, new in zip(before[1:], after[1:]):  # every other cell as it was (names only made safe)
        assert [spreadsheet_safe(c) if i == name_col else c for i, c in enumerate(old) if i != column] \
            == [c for i, c in enumerate(new) if i != column]
    untouched = [row for row in after[1:] if row[name_col] in ("Student, Test", "Dave Chen", "    Points Possible")]
    assert untouched and all(row == next(b for b in before if b[name_col] == row[name_col]) for row in untouched)
    assert "not on the roster, left as it was" in done.output
    assert_the_reports_go_back_to_the_lms(lms_course, kind, out, done.output)


def assert_the_reports_go_back_to_the_lms(lms_course: Path, kind: str, out: Path, output: str) -> None:
    """Moodle: the feedback-files zip, each name `<Full Name>_<participant id>_assignfeedback_file_/<file>` (what Moodle's
    "Upload multiple feedback files in a zip" reads: the participant id second after the full name; see
    autograder/intake/lms.py); Canvas: one file per student named `<name>_<user id>_<assignment>.html`. Each holds
    that student's own report."""
    if kind == "moodle":
        archive = out / "lms" / "rmsnorm-moodle-feedback.zip"
        with zipfile.ZipFile(archive) as zf:
            files = {name: zf.read(name) for name in zf.namelist()}
        expected = {"Alice Zhang_201_assignfeedback_file_/rmsnorm.html": "alice",
                    "Bob Li_202_assignfeedback_file_/rmsnorm.html": "bob",
                    "@Carol;=1+1_203_assignfeedback_file_/rmsnorm.html": "carol",
                    "Dave Chen_204_assignfeedback_file_/rmsnorm.html": "moodle:204"}
    else:
        folder = out / "lms" / "rmsnorm-canvas-feedback"
        files = {p.name: p.read_bytes() for p in folder.iterdir()}
        expected = {"ZhangAlice_101_rmsnorm.html": "alice", "LiBob_102_rmsnorm.html": "bob",
                    "HYPERLINKhttpevil_103_rmsnorm.html": "carol"}
    assert set(files) == set(expected), sorted(files)
    for name, student in expected.items():
        assert files[name] == (out / "reports" / safe_name(student) / "rmsnorm.html").read_bytes(), name
    assert "student report(s)" in output

def test_a_conflict_in_a_flat_folder_grades_neither_and_keeps_the_stored_result(tmp_path):
    flat, out = tmp_path / "flat", tmp_path / "out"
    flat.mkdir()
    shutil.copy(source_notebook("rmsnorm"), flat / "alice_rmsnorm.ipynb")
    shutil.copy(release_notebook("rmsnorm"), flat / "bob_rmsnorm.ipynb")
    args = ["grade", "rmsnorm", "--submissions", str(flat), "--out", str(out), *FAST]
    first = RUNNER.invoke(app, args)
    assert first.exit_code == 0, first.output
    # a flat folder is no course's submitted/: the reports are the feedback, and every path printed exists
    assert "feedback: the reports above are the students' feedback" in first.output
    assert (out / "reports" / "alice" / "rmsnorm.html").is_file() and (out / "reports" / "bob" / "rmsnorm.html").is_file()
    printed = [line.split(":", 1)[1].strip().split("  ")[0] for line in first.output.splitlines()
               if line.startswith(("results:", "reports:", "summary:", "gradebook:", "settings:"))]
    assert len(printed) >= 4, first.output
    for path in printed:
        assert Path(path.split("/<student>")[0]).exists(), path
    before = json.loads((out / "results.json").read_text())
    shutil.copy(release_notebook("rmsnorm"), flat / "alice-rmsnorm.ipynb")  # a second file for alice
    for _ in range(2):  # and the same again: nothing flips
        again = RUNNER.invoke(app, args)
        assert again.exit_code == 0, again.output
        assert "conflict: alice/rmsnorm not graded (its stored result is kept)" in again.output
        assert "conflict (1): alice/rmsnorm" in " ".join(again.output.split())  # the action list
        results = json.loads((out / "results.json").read_text())
        assert [{**r, "flags": []} for r in results] == [{**r, "flags": []} for r in before]  # but alice's flag
        assert {r["student"]: r["flags"] for r in results} == {"alice": ["conflict"], "bob": ["unanswered"]}
        assert grades_table(out)["alice"]["rmsnorm"] == "10"
        assert grades_table(out)["alice"]["rmsnorm_flags"] == "conflict"
        assert 'data-action="conflict"' in (out / "summary.html").read_text()
    (flat / "alice_rmsnorm.ipynb").unlink()  # resolved: the one left is graded
    resolved = RUNNER.invoke(app, args)
    assert resolved.exit_code == 0 and "conflict:" not in resolved.output and "conflict (" not in resolved.output
    assert grades_table(out)["alice"]["rmsnorm"] == "0"
    assert grades_table(out)["alice"]["rmsnorm_flags"] == "unanswered"  # the release notebook left
    (flat / "bob_rmsnorm.ipynb").unlink()  # a stored result whose notebook is gone (a partial download): kept, said
    gone = RUNNER.invoke(app, args)
    assert gone.exit_code == 0, gone.output
    assert "kept: bob/rmsnorm was not among the submissions graded last" in gone.output
    assert f"autograde forget bob rmsnorm --out {out}" in "".join(gone.output.split("\n"))  # the console wraps
    bob = next(r for r in json.loads((out / "results.json").read_text()) if r["student"] == "bob")
    assert bob["left_out"] is None and grades_table(out)["bob"]["rmsnorm"] == "0"
    # only the instructor's explicit action removes it: a dry run first, then forget
    dry = RUNNER.invoke(app, ["forget", "bob", "rmsnorm", "--out", str(out), "--dry-run"])
    assert dry.exit_code == 0 and "would remove" in dry.output and "bob" in grades_table(out), dry.output
    forgotten = RUNNER.invoke(app, ["forget", "bob", "rmsnorm", "--out", str(out)])
    assert forgotten.exit_code == 0, forgotten.output
    assert "bob" not in grades_table(out) and all(r["student"] != "bob"
                                                  for r in json.loads((out / "results.json").read_text()))
    assert not (out / "reports" / "bob" / "rmsnorm.html").exists()
    again = RUNNER.invoke(app, ["forget", "bob", "rmsnorm", "--out", str(out)])
    assert again.exit_code == 1 and "no stored result of bob/rmsnorm" in again.output
    assert "kept:" not in RUNNER.invoke(app, args).output


@pytest.mark.parametrize("kind", ["canvas", "moodle"])
def test_two_group_downloads_into_one_out_keep_every_grade(lms_course, kind):
    """Moodle group A's download, then group B's (or two Canvas sections; "download selected" is the same) into
    one OUT: group A's grades stay in grades.csv and in the LMS upload; the run says they were kept, and how to
    remove one."""
    whole = (canvas_zip if kind == "canvas" else moodle_zip)(lms_course / f"{kind}-whole.zip")
    with zipfile.ZipFile(whole) as zf:
        members = [(name, zf.read(name)) for name in zf.namelist()]
    groups = {"a": [m for m in members if "Alice" in m[0] or "alice" in m[0].split("_")[0]],
              "b": [m for m in members if not ("Alice" in m[0] or "alice" in m[0].split("_")[0])]}
    assert groups["a"] and groups["b"]
    out = lms_course / f"out-{kind}-groups"
    layout = ["--layout", "canvas"] if kind == "canvas" else []
    for group in ("a", "b"):
        archive = lms_course / f"{kind}-group-{group}.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for name, data in groups[group]:
                zf.writestr(name, data)
        done = lms_grade(lms_course, archive, f"{kind}.csv", out.name, *layout)
        assert done.exit_code == 0, done.output
    assert "kept: alice/rmsnorm was not among the submissions graded last" in done.output
    assert grades_table(out)["alice"]["rmsnorm"] == "10"
    assert {s: row["rmsnorm"] for s, row in grades_table(out).items()} \
        == {"alice": "10", "bob": "8" if kind == "canvas" else "10", "carol": "10"}  # Canvas's late bob: 2 points off
    assert_the_lms_gradebook_round_trips(lms_course, kind, out)


# --- one roster ----------------------------------------------------------------------------------------------

def test_a_submitter_not_on_the_roster_is_listed_and_nowhere_else_until_added(tmp_path):
    """Issue 23, item 8: mallory hands in but is not on the roster. She is graded into the "not on the roster" list
    (summary, run output, results.json) and nowhere else: not grades.csv, not the gradebook (nbgrader export), not
    feedback/ or autograded/, no extension, not enrolled for a second OUT on the same gradebook. Once the instructor
    adds her (`nbgrader db student add`), the next run (nothing regraded) records her everywhere. The roster is
    written through nbgrader's API (what `nbgrader db student import/add` call; each nbgrader command costs seconds)."""
    from nbgrader.api import Gradebook, MissingEntry

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(Path(__file__).parent.parent / "nbgrader_config.py", course)
    put(course, "alice", "rmsnorm", source_notebook("rmsnorm"))
    put(course, "mallory", "rmsnorm", source_notebook("rmsnorm"))
    gradebook = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(gradebook) as gb:
        for student in ("alice", "bob"):
            gb.update_or_create_student(student, first_name=student.title(), last_name="Test")

    def scores() -> dict:
        with Gradebook(gradebook) as gb:
            return {s.id: gb.find_submission("rmsnorm", s.id).score for s in gb.students
                    if any(sub.assignment.name == "rmsnorm" for sub in s.submissions)}

    first = grade(course, "rmsnorm")
    assert first.exit_code == 0, first.output
    out = course / "grading"
    said = " ".join(first.output.split())
    assert "left out of grades.csv: mallory/rmsnorm (not on the roster; `nbgrader db student add mallory` adds them" \
        in said, said
    assert sorted(grades_table(out)) == ["alice", "bob"]
    mallory = next(r for r in json.loads((out / "results.json").read_text()) if r["student"] == "mallory")
    assert mallory["left_out"] == "not on the roster" and mallory["score"] == 10
    summary = (out / "summary.html").read_text()
    assert "Not on the roster: mallory" in summary and "nbgrader db student add" in summary
    assert (out / "reports" / "mallory" / "rmsnorm.html").is_file()  # graded, her report written
    with Gradebook(gradebook) as gb:
        with pytest.raises(MissingEntry):
            gb.find_student("mallory")
    done = run_nbgrader(["export", "--to", str(course / "export.csv")], cwd=course)
    assert done.returncode == 0, done.stderr
    exported = {r["student_id"]: float(r["score"]) for r in csv.DictReader(open(course / "export.csv"))}
    assert exported == {"alice": 10, "bob": 0}, exported
    assert not (course / "feedback" / "mallory").exists() and not (course / "autograded" / "mallory").exists()
    refused = RUNNER.invoke(app, ["extension", "rmsnorm", "mallory", "--days", "2", "--course", str(course)])
    assert refused.exit_code == 2, refused.output
    assert "'mallory' is not on the course's roster" in refused.output
    assert "nbgrader db student add mallory" in refused.output
    # a second OUT on the same gradebook (its own class.json: it added no one) takes alice and bob for the roster
    shutil.copytree(out, course / "grading-2")
    (course / "grading-2" / "class.json").unlink()
    second = RUNNER.invoke(app, ["report", "--out", str(course / "grading-2"), "--course", str(course)])
    assert second.exit_code == 0, second.output
    assert sorted(grades_table(course / "grading-2")) == ["alice", "bob"]
    assert not (course / "feedback" / "mallory").exists()  # nor does `report --course` write her feedback

    with Gradebook(gradebook) as gb:  # `nbgrader db student add mallory --first-name=Mallory --last-name=Test`
        gb.update_or_create_student("mallory", first_name="Mallory", last_name="Test")
    again = grade(course, "rmsnorm")
    assert again.exit_code == 0, again.output
    assert "graded 0 submission(s); 2 unchanged" in again.output and "not on the roster" not in again.output
    assert grades_table(out)["mallory"]["rmsnorm"] == "10"
    assert next(r for r in json.loads((out / "results.json").read_text())
                if r["student"] == "mallory")["left_out"] is None
    assert scores() == {"alice": 10, "mallory": 10}
    assert (course / "feedback" / "mallory" / "rmsnorm" / "rmsnorm.html").is_file()
    assert (course / "autograded" / "mallory" / "rmsnorm" / "rmsnorm.ipynb").is_file()
    assert "Not on the roster" not in (out / "summary.html").read_text()
    granted = RUNNER.invoke(app, ["extension", "rmsnorm", "mallory", "--days", "2", "--course", str(course)])
    assert granted.exit_code == 0 and "mallory: rmsnorm extended by 2 days" in granted.output, granted.output
