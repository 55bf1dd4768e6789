"""A grading worker: one process that grades a stream of submissions with one pytest session and one
warm sandbox parent. The executors (autograder.jobs.executors) start these, locally or on Dask.

Local: `python -m autograder.jobs.worker JOBS_FD RESULTS_FD`. The first line on JOBS_FD is the run's
settings ({"options": ..., "assignment_ids": [...]}), each further line one job ({"i", "notebook",
"assignment_id", "student_id", "recording"}); end of file ends the batch. When the worker starts a job it says so
({"op": "started", "i"}); each result goes back on RESULTS_FD as one JSON line ({"i", "result", and "rendered": its
files, when the job carried its recording facts: autograder.recording.rendered}), and
at the end {"op": "done", ...usage}. The worker's stdout stays
free for whatever pytest or a check prints.
"""

import gc
import json
import os
import resource
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from autograder.recording.rendered import finished, warm_up as warm_rendering
from autograder.running import memory_pressure
from autograder.results import SubmissionResult
from autograder.running.jobs import GradingOptions, Submission, options_from_payload

# The engine (torch, pytest, the checks) is imported once the warm sandbox parent is launched: both import torch at
# the same time (this module is light: the CLI imports it to plan the run).


def usage() -> dict:
    """Peak resident memory of this worker (KiB: its own, VmHWM), its data size now (VmData, KiB), its memory limit
    (bytes, None: none) and how many of its objects no collection walks (frozen at its start, a local worker's)."""
    limit = resource.getrlimit(resource.RLIMIT_DATA)[0]
    data = memory_pressure.data_bytes()
    peak = memory_pressure.peak_resident_bytes()
    return {"worker_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if peak is None else peak // 1024,
            "pid": os.getpid(),
            "worker_data_kib": None if data is None else data // 1024,
            "memory_limit_bytes": None if limit == resource.RLIM_INFINITY else limit,
            "frozen_objects": gc.get_freeze_count()}


def _launch_warm_parent(options: GradingOptions):
    """The warm sandbox parent, launched now (it imports torch while this process does); None when that fails here
    (the Grader then tries again, and says why)."""
    from autograder.running.sandbox import environment, tiers
    from autograder.running.sandbox.zygote import Zygote

    try:
        tier = tiers.choose(options.tier, options.allow_weak_sandbox)
        return Zygote(environment.locate(), tier, options.limits.startup_timeout).launch()
    except Exception:
        return None


def limit_memory(limit: int | None) -> None:
    """This process's heap and anonymous memory at most `limit` bytes (RLIMIT_DATA, soft limit; None: unchanged).

    Set after the warm sandbox parent started: rlimits are inherited, and the sandboxes are forked from that parent
    with limits of their own. Past the limit an allocation fails here (MemoryError, or torch's RuntimeError): that
    submission's error, or, if this process cannot go on, a dead worker, whose submission is tried once more alone
    and then recorded as not graded; the run goes on."""
    if not limit:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


RETIRE_AT = 0.9  # a worker whose data size (VmData) is past this share of its memory limit after a job retires


def should_retire(limit: int | None) -> bool:
    """After a result: whether this worker ran out of its own memory during that submission, or is near its limit
    now (memory_pressure): then it grades nothing more, so that what that submission left in its memory never costs
    the next one its grade. (A local worker only: a Dask task cannot end its worker.)"""
    if memory_pressure.take():
        return True
    size = memory_pressure.data_bytes() if limit else None
    return size is not None and size > RETIRE_AT * limit


# --- local worker process -----------------------------------------------------------------------------


