"""A memory budget per submission, for all its processes together: a cgroup where the grader may make one, else
a watchdog.

- cgroup: one cgroup per pool uid, made under the grader's own cgroup (`/proc/self/cgroup`), emptied and reset
  when the uid is acquired (so a crashed grader's cgroup is reused, not leaked) and removed when it is released.
  cgroup v2 where the memory controller is on cgroup2 (`memory.max`, `memory.swap.max` 0, `pids.max`), else
  cgroup v1 (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes` where swap is accounted, and `pids.max` in
  the pids hierarchy). Support is probed by making a child cgroup and finding its `memory.*` files: a `mkdir`
  that succeeds proves nothing (here /sys/fs/cgroup itself may be a tmpfs). The submission's first process
  enters it before it confines itself (runner.py writes "0" to the `cgroup.procs` descriptors it is handed), so
  everything it starts is in it. The kernel's OOM killer acts inside the cgroup only; the grader ends the whole
  submission when it sees the cgroup's `oom_kill` count rise or its anonymous and tmpfs pages fill the limit
  (`FULL`; the kernel would first thrash on the page cache for seconds).
- watchdog: without root or a usable cgroup, a thread of the grader sums the proportional set size (PSS) of the
  submission's processes (every process of its pool uid; without root, the warm parent's descendants that came
  after the spawn) every `WATCH_INTERVAL` and kills them all when the sum passes the budget.

`guard="auto"` takes the cgroup where it works, else the watchdog; "cgroup" insists (an error where none
works); "watchdog" forces the watchdog (so both paths are tested on one machine).
"""

import errno
import functools
import os
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from autograder.running.sandbox.threads import Background

GUARDS = ("auto", "cgroup", "watchdog")
CGROUP_INTERVAL = 0.1  # seconds between two looks at the cgroup's counters (a few small files)
WATCH_INTERVAL = 0.25  # seconds between two looks of the watchdog (a pass over /proc: some 5 ms per 100 processes)
PREFIX = "autograde-"
FULL = 0.97  # cgroup: the budget counts as passed once anonymous and tmpfs pages fill this share of the limit


class MemoryGuardUnavailable(Exception):
    pass


# --- where the cgroups are ------------------------------------------------------------------------


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file-system type, super options) of every cgroup file system, from /proc/self/mountinfo."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        found.append((fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """controller (or "" for cgroup2) -> the grader's own cgroup path in that hierarchy."""
    own = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return own
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for controller in (parts[1].split(",") if parts[1] else [""]):
            own[controller] = parts[2]
    return own


def _probe_dir(parent: Path, wanted: str) -> bool:
    """Make a child cgroup under `parent` and see that the kernel gave it `wanted` (a file of the controller)."""
    probe = parent / f"{PREFIX}probe-{os.getpid()}-{threading.get_ident()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        return (probe / wanted).exists()
    finally:
        try:
            probe.rmdir()
        except OSError:
            pass


@dataclass(frozen=True)
class CgroupLayout:
    version: int  # 1 or 2
    memory_parent: Path  # where the per-uid memory cgroups are made (the grader's own cgroup)
    pids_parent: Path | None  # v1: the grader's cgroup in the pids hierarchy (None: no pids controller)

    def describe(self) -> str:
        return f"cgroup v{self.version} ({'memory and pids' if self.pids_parent or self.version == 2 else 'memory'})"


@functools.lru_cache(maxsize=None)
def cgroup_layout() -> CgroupLayout | None:
    """Where this grader can make a memory cgroup per sandbox, or None (not root, or no usable memory controller)."""
    if os.geteuid() != 0:
        return None
    own = _own_cgroups()
    mounts = _mounts()
    # cgroup v2 with the memory controller on it
    for point, fstype, _ in mounts:
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = Path(point + own[""].rstrip("/"))
        try:
            controllers = (parent / "cgroup.controllers").read_text().split()
        except OSError:
            continue
        if "memory" not in controllers:
            continue
        try:  # our children need the controllers switched on in our subtree_control
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            want = [c for c in ("memory", "pids") if c in controllers and c not in enabled]
            if want:
                (parent / "cgroup.subtree_control").write_text(" ".join("+" + c for c in want))
        except OSError:
            pass  # e.g. processes in our own cgroup (the "no internal processes" rule): the probe says no
        if _probe_dir(parent, "memory.max"):
            return CgroupLayout(2, parent, None)
    # cgroup v1: the memory hierarchy, and the pids one if there is one
    memory_parent = pids_parent = None
    for point, fstype, options in mounts:
        if fstype != "cgroup":
            continue
        if "memory" in options and "memory" in own and memory_parent is None:
            candidate = Path(point + own["memory"].rstrip("/"))
            if _probe_dir(candidate, "memory.limit_in_bytes"):
                memory_parent = candidate
        if "pids" in options and "pids" in own and pids_parent is None:
            candidate = Path(point + own["pids"].rstrip("/"))
            if _probe_dir(candidate, "pids.max"):
                pids_parent = candidate
    if memory_parent is not None:
        return CgroupLayout(1, memory_parent, pids_parent)
    return None


