"""Speed without changing a score: worker processes and Dask grade exactly as one process does, and the
regrade cache skips only what is unchanged."""

import json
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.engine import GradingOptions, Submission
from autograder.examples import mistakes, notebook_with_edits
from autograder.jobs.executors import Executor, run_submissions
from autograder.run import GradingRunError, RunOptions, run_grading
from conftest import release_notebook
from grading_helpers import TEST_LIMITS

pytestmark = pytest.mark.slow


def small_class(folder: Path) -> list[Submission]:
    """Correct, wrong (two catalogued mistakes), unanswered and corrupt work on two assignments."""
    work = {
        ("ana", "rmsnorm"): notebook_with_edits("rmsnorm", []),
        ("ben", "rmsnorm"): notebook_with_edits("rmsnorm", mistakes("rmsnorm")[0].edits),
        ("cai", "rmsnorm"): nbformat.read(release_notebook("rmsnorm"), as_version=4),
        ("ana", "swiglu"): notebook_with_edits("swiglu", mistakes("swiglu")[1].edits),
        ("ben", "swiglu"): notebook_with_edits("swiglu", []),
    }
    submissions = []
    for (student, assignment), nb in work.items():
        path = folder / student / assignment / f"{assignment}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
        submissions.append(Submission(path, assignment, student))
    corrupt = folder / "dan" / "rmsnorm" / "rmsnorm.ipynb"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_text('{"cells": [')
    submissions.append(Submission(corrupt, "rmsnorm", "dan"))
    return submissions


def graded(submissions, executor: Executor, events: list | None = None) -> dict:
    """Each result by (student, assignment); `events`: "started" (the run's on_started) and "result", in order."""
    results = []

    def take(result):
        results.append(result)
        if events is not None:
            events.append("result")

    run_submissions(submissions, GradingOptions(limits=TEST_LIMITS, secret=b"scale-test"), take, executor,
                    on_started=None if events is None else lambda: events.append("started"))
    assert len(results) == len(submissions)
    return {(r.student_id, r.assignment_id): json.dumps(r.identity(), sort_keys=True) for r in results}


def test_worker_processes_and_dask_grade_exactly_as_one_process(tmp_path):
    submissions = small_class(tmp_path)
    alone = graded(submissions, Executor("local", workers=1, in_process=True))
    scores = {key: json.loads(value)["score"] for key, value in alone.items()}
    assert scores[("ana", "rmsnorm")] == 10 and scores[("cai", "rmsnorm")] == 0  # the class is what it says
    assert 0 < scores[("ben", "rmsnorm")] < 10 and json.loads(alone[("dan", "rmsnorm")])["status"] == "error"

    workers, events = Executor("local", workers=2), []
    assert graded(submissions, workers, events) == alone
    # the run's own warm-up (autograder.recording.rendered.warm_up_exports) is called once, before any result
    assert events[0] == "started" and events.count("started") == 1 and events.count("result") == len(submissions)
    assert len(workers.usage) == 2 and all(u["worker_maxrss_kib"] > 0 for u in workers.usage)
    # each worker froze what it imported (torch, pytest): pytest's collections at the session's end skip it
    assert all(u["frozen_objects"] > 100_000 for u in workers.usage), workers.usage

    dask = Executor("dask", workers=2)  # a LocalCluster with two worker processes
    assert graded(submissions, dask) == alone
    assert len({u["pid"] for u in dask.usage}) >= 1
    # Dask's worker processes grade under the same memory limit as the local ones (RLIMIT_DATA)
    assert dask.usage and all(u["memory_limit_bytes"] == dask.memory_bytes for u in dask.usage), dask.usage


