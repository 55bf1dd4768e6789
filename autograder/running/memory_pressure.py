"""Whether this process ran out of its own memory (its RLIMIT_DATA: jobs.worker.limit_memory) while grading.

Where the grader catches a MemoryError of its own (a reply too big to read, a sandbox that could not start, a check
that could not finish), it calls `note()`; a grading worker looks after each submission (`take()`) and, if it ran
out, retires once that result is sent: what one submission left in its memory (objects a check still held, a heap the
allocator keeps) never costs the next submission its grade. A fresh worker grades the rest.
"""

import traceback

_failures = 0


def note() -> None:
    global _failures
    _failures += 1


def release(exc: BaseException) -> None:
    """Let go of the locals of the frames a caught MemoryError passed through (a reply half read: up to the reply
    cap in pieces): the error stays reachable from whatever is raised in its place (as its __context__), and its
    traceback would keep that data alive as long as the new error is kept (a probe's failure is, for the rest of the
    submission). The frame that caught it goes on running and is left as it is."""
    traceback.clear_frames(exc.__traceback__)


def take() -> int:
    """How many times this process ran out of memory since the last `take` (and start counting again)."""
    global _failures
    count, _failures = _failures, 0
    return count


def _status_bytes(field: bytes) -> int | None:
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def data_bytes() -> int | None:
    """This process's data size as RLIMIT_DATA counts it (VmData: private writable mappings), None if unknown."""
    return _status_bytes(b"VmData:")


def peak_resident_bytes() -> int | None:
    """This process's own peak resident memory (VmHWM), None if unknown. Not getrusage's ru_maxrss: Linux carries
    that over an exec from the process that started this one (a grading worker started by a CLI at 600 MiB said
    600 MiB whatever it used itself)."""
    return _status_bytes(b"VmHWM:")