def resolve(guard: str) -> str:
    """The memory path a sandbox uses here: "cgroup" or "watchdog"."""
    if guard not in GUARDS:
        raise MemoryGuardUnavailable(f"unknown memory guard {guard!r}; choose one of {', '.join(GUARDS)}")
    if guard == "watchdog":
        return "watchdog"
    if cgroup_layout() is not None:
        return "cgroup"
    if guard == "cgroup":
        raise MemoryGuardUnavailable("no usable memory cgroup here (the grader must be root, with the memory "
                                     "controller on cgroup v2 or v1): use --memory-guard watchdog or auto")
    return "watchdog"


# --- the cgroup of one pool uid -------------------------------------------------------------------


def _kill_tasks(directory: Path) -> None:
    try:
        pids = [int(p) for p in (directory / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _remove(directory: Path, wait: float = 5.0) -> bool:
    """Kill what is in the cgroup, wait until it is empty, remove it. False if it could not be removed in time."""
    if not directory.exists():
        return True
    deadline = time.monotonic() + wait
    while True:
        _kill_tasks(directory)
        try:
            directory.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return False
        time.sleep(0.005)


def _write(path: Path, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


class UidCgroup:
    """The memory (and pids) cgroup of one pool uid, for the sandbox that holds the uid now."""

    def __init__(self, layout: CgroupLayout, uid: int, memory_bytes: int, processes: int):
        self.layout, self.uid = layout, uid
        name = f"{PREFIX}{uid}"
        self.memory_dir = layout.memory_parent / name
        self.pids_dir = layout.pids_parent / name if layout.pids_parent is not None else None
        self.memory_bytes, self.processes = memory_bytes, processes
        self._fds: list[int] = []

    def create(self) -> "UidCgroup":
        """A fresh cgroup for the uid: a leftover of a crashed grader is emptied and removed first."""
        for directory in filter(None, (self.memory_dir, self.pids_dir)):
            _remove(directory)
            directory.mkdir(exist_ok=True)
        if self.layout.version == 2:
            _write(self.memory_dir / "memory.max", self.memory_bytes)
            if (self.memory_dir / "memory.swap.max").exists():
                _write(self.memory_dir / "memory.swap.max", 0)
            if (self.memory_dir / "pids.max").exists():
                _write(self.memory_dir / "pids.max", self.processes)
        else:
            _write(self.memory_dir / "memory.limit_in_bytes", self.memory_bytes)
            if (self.memory_dir / "memory.memsw.limit_in_bytes").exists():  # no swap beyond the budget
                _write(self.memory_dir / "memory.memsw.limit_in_bytes", self.memory_bytes)
            if self.pids_dir is not None:
                _write(self.pids_dir / "pids.max", self.processes)
        return self

    def procs_fds(self) -> list[int]:
        """Descriptors through which the sandbox's first process enters the cgroups (it writes "0", itself, before
        anything else): `cgroup.procs` on cgroup v2, `tasks` on v1. That process is a fresh fork of the warm parent,
        with one thread: moving its thread moves all of it, and everything it starts is born inside. On v1 the kernel
        moves one thread that moves itself without the global lock a whole process's move takes (its write waits for
        an RCU grace period: 6 ms median, up to 18 ms, per sandbox here; a thread's, 0.05 ms). v2 has no such file
        outside threaded cgroups."""
        name = "cgroup.procs" if self.layout.version == 2 else "tasks"
        if not self._fds:
            for directory in filter(None, (self.memory_dir, self.pids_dir)):
                self._fds.append(os.open(directory / name, os.O_WRONLY | os.O_CLOEXEC))
        return list(self._fds)

    def oom_kills(self) -> int:
        """How many processes the kernel killed for passing the cgroup's limit."""
        name = "memory.events" if self.layout.version == 2 else "memory.oom_control"
        try:
            for line in (self.memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def unreclaimable_bytes(self) -> int:
        """Anonymous and shared-memory (tmpfs) pages of the cgroup: what the kernel cannot give back without swap.
        Once they fill the limit the kernel thrashes on the rest for seconds before its OOM killer acts."""
        keys = ("anon", "shmem") if self.layout.version == 2 else ("total_rss", "total_shmem")
        total = 0
        try:
            for line in (self.memory_dir / "memory.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key in keys:
                    total += int(value)
        except (OSError, ValueError):
            pass
        return total

    def peak_bytes(self) -> int:
        name = "memory.peak" if self.layout.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.memory_dir / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return 0

    def kill(self) -> None:
        _kill_tasks(self.memory_dir)

    def remove(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []
        for directory in filter(None, (self.memory_dir, self.pids_dir)):
            _remove(directory)


# --- the watchdog ---------------------------------------------------------------------------------


def smaps_rollup(pid: int) -> dict[str, int]:
    """A process's /proc/PID/smaps_rollup: field -> KiB (Pss, Anonymous, AnonHugePages, Private_Dirty, ...); empty
    if it is gone."""
    fields = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[0].endswith(b":") and parts[2] == b"kB":
                    fields[parts[0][:-1].decode("ascii", "replace")] = int(parts[1])
    except (OSError, ValueError):
        return {}
    return fields


def pss_bytes(pid: int) -> int:
    """The proportional set size of one process (shared pages split among their sharers), 0 if it is gone."""
    return smaps_rollup(pid).get("Pss", 0) * 1024


def descendants(root: int) -> set[int]:
    """Every process below `root` (one pass over /proc)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                parents[int(entry.name)] = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier and pid not in found}
        found |= frontier
    return found


GUARD_START_WAIT = 10.0  # seconds for the guard's thread to run


class MemoryGuard:
    """Watches one sandbox: `exceeded` is set (and every process of the submission killed) once it is over budget.

    `processes()` says which processes are the submission's; `cgroup` (if any) has the kernel enforce the budget,
    and then the guard only watches its OOM count."""

    def __init__(self, budget: int, processes, kill, cgroup: UidCgroup | None = None):
        self.budget, self._processes, self._kill, self.cgroup = budget, processes, kill, cgroup
        self.exceeded = threading.Event()
        self.peak = 0
        self.exceeded_at: float | None = None  # time.monotonic() when it was seen over budget
        self._stop = threading.Event()
        self._thread: Background | None = None

    @property
    def path(self) -> str:
        return "cgroup" if self.cgroup is not None else "watchdog"

    def start(self) -> "MemoryGuard":
        # never waits forever on itself (threads.py); a guard that cannot run ends the sandbox's start: MemoryError
        self._thread = Background(self._watch, "memory-guard").start(wait=GUARD_START_WAIT)
        return self

    def check(self) -> bool:
        """One look: True if the submission is over its budget (then it has been killed)."""
        if self.exceeded.is_set():
            return True
        if self.cgroup is not None:
            over = self.cgroup.oom_kills() > 0 or self.cgroup.unreclaimable_bytes() >= FULL * self.budget
        else:
            total = sum(pss_bytes(pid) for pid in self._processes())
            self.peak = max(self.peak, total)
            over = total > self.budget
        if over:
            self.exceeded_at = time.monotonic()
            self.exceeded.set()
            self.kill()
        return over

    def kill(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill()
        try:
            self._kill()
        except Exception:  # noqa: BLE001 (the sandbox may be gone already)
            pass

    def _watch(self):
        interval = CGROUP_INTERVAL if self.cgroup is not None else WATCH_INTERVAL
        while not self._stop.wait(interval):
            try:
                if self.check():
                    return
            except Exception:  # noqa: BLE001 (a look that failed is retried at the next tick)
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and not self._thread.is_current():
            self._thread.join(timeout=2.0)
        self._thread = None