def serve(jobs_fd: int, results_fd: int) -> int:
    jobs = os.fdopen(jobs_fd, "r", encoding="utf-8")
    results = os.fdopen(results_fd, "w", encoding="utf-8")
    lock = threading.Lock()

    def send(message: dict) -> None:
        # ASCII JSON: any text a submission left in its result (a lone surrogate) still encodes
        with lock:
            results.write(json.dumps(message, ensure_ascii=True) + "\n")
            results.flush()

    settings = json.loads(jobs.readline())
    options = options_from_payload(settings["options"])
    indices, recordings = [], {}

    retiring = []  # set once a submission ran this process out of memory: it takes no further job

    def stream():
        while not retiring:
            line = jobs.readline()
            if not line.strip():
                return
            job = json.loads(line)
            indices.append(job["i"])
            recordings[job["i"]] = job.get("recording")
            send({"op": "started", "i": job["i"]})  # if this process dies now, this job is the one to blame
            yield Submission(Path(job["notebook"]), job["assignment_id"], job["student_id"],
                             secret=bytes.fromhex(job["secret"]) if job.get("secret") else None)

    def on_result(result: SubmissionResult) -> None:
        i = indices.pop(0)
        rendered = finished(result, recordings.pop(i, None))  # before to_dict: it finishes the result
        send({"i": i, "result": result.to_dict(), **({"rendered": rendered} if rendered is not None else {})})
        if should_retire(settings.get("memory_bytes")):
            retiring.append(i)  # the pool gives the jobs it holds, not started, to a fresh worker

    zygote = _launch_warm_parent(options)  # before this process imports torch, and before its memory is limited
    from autograder.engine import Grader, grade_batch

    grader = Grader(options, zygote)
    warm_rendering()  # while the warm parent imports torch: the first result's page is not kept waiting
    limit_memory(settings.get("memory_bytes"))
    # what is imported by now (torch, pytest, the engine: ~190,000 objects) lives as long as this process: no full
    # collection walks it again (pytest's unraisable plugin collects twice at the session's end, 0.15 s with it)
    gc.freeze()
    try:
        grade_batch(stream(), options, on_result, assignment_ids=settings["assignment_ids"], grader=grader)
    except BaseException as exc:  # the batch itself failed (a broken check module, no sandbox): say so
        send({"op": "error", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    finally:
        sandbox_usage = grader.zygote.usage() if grader.zygote is not None else {}
        grader.close()
    send({"op": "done", **usage(), **sandbox_usage})
    return 0


# --- Dask ---------------------------------------------------------------------------------------------

_GRADERS: dict = {}  # per worker process (a Grader per payload): the warm sandbox parent outlives one task


def grade_chunk(jobs: list[dict], payload: dict, memory_limit: int | None = None) -> dict:
    """A Dask task: grade a few submissions whose notebooks travel with the task (no shared file system needed).
    The Dask worker's memory is limited as a local worker's is (`memory_limit`, RLIMIT_DATA, set once its warm
    sandbox parent has started): an overflow ends that worker (Dask gives up on the task, whose submissions are
    recorded as not graded), never the run.

    Returns {"results": [SubmissionResult as dict, ...], "rendered": [its files or None, ...], "usage": {...}} in
    the order of `jobs`.
    """
    from autograder.engine import Grader, grade_batch

    key = json.dumps(payload, sort_keys=True)
    options = options_from_payload(payload)
    grader = _GRADERS.get(key)
    if grader is None:
        grader = _GRADERS[key] = Grader(options)
        grader.warm_parent()  # started (and its rlimits its own) before this process's limit
        limit_memory(memory_limit)
    with tempfile.TemporaryDirectory(prefix="autograde-task-") as tmp:
        submissions = []
        for n, job in enumerate(jobs):
            path = Path(tmp) / str(n) / job["name"]
            path.parent.mkdir()
            if job["content"] is None:  # unreadable where it was found: unreadable here too
                path.symlink_to("/nonexistent")
            else:
                path.write_bytes(job["content"])
            submissions.append(Submission(path, job["assignment_id"], job["student_id"],
                                          secret=bytes.fromhex(job["secret"]) if job.get("secret") else None))
        results = grade_batch(submissions, options, grader=grader)
    out, rendered = [], []
    for job, result in zip(jobs, results, strict=True):
        result.notebook = job["notebook"]
        rendered.append(finished(result, job.get("recording")))  # before asdict: it finishes the result
        out.append(asdict(result))
    return {"results": out, "rendered": rendered,
            "usage": {**usage(), **(grader.zygote.usage() if grader.zygote else {})}}


if __name__ == "__main__":
    code = serve(int(sys.argv[1]), int(sys.argv[2]))
    # Everything is said (each message flushed as it is sent) and closed (the warm sandbox parent, the pool uids
    # released): the interpreter's own teardown, with torch and pytest loaded, would only make the run wait about
    # 0.4 s more for this process's end.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
