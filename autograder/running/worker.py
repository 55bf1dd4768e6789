"""A grading worker: one process that grades a stream of submissions with one pytest session and one
warm sandbox parent. The executors (autograder.running.executors) start these, locally or on Dask.

Local: `python -m autograder.running.worker JOBS_FD RESULTS_FD`. The first line on JOBS_FD is the run's
settings ({"options": ..., "assignment_ids": [...]}), each further line one job ({"i", "notebook",
"assignment_id", "student_id", "recording"}); end of file ends the batch. When the worker starts a job it says so
({"op": "started", "i"}); each result goes back on RESULTS_FD as one JSON line ({"i", "result", and "rendered": its
files, when the job carried its recording facts: autograder.recording.rendered}), and
at the end {"op": "done", ...usage}. The worker's stdout stays
free for whatever pytest or a check prints.
"""

import json
import os
import resource
import sys
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path

from autograder.engine import Grader, GradingOptions, Submission, grade_batch
from autograder.running.executors import finished
from autograder.recording.results import SubmissionResult
from autograder.running.sandbox.process import Limits


def options_to_payload(options: GradingOptions) -> dict:
    """Everything a worker elsewhere needs to grade exactly as here (the secret included: workers are trusted)."""
    from autograder.course import course_secret

    secret = options.secret or course_secret(options.root)
    return {"limits": options.limits.to_dict(), "tier": options.tier, "allow_weak_sandbox": options.allow_weak_sandbox,
            "convention_credit": options.convention_credit, "run_all_cells": options.run_all_cells,
            "secret": secret.hex()}


def options_from_payload(payload: dict) -> GradingOptions:
    return GradingOptions(limits=Limits(**payload["limits"]), tier=payload["tier"],
                          allow_weak_sandbox=payload["allow_weak_sandbox"],
                          convention_credit=payload["convention_credit"], run_all_cells=bool(payload["run_all_cells"]),
                          secret=bytes.fromhex(payload["secret"]))


def usage() -> dict:
    """Peak resident memory of this worker and of the largest sandbox it has run (KiB)."""
    return {"worker_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "pid": os.getpid()}


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

    def stream():
        for line in jobs:
            if not line.strip():
                return
            job = json.loads(line)
            indices.append(job["i"])
            recordings[job["i"]] = job.get("recording")
            send({"op": "started", "i": job["i"]})  # if this process dies now, this job is the one to blame
            yield Submission(Path(job["notebook"]), job["assignment_id"], job["student_id"])

    def on_result(result: SubmissionResult) -> None:
        i = indices.pop(0)
        rendered = finished(result, recordings.pop(i, None))  # before to_dict: it finishes the result
        send({"i": i, "result": result.to_dict(), **({"rendered": rendered} if rendered is not None else {})})

    grader = Grader(options)
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

_GRADERS: dict[str, Grader] = {}  # per worker process: the warm sandbox parent outlives one task


def grade_chunk(jobs: list[dict], payload: dict) -> dict:
    """A Dask task: grade a few submissions whose notebooks travel with the task (no shared file system needed).

    Returns {"results": [SubmissionResult as dict, ...], "rendered": [its files or None, ...], "usage": {...}} in
    the order of `jobs`.
    """
    key = json.dumps(payload, sort_keys=True)
    options = options_from_payload(payload)
    grader = _GRADERS.get(key)
    if grader is None:
        grader = _GRADERS[key] = Grader(options)
    with tempfile.TemporaryDirectory(prefix="autograde-task-") as tmp:
        submissions = []
        for n, job in enumerate(jobs):
            path = Path(tmp) / str(n) / job["name"]
            path.parent.mkdir()
            if job["content"] is None:  # unreadable where it was found: unreadable here too
                path.symlink_to("/nonexistent")
            else:
                path.write_bytes(job["content"])
            submissions.append(Submission(path, job["assignment_id"], job["student_id"]))
        results = grade_batch(submissions, options, grader=grader)
    out, rendered = [], []
    for job, result in zip(jobs, results, strict=True):
        result.notebook = job["notebook"]
        rendered.append(finished(result, job.get("recording")))  # before asdict: it finishes the result
        out.append(asdict(result))
    return {"results": out, "rendered": rendered,
            "usage": {**usage(), **(grader.zygote.usage() if grader.zygote else {})}}


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), int(sys.argv[2])))
