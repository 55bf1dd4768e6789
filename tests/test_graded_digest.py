"""A notebook replaced while its class is graded: the result is kept under the bytes that were graded.

`autograde grade` reads every notebook when it decides what to grade (the regrade cache compares its digest), and
a worker reads it again, later, to grade it. A hand-in collected in between (`nbgrader collect --update` from a
second terminal, a cron job) makes the two differ. Before, the result file kept the first digest with the grade of
the second notebook: once the first notebook came back (a student handing in again the very notebook they had
handed in first), the next run found it "unchanged" and kept the other notebook's grade. Now the result keeps the
digest of what was graded, and no cache key when that is not what the run had read: the next run grades it again.
"""

import hashlib
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

import autograder.class_run as class_run
from autograder.cli import app
from autograder.examples import notebook_with_edits
from autograder.results import SubmissionResult
from conftest import REPO_ROOT, source_notebook

pytestmark = pytest.mark.slow

RUNNER = CliRunner()
FAST = ["--cell-timeout", "8", "--probe-timeout", "8", "--workers", "1"]
RMS_RETURN = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"


def course_with(root: Path, notebook: bytes) -> Path:
    root.mkdir(parents=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    folder = root / "submitted" / "alice" / "rmsnorm"
    folder.mkdir(parents=True)
    (folder / "rmsnorm.ipynb").write_bytes(notebook)
    (folder / "timestamp.txt").write_text("2026-11-30 10:00:00.000000 UTC")
    return root


def grade(course: Path) -> str:
    done = RUNNER.invoke(app, ["grade", "rmsnorm", "--submissions", str(course / "submitted"),
                               "--out", str(course / "out"), *FAST])
    assert done.exit_code == 0, done.output
    return done.output


def stored(course: Path) -> dict:
    return json.loads((course / "out" / "results" / "alice" / "rmsnorm.json").read_text())


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


RIGHT = source_notebook("rmsnorm").read_bytes()
WRONG = nbformat.writes(notebook_with_edits("rmsnorm", [(RMS_RETURN, "return x")])).encode()


@pytest.mark.parametrize("meanwhile", ["replaced", "gone"])
def test_a_notebook_replaced_between_deciding_and_grading_is_graded_again_next_run(tmp_path, monkeypatch, meanwhile):
    course = course_with(tmp_path / "course", RIGHT)
    notebook = course / "submitted" / "alice" / "rmsnorm" / "rmsnorm.ipynb"
    read_facts = class_run.read_facts

    def swap_then_read_facts(run):  # after `decide` read the notebook, before the worker reads it
        if meanwhile == "replaced":
            notebook.write_bytes(WRONG)
        else:
            notebook.unlink()
        read_facts(run)

    monkeypatch.setattr(class_run, "read_facts", swap_then_read_facts)
    grade(course)
    first = stored(course)
    if meanwhile == "replaced":
        assert first["score"] < 10 and first["graded_sha256"] == sha(WRONG)
        assert first["notebook_sha256"] == sha(WRONG)  # what was graded, not what `decide` read
    else:
        assert first["status"] == "error" and first["graded_sha256"] == "" and first["notebook_sha256"] is None
    assert first["cache_key"] is None  # graded under other bytes than the run had decided on: not cached

    monkeypatch.setattr(class_run, "read_facts", read_facts)
    notebook.write_bytes(RIGHT)  # the first hand-in is back: its own grade, not the other's
    output = grade(course)
    assert "graded 1 submission(s); 0 unchanged" in " ".join(output.split()), output
    second = stored(course)
    assert second["score"] == 10 and second["graded_sha256"] == second["notebook_sha256"] == sha(RIGHT)
    assert second["cache_key"] is not None
    assert (course / "autograded" / "alice" / "rmsnorm" / "rmsnorm.ipynb").read_bytes() == RIGHT

    output = grade(course)  # and graded under the bytes the run read, it is cached again
    assert "graded 0 submission(s); 1 unchanged" in " ".join(output.split()), output
    assert stored(course) == second


@pytest.mark.parametrize("meanwhile", ["replaced", "cut"])
def test_the_autograded_notebook_is_only_ever_the_bytes_that_were_graded(tmp_path, monkeypatch, meanwhile):
    """formgrader's copy (autograded/) shows the written answers beside our scores: it is the notebook as graded,
    never a file that changed between grading and recording. Replaced then by another student's work (a valid
    notebook) or cut short, the submission gets no copy; with the graded notebook back, the kept result writes it."""
    course = course_with(tmp_path / "course", RIGHT)
    notebook = course / "submitted" / "alice" / "rmsnorm" / "rmsnorm.ipynb"
    copy = course / "autograded" / "alice" / "rmsnorm" / "rmsnorm.ipynb"
    write_files = class_run.write_files

    def change_then_write(run, result, rendered):
        notebook.write_bytes(WRONG if meanwhile == "replaced" else RIGHT[: len(RIGHT) // 2])
        write_files(run, result, rendered)

    monkeypatch.setattr(class_run, "write_files", change_then_write)
    grade(course)
    assert stored(course)["score"] == 10 and stored(course)["cache_key"] is not None  # graded as the run read it
    assert not copy.exists()

    monkeypatch.setattr(class_run, "write_files", write_files)
    notebook.write_bytes(RIGHT)  # the graded notebook handed in again: kept, and its copy written now
    output = grade(course)
    assert "graded 0 submission(s); 1 unchanged" in " ".join(output.split()), output
    assert copy.read_bytes() == RIGHT


def test_an_error_of_the_engine_s_own_is_not_cached(tmp_path, monkeypatch):
    """An exception of ours escaping the engine (a bug, or the grading process's memory limit reached while reading a
    notebook made to exhaust it: millions of empty objects) is that submission's error, and the next run grades it
    again: the result does not say which bytes it graded, so it is never kept as "unchanged"."""
    from autograder import engine
    from autograder.run import RunOptions, run_grading

    course = course_with(tmp_path / "course", RIGHT)
    prepare = engine.prepare

    def exhausted(*args, **kwargs):
        raise MemoryError()

    def graded():
        return run_grading(RunOptions(assignments=["rmsnorm"], submissions=course / "submitted", out=course / "out",
                                      workers=1, in_process=True))

    monkeypatch.setattr(engine, "prepare", exhausted)
    graded()
    first = stored(course)
    assert first["status"] == "error" and first["message"].startswith("读取这个笔记本文件时，评分进程的内存超出了限制"), \
        first["message"]  # what was established: the limit reached while reading, not "your code's data"
    assert first["graded_sha256"] is None and first["cache_key"] is None
    monkeypatch.setattr(engine, "prepare", prepare)
    second = graded()
    assert second.skipped == 0 and stored(course)["score"] == 10 and stored(course)["cache_key"] is not None


def test_the_run_reads_each_notebook_once_to_decide(tmp_path, monkeypatch):
    """`decide` takes a notebook's facts (nothing answered, another assignment's) and its digest from one read: two
    reads could see two files (a hand-in collected in between), the flag of one beside the grade of the other."""
    from autograder.intake import reading

    course = course_with(tmp_path / "course", RIGHT)
    load, reads = reading.load_notebook_bytes, []

    def counted(path):
        reads.append(Path(path).name)
        return load(path)

    monkeypatch.setattr(reading, "load_notebook_bytes", counted)  # in this process: the workers read on their own
    grade(course)
    assert reads == ["rmsnorm.ipynb"]
    assert stored(course)["score"] == 10 and stored(course)["cache_key"] is not None


def test_what_a_result_says_it_graded_is_a_digest_or_nothing():
    base = {"student_id": "alice", "assignment_id": "rmsnorm", "status": "graded", "score": 1.0, "max_score": 10.0}
    assert SubmissionResult.from_dict({**base, "graded_sha256": sha(b"x")}).graded_sha256 == sha(b"x")
    assert SubmissionResult.from_dict({**base, "graded_sha256": ""}).graded_sha256 == ""
    assert SubmissionResult.from_dict(base).graded_sha256 is None  # a result stored before it was kept
    for odd in ("../etc", sha(b"x").upper(), sha(b"x") + "0", 7, ["a"], {"a": 1}):
        assert SubmissionResult.from_dict({**base, "graded_sha256": odd}).graded_sha256 is None


def test_a_notebook_larger_than_grading_reads_is_not_read_to_be_digested(tmp_path):
    """`decide` digests every notebook: one past the limit the engine reads (a file of many gigabytes left in
    submitted/) is not read through for that; it has no digest, so it is never cached, and each run refuses it again
    at once, as the engine refuses it unread."""
    course = course_with(tmp_path / "course", RIGHT)
    with open(course / "submitted" / "alice" / "rmsnorm" / "rmsnorm.ipynb", "ab") as f:
        f.truncate(100 * 1024**3)  # sparse: past the limit by far, nothing on disk
    for _ in range(2):
        output = grade(course)
        assert "graded 1 submission(s); 0 unchanged" in " ".join(output.split()), output
        assert "笔记本太大" in stored(course)["message"] and stored(course)["cache_key"] is None
