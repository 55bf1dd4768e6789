"""Where the grading happens: in this process, in worker processes on this machine, or on a Dask cluster.

    run_submissions(submissions, options, on_result, Executor("local", workers=2))
    run_submissions(submissions, options, on_result, Executor("dask", workers=4))                # a LocalCluster
    run_submissions(submissions, options, on_result, Executor("dask", scheduler="tcp://host:8786"))

Local grading happens in worker processes, each with a memory limit of its own (`Executor.memory_bytes`), one worker
included: only tests and the Python API may ask to grade in this process (`Executor.in_process`).

Every executor runs the same function on each submission (autograder.jobs.worker over
engine.grade_batch), so the results are identical; `on_result` is called in this process, one
result at a time, in the order they finish (the caller records them durably): `on_result(result)`, or
`on_result(result, rendered)` for a submission that carries its recording facts (autograder.recording.rendered:
the worker finished the result and rendered its files; not when that failed there), and `heartbeat`, if given, at
least every HEARTBEAT seconds while local workers grade (with Dask: as each task ends) so that the caller can
commit what it holds.
"""

import json
import math
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

from autograder.results import SubmissionResult
from autograder.intake.validate import sanitize_record
from autograder.recording.rendered import finished

if TYPE_CHECKING:  # the engine (torch) is imported where grading happens, not by whoever only plans it
    from autograder.engine import Grader, GradingOptions, Submission

WORKER_COMMAND = [sys.executable, "-m", "autograder.jobs.worker"]  # + JOBS_FD RESULTS_FD
# one thread per worker for torch's own work in the checks: the workers already use every core, and idle
# OpenMP threads spinning next to another worker's cost more than they give (as Dask's workers do by default)
WORKER_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
IN_FLIGHT = 2  # jobs queued per local worker: the next is ready while this process records the last
MAX_ATTEMPTS = 2  # a submission whose worker process died under it is tried once more, alone, on a fresh worker
HEARTBEAT = 0.25  # seconds between heartbeats while waiting for local workers
# A local worker holding a job that says nothing for longer than a submission can take (its budget, two sandbox
# starts, this margin) is killed: it hangs (a bug, or a library that blocks at the worker's memory limit), and the
# dead-worker path takes over (its job tried once more alone, then recorded as not graded); the run always ends.
STALL_MARGIN = 120.0
# Each local worker's own memory (RLIMIT_DATA, its heap and anonymous mappings; its libraries' ~0.1 GiB come on top):
# whatever a submission's replies make it hold, an overflow fails that submission or ends that worker (the
# dead-worker path), never the run. An honest worker peaks near 0.4 GiB.
WORKER_MEMORY_BYTES = 1024**3


class ExecutorError(Exception):
    """The executor could not run (no Dask, no scheduler, a worker that cannot start)."""


@dataclass
class Executor:
    kind: str = "local"  # "local" or "dask"
    workers: int = 1  # local: worker processes; dask: LocalCluster workers
    scheduler: str | None = None  # dask: an existing cluster's scheduler address
    usage: list[dict] = field(default_factory=list)  # per worker, filled in by the run: peak memory
    # grade in this process when one worker (or one submission) would do: for tests and the Python API only; the
    # CLI always grades in worker processes, whose memory is limited (memory_bytes), so that an overflow ends a
    # worker and never the run
    in_process: bool = False
    memory_bytes: int | None = WORKER_MEMORY_BYTES  # each local worker's RLIMIT_DATA (None: no limit)
    prestarted: list = field(default_factory=list, repr=False, compare=False)  # (settings, _Worker) from prestart
    # local: how many jobs a worker may grade over several `run_submissions` calls with the same settings before it
    # is retired (its memory bounded so); between calls it waits warm in `prestarted` (the service's workers, whose
    # batches are a few attempts each: each call otherwise pays a worker's start, torch and a warm sandbox parent,
    # about 2 s). 0: a call's workers end with it (a class run). Each submission still gets a fresh sandbox.
    keep_warm: int = 0


WORKERS_ENV = "AUTOGRADE_WORKERS"


