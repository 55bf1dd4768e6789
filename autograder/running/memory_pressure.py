"""Whether this process ran out of its own memory (its RLIMIT_DATA: jobs.worker.limit_memory) while grading.

Where the grader catches a MemoryError of its own (a reply too big to read, a sandbox that could not start, a check
that could not finish), it calls `note()`; a grading worker looks after each submission (`take()`) and, if it ran
out, retires once that result is sent: what one submission left in its memory (objects a check still held, a heap the
allocator keeps) never costs the next submission its grade. A fresh worker grades the rest.
"""

_failures = 0


def note() -> None:
    global _failures
    _failures += 1


def take() -> int:
    """How many times this process ran out of memory since the last `take` (and start counting again)."""
    global _failures
    count, _failures = _failures, 0
    return count


def data_bytes() -> int | None:
    """This process's data size as RLIMIT_DATA counts it (VmData: private writable mappings), None if unknown."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None
