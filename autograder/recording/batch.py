"""Results recorded in batches: many results' gradebook writes in one transaction, then each result's files.

A grading run hands each result to `BatchRecorder.add` as it arrives. Its gradebook writes are staged in the
open transaction; every `EVERY` results, or when the oldest staged result has waited `SECONDS` (checked as
results arrive and on the executor's heartbeat), and at the end, the transaction commits and only then are the
results' files written, each result file last (it marks the submission done). A kill -9 at any moment loses
nothing and duplicates nothing: what has no result file is graded again and written again (the gradebook writes
are idempotent), whether its transaction had committed or not.

A result whose preparation, gradebook writes or files fail is that submission's failure, never the batch's: its
writes are undone (the transaction is rolled back and the others' staged again) and its failure is recorded in
its place; a failure that cannot be recorded either is reported.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

EVERY = 100  # results per transaction at most
SECONDS = 1.0  # how long a staged result waits for its transaction at most (while results or heartbeats come)


@dataclass
class Pending:
    """A result on its way: `stage` writes it into the gradebook (again after a rollback), `files` writes its
    files after the commit; `failure` says whether it is already the failure of a result that could not be
    recorded (so its own failure is reported, not recorded)."""

    key: object  # what it records (the run's: the SubmissionResult)
    stage: Callable[[], None]
    files: Callable[[], None] | None = None
    failure: bool = False


class BatchRecorder:
    def __init__(self, commit: Callable[[], None], rollback: Callable[[], None],
                 failed: Callable[[Pending, Exception], Pending], report: Callable[[Pending, Exception], None],
                 every: int | None = None, seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        """`failed(pending, exc)`: what to record instead of a result whose recording failed; `report(pending,
        exc)`: a failure that could not be recorded either; `every`, `seconds`: EVERY and SECONDS."""
        self.commit, self.rollback, self.failed, self.report = commit, rollback, failed, report
        self.every, self.seconds = every or EVERY, seconds if seconds is not None else SECONDS
        self.clock = clock
        self.pending: list[Pending] = []
        self.oldest: float | None = None
        self.transactions = 0

    def add(self, pending: Pending) -> None:
        """Stage `pending` now; commit and write the batch's files when it is due."""
        self._stage(pending)
        self.heartbeat()

    def stage_only(self, key: object, stage: Callable[[], None]) -> None:
        """Gradebook writes without files (a stored result written again) in the batch's transaction. A failure is
        raised, as before batching (the others are staged again first): nothing marks such a write done."""
        try:
            stage()
        except Exception:
            self._undo()
            raise
        self._staged(Pending(key, stage))

    def heartbeat(self) -> None:
        """Commit when the batch is due: full, or its oldest result has waited long enough."""
        if self.pending and (len(self.pending) >= self.every or self.clock() - self.oldest >= self.seconds):
            self.flush()

    def flush(self) -> None:
        """Commit the staged writes, then write each result's files in arrival order."""
        while self.pending:
            self.commit()
            self.transactions += 1
            done, self.pending, self.oldest = self.pending, [], None
            for pending in done:
                if pending.files is None:
                    continue
                try:
                    pending.files()
                except Exception as exc:  # its scores are in: its failure replaces them, in the next transaction
                    self._record_failure(pending, exc)

    def interrupted(self) -> None:
        """After an interruption (Ctrl-C) that may have cut a staging short: the open transaction rolled back, what
        was staged whole staged again, committed, and its files written; a result cut short is graded again."""
        self._undo()
        self.flush()

    def _staged(self, pending: Pending) -> None:
        self.pending.append(pending)
        if self.oldest is None:
            self.oldest = self.clock()

    def _stage(self, pending: Pending) -> None:
        try:
            pending.stage()
        except Exception as exc:
            self._undo()
            self._record_failure(pending, exc)
            return
        self._staged(pending)

    def _undo(self) -> None:
        """Roll back the open transaction and stage again what it held (a staging repeats itself exactly); one that
        no longer stages is its own failure."""
        failures = []
        while True:
            self.rollback()
            staged, self.pending = self.pending, []
            for i, other in enumerate(staged):
                try:
                    other.stage()
                except Exception as exc:
                    failures.append((other, exc))
                    self.pending = staged[:i] + staged[i + 1:]
                    break
                self.pending.append(other)
            else:
                break
        if not self.pending:
            self.oldest = None
        for other, exc in failures:
            self._record_failure(other, exc)

    def _record_failure(self, pending: Pending, exc: Exception) -> None:
        if pending.failure or pending.files is None:
            self.report(pending, exc)
            return
        replacement = self.failed(pending, exc)
        replacement.failure = True
        self._stage(replacement)
