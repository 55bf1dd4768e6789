"""Local workers kept warm between runs (Executor.keep_warm: the service's, whose batches are a few attempts each):
the next run's jobs go to the same worker process, graded exactly as by a fresh one; a worker is retired after its
share of jobs; one that died while it waited costs nothing."""

import os
import signal

from autograder.engine import GradingOptions, Submission
from autograder.jobs.executors import Executor, run_submissions
from grading_helpers import TEST_LIMITS, edited_notebook
from hostile.corpus import RETURN_LINE

OPTIONS = GradingOptions(limits=TEST_LIMITS)


def submissions(tmp_path):
    honest = edited_notebook("rmsnorm", [], tmp_path / "honest" / "rmsnorm.ipynb")
    wrong = edited_notebook("rmsnorm", [(RETURN_LINE, "return x")], tmp_path / "wrong" / "rmsnorm.ipynb")
    return [Submission(honest, "rmsnorm", "alice"), Submission(wrong, "rmsnorm", "bob")]


def graded(subs, executor, assignment_ids=None):
    results = []
    run_submissions(subs, OPTIONS, results.append, executor, assignment_ids=assignment_ids)
    return sorted((r.student_id, r.identity()) for r in results)


def kept(executor):
    return [worker for _, worker in executor.prestarted]


def retire(executor):
    for _, worker in executor.prestarted:
        worker.process.kill()
        worker.close()
    executor.prestarted.clear()


def test_a_kept_worker_grades_the_next_run_as_a_fresh_one_does_and_is_retired_after_its_share(tmp_path):
    subs = submissions(tmp_path)
    fresh = graded(subs, Executor("local", workers=1))
    assert fresh[0][1] != fresh[1][1]  # the wrong one is graded otherwise
    warm = Executor("local", workers=1, keep_warm=5)
    try:
        assert graded(subs, warm, ["rmsnorm", "swiglu"]) == fresh
        (worker,) = kept(warm)
        assert worker.process.poll() is None and worker.results_seen == 2
        assert graded(subs, warm, ["rmsnorm", "swiglu"]) == fresh  # the same process: 4 jobs now
        assert kept(warm) == [worker] and worker.results_seen == 4
        assert graded(subs, warm, ["rmsnorm", "swiglu"]) == fresh  # 6 > 5: retired at the end of this run
        assert kept(warm) == []
        worker.process.wait(timeout=30)
    finally:
        retire(warm)


def test_a_kept_worker_that_died_while_it_waited_costs_no_result(tmp_path):
    subs = submissions(tmp_path)
    warm = Executor("local", workers=1, keep_warm=100)
    try:
        first = graded(subs, warm)
        (worker,) = kept(warm)
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        assert graded(subs, warm) == first  # its jobs went to a fresh worker, which is kept in its place
        (replacement,) = kept(warm)
        assert replacement is not worker and replacement.process.poll() is None
    finally:
        retire(warm)


def test_without_keep_warm_a_runs_workers_end_with_it(tmp_path):
    executor = Executor("local", workers=1)
    graded(submissions(tmp_path), executor)
    assert executor.prestarted == []
