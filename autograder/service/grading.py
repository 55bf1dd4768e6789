"""The service's grading: a thread that takes the queued attempts, oldest first, and grades them with the same
engine, sandbox and workers as `autograde grade` (autograder.jobs.executors: local worker processes, or a Dask
cluster), each attempt with its own practice secret (Submission.secret; autograder.service.practice).

While the queue is empty the local workers are started already (executors.prestart): each has imported torch and
launched its warm sandbox parent before the next attempt arrives. An attempt our side could not grade (a worker
that died twice, a check that raised on the reference too, an executor that cannot run) is given back: state
`refunded`, not counted against the budget, with a message saying so.
"""

import logging
import os
import re
import shutil
import tempfile
import threading
import traceback
from pathlib import Path

from autograder.assignments import assignment_ids
from autograder.jobs.executors import Executor, ExecutorError, prestart, run_submissions
from autograder.engine import GRADER_ERROR
from autograder.results import STATUS_ERROR, SubmissionResult
from autograder.running.jobs import GradingOptions, Submission
from autograder.service.feedback import practice_view
from autograder.service.settings import ServiceSettings
from autograder.service.store import GRADED, REFUNDED, Attempt, Store

log = logging.getLogger("autograde.service")

BATCH_PREFIX = "autograde-service-"  # + the service's pid + "-": the folder a batch's notebooks are written to


def batch_folder_prefix() -> str:
    return f"{BATCH_PREFIX}{os.getpid()}-"


def remove_stale_batch_folders(root: Path | None = None) -> list[Path]:
    """The batch folders a service left when it was killed (SIGKILL: its `finally` never ran), with the students'
    notebooks in them: removed when the next service starts. Only this user's, and only a dead process's."""
    removed = []
    root = Path(root or tempfile.gettempdir())
    for folder in root.glob(BATCH_PREFIX + "*"):
        found = re.fullmatch(re.escape(BATCH_PREFIX) + r"(\d+)-.+", folder.name)
        try:
            if not found or folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.geteuid():
                continue
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:  # its service is gone
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        except (OSError, OverflowError):  # alive under another user (PermissionError), or not a pid at all
            continue
    return removed


OURS = ("这次练习没能评分，原因在评分服务这边（不是你的代码）：这次不计入次数，请稍后再提交一次。")


def _ours(result: SubmissionResult) -> bool:
    """Not graded for a reason of ours: a worker that died, a check of ours that raised on the reference too, or our
    own code that raised while grading (the engine's GRADER_ERROR result)."""
    return (result.infrastructure_error or any(c.check_bug for p in result.parts for c in p.checks)
            or (result.status == STATUS_ERROR and result.message.startswith(GRADER_ERROR)))


class GradingLoop:
    def __init__(self, store: Store, settings: ServiceSettings, options: GradingOptions, executor: Executor,
                 batch: int | None = None):
        self.store, self.settings, self.options, self.executor = store, settings, options, executor
        self.batch = batch or max(1, 2 * executor.workers)
        self.ids = list(assignment_ids(options.root))
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="autograde-service-grading", daemon=True)
        self.graded = 0

    def start(self) -> None:
        self.store.requeue_interrupted()
        for folder in remove_stale_batch_folders():
            log.warning("removed %s, left by a service that was killed while grading", folder)
        self.thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float = 30) -> None:
        self._stop.set()
        self._wake.set()
        self.thread.join(timeout)
        for _, worker in self.executor.prestarted:  # warm, waiting for work that will not come
            worker.process.kill()
            worker.close()
        self.executor.prestarted.clear()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                prestart(self.executor, self.options, self.ids, self.executor.workers)
                batch = self.store.claim(self.batch)
                if not batch:
                    self._wake.wait(1.0)
                    self._wake.clear()
                    continue
                self.grade(batch)
            except Exception:  # the loop goes on: a failure is the batch's, said in the log
                log.error("grading loop: %s", traceback.format_exc())
                self._stop.wait(1.0)

    def grade(self, batch: list[Attempt]) -> None:
        with tempfile.TemporaryDirectory(prefix=batch_folder_prefix()) as tmp:
            by_path, submissions = {}, []
            for attempt in batch:
                path = Path(tmp) / attempt.id / f"{attempt.assignment}.ipynb"
                path.parent.mkdir()
                path.write_bytes(attempt.notebook)
                by_path[str(path)] = attempt
                submissions.append(Submission(path, attempt.assignment, attempt.user, secret=attempt.secret.encode()))
            done = set()

            def on_result(result: SubmissionResult, rendered=None) -> None:
                attempt = by_path.get(result.notebook)
                if attempt is None or attempt.id in done:
                    log.error("a result for no attempt of this batch: %s", result.notebook)
                    return
                done.add(attempt.id)
                self.record(attempt, result)

            try:
                # the workers load every assignment: those prestarted (and kept warm) take any batch
                run_submissions(submissions, self.options, on_result, self.executor, assignment_ids=self.ids)
            except ExecutorError as exc:
                log.error("grading failed: %s", exc)
            finally:
                for attempt in batch:  # whatever was not graded is given back, whatever stopped the grading
                    if attempt.id not in done:
                        try:
                            self.store.finish(attempt.id, REFUNDED, None, None, {"level": attempt.feedback,
                                                                                "status": "error", "message": OURS},
                                              None, OURS)
                        except Exception:  # the store itself fails: the next start queues it again
                            log.error("giving back %s: %s", attempt.id, traceback.format_exc())

    def record(self, attempt: Attempt, result: SubmissionResult) -> None:
        policy = self.settings.policy(attempt.assignment)
        result.notebook = attempt.filename
        try:
            view = practice_view(result, attempt.feedback, policy.hand_verdict)
        except Exception:
            log.error("practice view of %s: %s", attempt.id, traceback.format_exc())
            view, ours = {"level": attempt.feedback, "status": "error", "message": OURS}, True
        else:
            ours = _ours(result)
        if ours:
            view["message"] = OURS
        self.store.finish(attempt.id, REFUNDED if ours else GRADED, view.get("score"), view.get("max_score"),
                          view, result.to_dict(), OURS if ours else "")
        self.graded += 1