def default_workers() -> int:
    """The workers when --workers is not given: $AUTOGRADE_WORKERS, else the number of cores this process may use.
    ValueError for a value that is not a whole number >= 1."""
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        if not value.isdigit() or int(value) < 1:
            raise ValueError(f"${WORKERS_ENV} must be a whole number >= 1 (the default of --workers), not {value!r}")
        return int(value)
    return max(len(os.sched_getaffinity(0)), 1)


def in_process(executor: Executor, count: int) -> bool:
    """Whether `run_submissions` grades `count` submissions in this process: only when asked (`in_process`), and
    then with one worker or one submission."""
    return executor.kind == "local" and executor.in_process and (executor.workers <= 1 or count == 1)


def _settings(options: "GradingOptions", assignment_ids, executor: Executor) -> str:
    """The first line a local worker reads: how to grade, which assignments, its memory limit."""
    from autograder.running.jobs import options_to_payload

    return json.dumps({"options": options_to_payload(options), "assignment_ids": sorted(set(assignment_ids)),
                       "memory_bytes": executor.memory_bytes})


def prestart(executor: Executor, options: "GradingOptions", assignment_ids, count: int) -> None:
    """Start the local workers for `count` submissions of `assignment_ids` now, before the caller's own imports (each
    imports torch and launches its warm sandbox parent meanwhile); `run_submissions` with the same options and
    assignments takes them over. Nothing when grading happens here or elsewhere."""
    if executor.kind != "local" or in_process(executor, count) or count <= 0:
        return
    settings = _settings(options, assignment_ids, executor)
    for _ in range(min(executor.workers, count) - len(executor.prestarted)):
        executor.prestarted.append((settings, _Worker(settings)))


def run_submissions(submissions: "list[Submission]", options: "GradingOptions",
                    on_result: Callable[[SubmissionResult], None], executor: Executor,
                    grader: "Grader | None" = None, heartbeat: Callable[[], None] | None = None,
                    assignment_ids=None, on_started: Callable[[], None] | None = None) -> None:
    """Grade `submissions` where `executor` says; `grader`: this process's, made early (its sandbox parent warms
    up meanwhile), used when the grading happens here. `assignment_ids`: what the local workers load, when more
    than the submissions' own (the assignments a `prestart` named, so that its workers are the ones used).
    `on_started`: called once, when a local worker first says it has started a job (its imports are done, so
    this process's own warm-up no longer takes a core from them)."""
    if not submissions:
        return
    if executor.kind == "dask":
        return _run_dask(submissions, options, on_result, executor, heartbeat)
    if executor.kind != "local":
        raise ExecutorError(f"unknown executor {executor.kind!r}; choose local or dask")
    if in_process(executor, len(submissions)):
        from autograder.engine import grade_batch

        queued = iter(submissions)  # grade_batch gives one result per submission, in order
        grade_batch(submissions, options, lambda result: deliver(on_result, result, next(queued).recording),
                    grader=grader)
        return
    _run_local(submissions, options, on_result, executor, heartbeat, assignment_ids, on_started)


def deliver(on_result: Callable, result: SubmissionResult, recording: dict | None = None,
            rendered: dict | None = None) -> None:
    """`on_result` with the files rendered for the result, if any (rendered here when `recording` is given)."""
    if rendered is None and recording is not None:
        rendered = finished(result, recording)
    if rendered is None:
        on_result(result)
    else:
        on_result(result, rendered)


# --- local worker processes ---------------------------------------------------------------------------