def test_the_cache_skips_unchanged_work_and_regrades_changes(tmp_path):
    submitted = tmp_path / "submitted"
    small_class(submitted)
    out = tmp_path / "out"

    def run(**kw):
        kw = {"cell_timeout": 8, "probe_timeout": 8, **kw}
        return run_grading(RunOptions(assignments=["rmsnorm"], submissions=submitted, out=out,
                                      gradebook=tmp_path / "gradebook.db", **kw))

    first = run()
    assert (first.graded_now, first.skipped) == (4, 0)
    again = run()
    assert (again.graded_now, again.skipped) == (0, 4)
    assert [r.identity() for r in again.results] == [r.identity() for r in first.results]

    # a changed notebook is graded again; so is the same notebook under another student id
    ben = submitted / "ben" / "rmsnorm" / "rmsnorm.ipynb"
    nbformat.write(notebook_with_edits("rmsnorm", []), ben)
    shutil.copytree(submitted / "ana", submitted / "eve")
    changed = run()
    assert (changed.graded_now, changed.skipped) == (2, 3)
    by_student = {r.student_id: r for r in changed.results}
    assert by_student["ben"].score == 10 and by_student["eve"].score == 10
    assert by_student["eve"].seed != by_student["ana"].seed  # graded on eve's own inputs, not ana's result

    # other limits are another grading (accepted: OUT/settings.json holds the old): everything again; --force
    # regrades what is unchanged
    with pytest.raises(GradingRunError, match="limits.cell_timeout: 8 \\(stored\\) -> 9 \\(this run\\)"):
        run(cell_timeout=9)
    assert run(cell_timeout=9, accept_new_settings=True).graded_now == 5
    assert run(cell_timeout=9).graded_now == 0
    assert run(cell_timeout=9, force=True).graded_now == 5


def test_a_new_gradebook_is_stamped_with_nbgrader_s_own_migration_head(tmp_path):
    """The gradebook is created without nbgrader's `alembic heads` subprocess, and nbgrader accepts it as current."""
    import sqlite3
    import subprocess
    import sys

    from nbgrader.dbutil import _temp_alembic_ini

    from autograder.recording.gradebook import CourseGradebook

    with CourseGradebook(tmp_path / "gradebook.db"):
        pass
    stamped = sqlite3.connect(tmp_path / "gradebook.db").execute("select version_num from alembic_version").fetchall()
    with _temp_alembic_ini(f"sqlite:///{tmp_path / 'gradebook.db'}") as ini:
        heads = subprocess.run([str(Path(sys.executable).parent / "alembic"), "-c", ini, "heads"], capture_output=True,
                               text=True, check=True).stdout
    assert stamped == [(heads.split()[0],)]


def test_a_worker_that_cannot_start_is_a_clear_error_not_a_retry_loop(tmp_path, monkeypatch):
    import sys

    from autograder.jobs import executors

    monkeypatch.setattr(executors, "WORKER_COMMAND", [sys.executable, "-c", "import sys; sys.exit('no torch here')"])
    submissions = small_class(tmp_path)
    with pytest.raises(executors.ExecutorError, match="no torch here"):
        run_submissions(submissions, GradingOptions(limits=TEST_LIMITS, secret=b"s"), lambda r: None,
                        Executor("local", workers=2))


