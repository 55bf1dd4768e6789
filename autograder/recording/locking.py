"""One `autograde` at a time on an output folder or a gradebook: an advisory lock (fcntl.flock).

The kernel drops a flock when its holder dies, even by `kill -9`, so no stale lock is ever left behind. The
lock file holds the holder's pid and start time, which a second run prints when it stops.
"""

import contextlib
import fcntl
import json
import os
import time
from pathlib import Path


class LockedError(Exception):
    """Another run holds the lock: the message names it (pid, start time) and the locked path."""


def _describe(path: Path) -> str:
    try:
        holder = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {int(holder['pid'])}, `{str(holder.get('command', 'autograde'))[:80]}`, started {holder['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (its details are not written yet)"


@contextlib.contextmanager
def exclusive(path: Path, what: str, command: str):
    """Hold the lock file `path` for `what` (e.g. "the output folder grading") for the block, or raise LockedError."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise LockedError(f"cannot lock {what}: cannot open the lock file {path} ({exc.strerror}); make its folder "
                          "writable for this user") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise LockedError(f"{what} is in use by another autograde run ({_describe(path)}); wait for it to "
                              f"finish (the lock is {path})") from None
        holder = {"pid": os.getpid(), "command": command,
                  "started": time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the flock


def out_lock(out: Path) -> Path:
    return Path(out) / ".autograde.lock"


def gradebook_lock(gradebook: Path) -> Path:
    """Next to the gradebook: `gradebook.db.autograde-lock` (git-ignored)."""
    gradebook = Path(gradebook)
    return gradebook.with_name(gradebook.name + ".autograde-lock")


@contextlib.contextmanager
def run_locks(command: str, out: Path | None = None, gradebook: Path | None = None):
    """The output folder's lock, then the gradebook's (always in this order: no two runs wait on each other)."""
    with contextlib.ExitStack() as stack:
        if out is not None:
            stack.enter_context(exclusive(out_lock(out), f"the output folder {out}", command))
        if gradebook is not None:
            stack.enter_context(exclusive(gradebook_lock(gradebook), f"the gradebook {gradebook}", command))
        yield
