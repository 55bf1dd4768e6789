"""A small pool of unprivileged uids, one per live sandbox, emptied of processes before reuse.

Only used when the grader runs as root (otherwise the sandbox keeps the grader's uid inside its
user namespace). A uid is held with an exclusive file lock for the sandbox's lifetime, so two
workers, or two processes of a Dask cluster on one machine, never share one; on acquire and on release every
process still running under it is killed, and its files in the host's shared folders (/tmp, /var/tmp, /dev/shm)
and its SysV IPC objects are removed (`purge`).
"""

import ctypes
import fcntl
import os
import shutil
import signal
import stat
import threading
import time
from pathlib import Path

from autograder.running.sandbox.threads import Background

FIRST_UID = int(os.environ.get("AUTOGRADE_UID_BASE", "61000"))
POOL_SIZE = int(os.environ.get("AUTOGRADE_UID_POOL", "64"))
LOCK_DIR = Path(os.environ.get("AUTOGRADE_UID_LOCKS", "/run/autograde-uids"))


class UidPoolExhausted(Exception):
    pass


STATUS_HEAD = 4096  # bytes of /proc/PID/status read: Name (at most 64 escaped characters), ..., State, ..., Uid


def _tasks_of(uid: int) -> list[tuple[int, bool]]:
    """(pid, is a zombie) for every process whose real uid is `uid`: one pass over /proc, one read of each process's
    status (its State and Uid lines come first, within STATUS_HEAD bytes; a name is escaped there, never a newline)."""
    tasks = []
    wanted = str(uid).encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/status", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:  # gone meanwhile
            continue
        try:
            head = os.read(fd, STATUS_HEAD)
        except OSError:
            continue
        finally:
            os.close(fd)
        at = head.find(b"\nUid:")
        if at < 0:
            continue
        real = head[at + 5:head.find(b"\n", at + 5)].split()[:1]
        if real == [wanted]:
            at = head.find(b"\nState:")
            state = head[at + 7:].split(None, 1)[:1] if at >= 0 else []
            tasks.append((int(name), state in ([b"Z"], [b"X"])))
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


# Host folders any user may write: what a uid leaves there is removed before the uid is reused (the tiers that
# give each sandbox a private /tmp and /dev/shm, or fence writes with Landlock, leave nothing there anyway).
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue")
_IPC_RMID = 0


def remove_files_of(uid: int, folders=SHARED_FOLDERS, depth: int = 3) -> list[str]:
    """Remove every file, folder and socket owned by `uid` in the shared host folders (and in the folders there that
    anyone may write, `depth` levels down). Links are removed, never followed; the uid's processes are gone."""
    removed = []

    def visit(folder: str, level: int):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid == uid:
                try:
                    if stat.S_ISDIR(st.st_mode):
                        shutil.rmtree(entry.path)  # the fd-based rmtree: follows no link
                    else:
                        os.unlink(entry.path)
                    removed.append(entry.path)
                except OSError:
                    pass
            elif stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_IWOTH and level < depth:
                visit(entry.path, level + 1)

    for folder in folders:
        visit(folder, 0)
    return removed


def remove_ipc_of(uid: int) -> int:
    """Remove the SysV shared memory segments, message queues and semaphore sets that `uid` owns or made, in the
    grader's IPC namespace. How many were removed."""
    libc = ctypes.CDLL(None, use_errno=True)
    removed = 0
    # /proc/sysvipc/<kind>: the id's column, and the owner's and creator's uid columns
    for kind, id_col, uid_cols, call in (("shm", 1, (7, 9), lambda i: libc.shmctl(i, _IPC_RMID, None)),
                                         ("msg", 1, (7, 9), lambda i: libc.msgctl(i, _IPC_RMID, None)),
                                         ("sem", 1, (4, 6), lambda i: libc.semctl(i, 0, _IPC_RMID))):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            try:
                if any(int(fields[c]) == uid for c in uid_cols) and call(int(fields[id_col])) == 0:
                    removed += 1
            except (ValueError, IndexError):
                continue
    return removed


def purge(uid: int) -> None:
    """Everything of `uid` that could outlive its sandbox and reach the next one on it: its processes first (so
    that nothing makes new files meanwhile), then its files in the shared folders and its SysV IPC objects.
    (Its kernel key rings stay empty: every tier's seccomp filter refuses add_key, request_key and keyctl.)"""
    kill_all(uid)
    remove_files_of(uid)
    remove_ipc_of(uid)


class UidLease:
    def __init__(self, uid: int, lock_fd: int):
        self.uid, self._lock_fd = uid, lock_fd
        self.cgroup = None  # memory.UidCgroup of the sandbox on this uid, removed at release

    def release(self) -> None:
        if self._lock_fd is None:
            return
        purge(self.uid)
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
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
        lease.cgroup, self.cgroup = self.cgroup, None
        thread = Background(lease.release, f"release-uid-{self.uid}")  # never waits on itself (threads.py)
        with _releasing_lock:
            _releasing.append(thread)
            _releasing[:] = [t for t in _releasing if t.is_alive() or t is thread]
        thread.start()


_releasing: list[Background] = []
_releasing_lock = threading.Lock()


def wait_for_releases() -> None:
    """Every uid released in the background is empty and unlocked (a worker calls this before it exits)."""
    with _releasing_lock:
        pending = list(_releasing)
        _releasing.clear()
    for thread in pending:  # a release whose thread could not start is done here
        thread.run_here(RELEASE_START_WAIT, RELEASE_WAIT)


RELEASE_WAIT = 60.0  # seconds: how long wait_for_releases waits for one release (killing a uid's processes, its files)
RELEASE_START_WAIT = 2.0  # seconds for a release's thread to begin before wait_for_releases runs it itself
ACQUIRE_WAIT = 30.0  # seconds: how long acquire waits for a uid that is being emptied (released on a thread)


def acquire(wait: float = ACQUIRE_WAIT) -> UidLease:
    """A uid of the pool, locked for the caller; when every uid is held, wait (at most `wait` seconds) for one:
    the last sandbox's uid is emptied and unlocked on a thread while its worker goes on, so a small pool (or one
    uid, as some tests force) is briefly all held between two submissions."""
    LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    start = os.getpid() % POOL_SIZE  # spread concurrent workers over the pool
    deadline = time.monotonic() + wait
    pause = 0.002
    while True:
        for i in range(POOL_SIZE):
            uid = FIRST_UID + (start + i) % POOL_SIZE
            fd = os.open(LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            purge(uid)  # whatever a crashed grader left behind
            return UidLease(uid, fd)
        if time.monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    raise UidPoolExhausted(f"all {POOL_SIZE} sandbox uids from {FIRST_UID} are in use")