class _Worker:
    def __init__(self, settings: str):
        jobs_read, self.jobs = os.pipe()
        self.results, results_write = os.pipe()
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [*WORKER_COMMAND, str(jobs_read), str(results_write)],
            pass_fds=(jobs_read, results_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.stderr, env=WORKER_ENV,
        )
        self.results_seen = 0  # over its whole life (several runs when kept warm: Executor.keep_warm)
        self.started: int | None = None  # the job it said it started last
        self.solo: int | None = None  # a suspect it grades alone (no other job is sent to it)
        os.close(jobs_read)
        os.close(results_write)
        self.pending: deque[int] = deque()  # job indices sent, in order
        self.heard = time.monotonic()  # when it last said something (or was given its first job)
        self.stalled = False  # killed for saying nothing too long (_LocalPool.stall_limit)
        self.buffer = b""
        self.closed = False
        self.send(settings)

    def send(self, line: str) -> None:
        data = (line + "\n").encode()
        while data:
            data = data[os.write(self.jobs, data):]

    def finish(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.jobs)

    def messages(self) -> list[dict] | None:
        """The complete lines available now; None at end of file."""
        chunk = os.read(self.results, 1 << 20)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def errors(self) -> str:
        try:
            self.stderr.seek(0)
            return self.stderr.read().decode("utf-8", "replace").strip()[-2000:]
        except (OSError, ValueError):
            return ""

    def close(self) -> None:
        """Once: a second close of the same fd number would close whatever reused it (a kept worker's pipe)."""
        self.finish()
        if self.results is None:
            return
        os.close(self.results)
        self.results = None
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _run_local(submissions: "list[Submission]", options: "GradingOptions",
               on_result: Callable[[SubmissionResult], None], executor: Executor,
               heartbeat: Callable[[], None] | None = None, assignment_ids=None,
               on_started: Callable[[], None] | None = None) -> None:
    """Stream the submissions to worker processes. A worker says which job it has started: when it dies, only
    that job is suspected. It is tried once more, alone, on a fresh worker, and then recorded as an error of
    ours (never kept in the regrade cache); the jobs it held but had not started go back to the queue as they
    were. A worker that dies before it starts any job (it cannot even run) stops the run with its error output."""
    pool = _LocalPool(submissions, options, on_result, executor, assignment_ids, on_started)
    try:
        pool.run(heartbeat)
    finally:
        pool.close()
    if pool.errors:
        raise ExecutorError(f"a grading worker failed: {pool.errors[0]}")


