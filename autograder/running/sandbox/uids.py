"""A small pool of unprivileged uids, one per live sandbox, emptied of processes before reuse.

Only used when the grader runs as root (otherwise the sandbox keeps the grader's uid inside its
user namespace). A uid is held with an exclusive file lock for the sandbox's lifetime, so two
workers, or two processes of a Dask cluster on one machine, never share one; every process still
running under it is killed on acquire and on release.
"""

import fcntl
import os
import signal
import threading
import time
from pathlib import Path

FIRST_UID = int(os.environ.get("AUTOGRADE_UID_BASE", "61000"))
POOL_SIZE = int(os.environ.get("AUTOGRADE_UID_POOL", "64"))
LOCK_DIR = Path(os.environ.get("AUTOGRADE_UID_LOCKS", "/run/autograde-uids"))


class UidPoolExhausted(Exception):
    pass


def _tasks_of(uid: int) -> list[tuple[int, bool]]:
    """(pid, is a zombie) for every process whose real uid is `uid`: one pass over /proc."""
    tasks = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                state = None
                for line in f:
                    if line.startswith(b"State:"):
                        state = line.split()[1]
                    elif line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            tasks.append((int(entry.name), state in (b"Z", b"X")))
                        break
        except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError, IndexError):
            continue
    return tasks


def processes_of(uid: int, zombies: bool = False) -> list[int]:
    """Processes whose real uid is `uid`: the live ones, and with `zombies` also those that wait to be reaped."""
    return [pid for pid, zombie in _tasks_of(uid) if zombies or not zombie]


ZOMBIE_WAIT = 5.0  # seconds: how long a uid waits for the zombies of its killed processes to be reaped


def kill_all(uid: int, attempts: int = 50) -> None:
    """SIGKILL every process of `uid`, until none is left (a fork bomb is bounded by RLIMIT_NPROC), and wait
    (at most ZOMBIE_WAIT) until their zombies are reaped too: a zombie still counts against the uid's
    RLIMIT_NPROC, so the next sandbox on the uid could not fork. Usually nothing is left: one pass over /proc."""
    if uid == 0:
        raise ValueError("refusing to kill the processes of root")
    zombie_deadline = None
    passes = 0
    while True:
        tasks = _tasks_of(uid)
        live = [pid for pid, zombie in tasks if not zombie]
        if live and attempts > 0:
            attempts -= 1
            for pid in live:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        elif tasks:  # only zombies (or live ones that outlasted every attempt): wait for them, bounded
            zombie_deadline = zombie_deadline or time.monotonic() + ZOMBIE_WAIT
            if time.monotonic() > zombie_deadline:
                return
        else:
            return
        # a killed sandbox is usually reaped within a millisecond or two: look again soon, then every 10 ms
        time.sleep(min(0.01, 0.0005 * 2 ** passes))
        passes += 1


class UidLease:
    def __init__(self, uid: int, lock_fd: int):
        self.uid, self._lock_fd = uid, lock_fd

    def release(self) -> None:
        if self._lock_fd is None:
            return
        kill_all(self.uid)
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)
        self._lock_fd = None

    def release_in_background(self) -> None:
        """`release` on a thread of this process: the uid stays locked (acquire skips it) until every process of
        it is gone, while the grader goes on with the next submission (a killed sandbox of a few hundred MiB takes
        some 20 ms to die). `wait_for_releases` waits for all of them."""
        fd, self._lock_fd = self._lock_fd, None
        if fd is None:
            return
        lease = UidLease(self.uid, fd)
        thread = threading.Thread(target=lease.release, name=f"release-uid-{self.uid}", daemon=False)
        with _releasing_lock:
            _releasing.append(thread)
            _releasing[:] = [t for t in _releasing if t.is_alive() or t is thread]
        thread.start()


_releasing: list[threading.Thread] = []
_releasing_lock = threading.Lock()


def wait_for_releases() -> None:
    """Every uid released in the background is empty and unlocked (a worker calls this before it exits)."""
    with _releasing_lock:
        pending = list(_releasing)
        _releasing.clear()
    for thread in pending:
        thread.join()


def acquire() -> UidLease:
    LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = os.getpid() % POOL_SIZE  # spread concurrent workers over the pool
    for i in range(POOL_SIZE):
        uid = FIRST_UID + (start + i) % POOL_SIZE
        fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        kill_all(uid)  # whatever a crashed grader left behind
        return UidLease(uid, fd)
    raise UidPoolExhausted(f"all {POOL_SIZE} sandbox uids from {FIRST_UID} are in use")