def test_the_gradebook_is_written_in_fewer_transactions_than_results(tmp_path, monkeypatch):
    """Many results' gradebook writes commit together (autograder.recording.batch), each result file after its
    transaction: the same gradebook as one transaction per result would leave."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autograder.recording import batch
    from autograder.recording.gradebook import CourseGradebook

    submitted = tmp_path / "submitted"
    submissions = small_class(submitted)
    monkeypatch.setattr(batch, "SECONDS", 600.0)  # however slowly the results come: by count only
    monkeypatch.setattr(batch, "EVERY", 4)
    with CourseGradebook(tmp_path / "gradebook.db"):
        pass  # a new gradebook's own commits (its tables, nbgrader's migration stamp) are not counted
    wrote, commits = set(), []  # connections that wrote since they last committed; the commits that wrote

    def executed(connection, cursor, statement, *args):
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            wrote.add(connection)

    def committed(connection):
        if connection in wrote:
            wrote.discard(connection)
            commits.append(connection)

    event.listen(Engine, "after_cursor_execute", executed)
    event.listen(Engine, "commit", committed)
    try:
        summary = run_grading(RunOptions(assignments=["rmsnorm", "swiglu"], submissions=submitted,
                                         out=tmp_path / "out", gradebook=tmp_path / "gradebook.db",
                                         cell_timeout=8, probe_timeout=8))
    finally:
        event.remove(Engine, "after_cursor_execute", executed)
        event.remove(Engine, "commit", committed)
    assert summary.graded_now == len(submissions) == 6 and not summary.record_failures
    assert len(commits) == 2, len(commits)  # 6 results: a batch of 4, then a batch of 2 (one each before: 6)
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        for result in summary.results:  # every result's auto scores are in
            submission = gb.gb.find_submission(result.assignment_id, result.student_id)
            auto = {g.name: g.auto_score for nb in submission.notebooks for g in nb.grades}
            assert {p.grade_id: auto[p.grade_id] for p in result.parts} == {p.grade_id: p.auto_score for p in result.parts}


@pytest.mark.parametrize("executor", ["local", "dask"])
def test_worker_processes_render_the_files_and_the_run_only_writes_them(tmp_path, monkeypatch, executor):
    """With worker processes (local or Dask's), reports and result files are rendered where the result was graded:
    this process renders none (here it cannot) and writes theirs, the same files as a run that grades here."""
    from autograder.reporting import student_page

    submitted = tmp_path / "submitted"
    small_class(submitted)

    def run(out, workers, executor="local"):
        return run_grading(RunOptions(assignments=["rmsnorm", "swiglu"], submissions=submitted, out=out,
                                      gradebook=tmp_path / f"{out.name}.db", workers=workers, executor=executor,
                                      cell_timeout=8, probe_timeout=8))

    here = run(tmp_path / "here", 1)
    with monkeypatch.context() as patched:
        patched.setattr(student_page, "render_report", lambda result: pytest.fail("rendered in this process"))
        there = run(tmp_path / "there", 2, executor)
    assert there.graded_now == here.graded_now == 6 and not there.record_failures
    assert not any(r.infrastructure_error for r in there.results)
    for result in there.results:
        name = f"{result.student_id}/{result.assignment_id}"
        assert (tmp_path / "there" / "reports" / f"{name}.html").read_text() == \
            (tmp_path / "here" / "reports" / f"{name}.html").read_text()
    assert [r.identity() for r in there.results] == [r.identity() for r in here.results]


def test_a_result_that_cannot_be_recorded_is_its_own_failure_in_a_batch_of_others(tmp_path, monkeypatch):
    """One result's gradebook writes fail in the middle of a batch, another's report cannot be written after the
    commit: each is recorded as its own error of ours (graded again next run), the others of the batch as usual."""
    from autograder import class_run as run_module
    from autograder.recording import batch
    from autograder.recording.gradebook import CourseGradebook

    submitted = tmp_path / "submitted"
    small_class(submitted)
    monkeypatch.setattr(batch, "SECONDS", 600.0)  # one batch for all six
    record, write_report = CourseGradebook.record, run_module.write_report

    def record_failing(self, result, assignment):
        if (result.student_id, result.assignment_id) == ("ana", "swiglu") and not result.infrastructure_error:
            raise RuntimeError("the gradebook refused it")
        return record(self, result, assignment)

    def report_failing(out, result, html=None):
        if (result.student_id, result.assignment_id) == ("ben", "rmsnorm") and not result.infrastructure_error:
            raise OSError("disk full")
        return write_report(out, result, html)

    monkeypatch.setattr(CourseGradebook, "record", record_failing)
    monkeypatch.setattr(run_module, "write_report", report_failing)
    summary = run_grading(RunOptions(assignments=["rmsnorm", "swiglu"], submissions=submitted, out=tmp_path / "out",
                                     gradebook=tmp_path / "gradebook.db", cell_timeout=8, probe_timeout=8))
    assert not summary.record_failures
    by_key = {(r.student_id, r.assignment_id): r for r in summary.results}
    assert len(by_key) == 6
    for key, result in by_key.items():
        failed = key in (("ana", "swiglu"), ("ben", "rmsnorm"))
        assert result.infrastructure_error == failed, key
        assert ("recording failed" in result.message) == failed, key
    assert by_key[("ana", "rmsnorm")].score == 10 and by_key[("ben", "swiglu")].score == by_key[("ben", "swiglu")].max_score
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        for (student, assignment), result in by_key.items():
            assert sum(v or 0 for v in gb.scores(assignment, student).values()) == result.score, (student, assignment)