class _LocalPool:
    """The local workers of one `_run_local`: the queue of jobs, who holds which, and what to do when one dies."""

    def __init__(self, submissions: "list[Submission]", options: "GradingOptions",
                 on_result: Callable[[SubmissionResult], None], executor: Executor, assignment_ids=None,
                 on_started: Callable[[], None] | None = None):
        self.submissions, self.options, self.on_result, self.executor = submissions, options, on_result, executor
        self.on_started = on_started
        needed = {s.assignment_id for s in submissions}
        self.settings = _settings(options, needed | set(assignment_ids or ()), executor)
        self.early = [w for s, w in executor.prestarted if s == self.settings]  # started early for this very run
        for s, w in executor.prestarted:
            if s != self.settings:
                w.process.kill()
                w.close()
        executor.prestarted.clear()
        self.queue = deque(range(len(submissions)))
        self.attempts = [0] * len(submissions)  # how many workers died while grading it
        self.selector = selectors.DefaultSelector()
        self.workers: list[_Worker] = []
        self.errors: list[str] = []
        limits = options.limits
        self.stall_limit = limits.submission_timeout + 2 * limits.startup_timeout + STALL_MARGIN

    def run(self, heartbeat: Callable[[], None] | None) -> None:
        for _ in range(min(self.executor.workers, len(self.submissions))):
            self.start()
        while self.selector.get_map():
            if self.executor.keep_warm and not self.queue and not any(w.pending for w in self.workers):
                return  # every result is in: the workers that are still open wait warm for the next run (close)
            ready = self.selector.select(timeout=HEARTBEAT)
            if heartbeat:
                heartbeat()
            self.kill_stalled()
            for key, _ in ready:
                worker: _Worker = key.data
                worker.heard = time.monotonic()
                messages = worker.messages()
                if messages is None:  # the worker is gone
                    self.died(worker)
                    continue
                for message in messages:
                    self.take(worker, message)
                if not worker.closed:
                    self.feed(worker)

    def kill_stalled(self) -> None:
        """Kill each worker that holds a job and has said nothing for `stall_limit` seconds (its end of file then
        comes through the selector: `died`)."""
        now = time.monotonic()
        for worker in self.workers:
            if (worker.pending and not worker.stalled and now - worker.heard > self.stall_limit
                    and worker.process.poll() is None):
                worker.stalled = True
                worker.process.kill()

    def take(self, worker: "_Worker", message: dict) -> None:
        """One message from a worker: a result, the job it started, its usage at the end, or its failure."""
        if "result" in message:
            worker.results_seen += 1
            if message.get("i") in worker.pending:
                worker.pending.remove(message["i"])
            deliver(self.on_result, sanitize_record(SubmissionResult.from_dict(message["result"])),
                    rendered=message.get("rendered"))
        elif message.get("op") == "started":
            worker.started = message.get("i")
            if self.on_started is not None:
                first, self.on_started = self.on_started, None
                first()
        elif message.get("op") == "done":
            self.executor.usage.append({k: v for k, v in message.items() if k != "op"})
        elif message.get("op") == "error":
            self.errors.append(message["message"])
            self.queue.clear()

    def send_job(self, worker: "_Worker", i: int) -> None:
        s = self.submissions[i]
        if not worker.pending:
            worker.heard = time.monotonic()  # an idle worker's silence was not a stall
        worker.pending.append(i)  # if it cannot be sent, the worker is gone: its death puts the job back
        try:
            worker.send(json.dumps({"i": i, "notebook": str(s.notebook), "assignment_id": s.assignment_id,
                                    "student_id": s.student_id, "recording": s.recording,
                                    **({"secret": s.secret.hex()} if s.secret else {})}))
        except BrokenPipeError:
            worker.finish()

    def feed(self, worker: "_Worker") -> None:
        if worker.solo is not None or worker.closed:
            return
        while self.queue and len(worker.pending) < IN_FLIGHT and not worker.closed:
            self.send_job(worker, self.queue.popleft())
        if not self.queue and not self.executor.keep_warm:
            worker.finish()

    def start(self, solo: int | None = None) -> None:
        worker = self.early.pop() if self.early and solo is None else _Worker(self.settings)
        worker.solo = solo
        self.workers.append(worker)
        self.selector.register(worker.results, selectors.EVENT_READ, worker)
        if solo is not None:  # a suspect: graded by itself on a fresh worker
            self.send_job(worker, solo)
            worker.finish()
        else:
            self.feed(worker)

    def died(self, worker: "_Worker") -> None:
        self.selector.unregister(worker.results)
        worker.close()
        if worker.started is None and worker.results_seen == 0 and worker.process.returncode != 0:
            self.errors.append(f"exit code {worker.process.returncode}: {worker.errors() or 'no output'}")
            self.queue.clear()
            worker.pending.clear()
            return
        suspect = worker.started if worker.started in worker.pending else None
        for i in reversed(worker.pending):
            if i != suspect:
                self.queue.appendleft(i)  # not started: it was not this job's fault
        worker.pending.clear()
        if suspect is not None:
            self.attempts[suspect] += 1
            if self.attempts[suspect] < MAX_ATTEMPTS:
                self.start(solo=suspect)
            else:
                why = (f"the grading worker said nothing for {self.stall_limit:g} s while grading this submission, the "
                       "second time alone, and was killed" if worker.stalled else None)
                self.on_result(_worker_died(self.submissions[suspect], self.options, worker.process.returncode, why,
                                            stalled=worker.stalled))
        if self.queue and not self.errors and not any(w.solo is None and not w.closed for w in self.workers):
            self.start()
        for other in self.workers:  # a queue refilled: feed the workers that are still open
            if not other.closed and other.solo is None:
                self.feed(other)

    def close(self) -> None:
        keep = self.executor.keep_warm
        for worker in self.early:  # started early, not needed after all: warm for the next run, if kept
            if keep and worker.process.poll() is None:
                self.executor.prestarted.append((self.settings, worker))
            else:
                worker.process.kill()
                worker.close()
        for worker in self.workers:
            if (keep and self._idle(worker) and worker.results_seen < keep
                    and len(self.executor.prestarted) < self.executor.workers):
                self.selector.unregister(worker.results)
                worker.started = None  # an index of this run: it means nothing in the next
                self.executor.prestarted.append((self.settings, worker))
                continue
            if worker.process.poll() is None:
                worker.process.kill()
            try:
                worker.close()
            except OSError:
                pass
        self.selector.close()

    def _idle(self, worker: "_Worker") -> bool:
        """Open, alive, holding no job and no partial message: it can take the next run's jobs."""
        return (not worker.closed and worker.solo is None and not worker.pending and not worker.buffer
                and worker.process.poll() is None and worker.results in self.selector.get_map())


def _worker_died(submission: "Submission", options: "GradingOptions", code: int | None,
                 why: str | None = None, stalled: bool = False) -> SubmissionResult:
    """A submission whose worker process died under it twice, the second time graded alone: an error result
    (an error of ours as far as the regrade cache goes: graded again next run), the batch goes on."""
    from autograder.assignments import load_assignment
    from autograder.course import course_secret, student_seed
    from autograder.engine import failed_result

    seed = student_seed(submission.secret or options.secret or course_secret(options.root), submission.assignment_id,
                        submission.student_id)
    default_why = ("the grading worker process died twice while grading this submission, the second time alone; "
                   f"exit code {code}")
    what = "两次没有响应、被终止" if stalled else "两次退出"
    message = f"这份提交没能评分：评分进程在评它时{what}（第二次单独评分），请联系老师 ({why or default_why})"
    result = failed_result(submission, load_assignment(submission.assignment_id, options.root), options.tier or "",
                           seed, message)
    result.infrastructure_error = True
    return result


# --- Dask -----------------------------------------------------------------------------------------------


def _run_dask(submissions: "list[Submission]", options: "GradingOptions",
              on_result: Callable[[SubmissionResult], None], executor: Executor,
              heartbeat: Callable[[], None] | None = None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ExecutorError("the dask executor needs dask[distributed] (pip install 'dask[distributed]')") from None
    from autograder.jobs.worker import grade_chunk
    from autograder.running.jobs import options_to_payload

    cluster = None
    try:
        if executor.scheduler:
            try:
                client = Client(executor.scheduler, timeout=30)
            except (OSError, TimeoutError) as exc:
                raise ExecutorError(f"cannot reach the Dask scheduler at {executor.scheduler}: {exc}") from None
        else:
            cluster = LocalCluster(n_workers=max(executor.workers, 1), threads_per_worker=1, processes=True,
                                   dashboard_address=None, silence_logs=40)
            client = Client(cluster)
        with client:
            workers = max(len(client.scheduler_info().get("workers", {})), 1)
            memory_limit = executor.memory_bytes  # each Dask worker's RLIMIT_DATA, as a local worker's
            size = max(1, min(25, math.ceil(len(submissions) / (workers * 4))))
            payload = client.scatter(options_to_payload(options), broadcast=True)
            futures, chunks = [], {}
            for start in range(0, len(submissions), size):
                chunk = submissions[start:start + size]
                future = client.submit(grade_chunk, [_job(s) for s in chunk], payload, memory_limit, pure=False)
                futures.append(future)
                chunks[future.key] = chunk
            usage: dict = {}
            for future in as_completed(futures):
                try:
                    done = future.result()
                except Exception as exc:  # Dask gave up on the task (its workers died): these jobs' error, ours
                    for submission in chunks[future.key]:
                        on_result(_worker_died(submission, options, None,
                                               f"the Dask task failed: {type(exc).__name__}"))
                    continue
                usage[done["usage"].get("pid")] = done["usage"]
                for data, rendered in zip(done["results"], done.get("rendered") or [None] * len(done["results"]),
                                          strict=True):
                    deliver(on_result, sanitize_record(SubmissionResult.from_dict(data)), rendered=rendered)
                if heartbeat:
                    heartbeat()
            executor.usage.extend(usage.values())
    finally:
        if cluster is not None:
            cluster.close()


def _job(submission: "Submission") -> dict:
    """A submission as a Dask task carries it: the notebook's bytes, read here as the engine reads them."""
    from autograder.intake.reading import UnreadableNotebook, load_notebook_bytes

    try:
        content = load_notebook_bytes(submission.notebook)
    except UnreadableNotebook:
        content = None  # a link, a special file, too big: the worker sees an unopenable file, as here
    return {"notebook": str(submission.notebook), "name": submission.notebook.name, "content": content,
            "assignment_id": submission.assignment_id, "student_id": submission.student_id,
            "recording": submission.recording, **({"secret": submission.secret.hex()} if submission.secret else {})}
