"""Isolation tiers, strongest first, and the probe that tells which this machine can run.

Every tier starts one warm parent per grading worker (runner.py's zygote: torch imported once) and
forks one process per submission from it; that process confines itself before it reads the first
cell, as `child_spec` says. Where the grader is root, each submission's process drops to its own
uid from the pool (uids.py) with no capabilities left, not even in the bounding set, and
no_new_privs; its limits are rlimits (memory, CPU, file size, processes, open files) plus a
wall-clock timeout kept by the grader.

- bubblewrap: the warm parent lives in a bubblewrap view (read-only /usr, the sandbox environment
  and the runner; nothing of the repository or the course) with its own PID, network, IPC and UTS
  namespaces. Each submission's process enters fresh mount (its own size-capped tmpfs as /tmp and
  the only writable place, its own /dev/shm and /proc), PID (killed as a whole), network (not even
  loopback is up), IPC and UTS namespaces. As root, bubblewrap needs no user namespace.
- landlock: Landlock limits reads to /usr, the environment and the runner and writes to a scratch
  folder, forbids TCP (ABI >= 4) and signals out of the domain (ABI >= 6); a seccomp filter refuses
  socket(AF_UNIX) (Landlock does not mediate connect() on a pathname socket); as root also its own PID,
  network, IPC and UTS namespaces.
- rlimits: rlimits and a wall-clock timeout only (and the seccomp filter below). Must be asked for
  explicitly, and is named in every result and report.

Every tier's seccomp filter refuses the kernel key rings (add_key, request_key, keyctl: they belong to the uid,
and bubblewrap run as root makes no user namespace), and where the tier has no IPC namespace of its own, SysV
IPC and POSIX message queues. Every tier has a memory budget for all of a submission's processes together
(memory.py: its pool uid's cgroup, else a watchdog).
"""

import ctypes
import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

from autograder.running.sandbox.environment import RUNNER_FILES

TIERS = ("bubblewrap", "landlock", "rlimits")

PROTECTS = {
    "bubblewrap": "file system (read-only /usr and runtime, private tmpfs), network, processes and signals "
                  "(own PID namespace, killed as a whole), other students (own uid; kernel key rings refused by "
                  "seccomp; own IPC namespace, /tmp, /dev/shm and network namespace: SysV IPC, POSIX queues, files "
                  "and abstract sockets stay private), resources (rlimits, and a memory budget for all the "
                  "submission's processes: a cgroup where the grader can make one, else a watchdog)",
    "landlock": "file system (Landlock: reads limited to the runtime, writes to scratch), TCP network, Unix-domain "
                "sockets (seccomp refuses socket(AF_UNIX), abstract ones included), signals out of the sandbox "
                "(Landlock ABI >= 6), other students (own uid when root; kernel key rings refused by seccomp; SysV "
                "IPC and POSIX queues in an own IPC namespace as root, refused by seccomp without root), resources "
                "(rlimits, and the memory budget of all its processes: cgroup or watchdog)",
    "rlimits": "resources only (memory: rlimits and the budget of all its processes, cgroup or watchdog; CPU, file "
               "size, processes) and a wall-clock timeout; kernel key rings, SysV IPC and POSIX queues refused by "
               "seccomp; as root other students' processes (a pool uid each, whose files in /tmp, /var/tmp and "
               "/dev/shm and SysV objects are removed before reuse): no file-system or network isolation",
}


class SandboxUnavailable(Exception):
    pass


def landlock_abi() -> int:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)
    except OSError:
        return 0


@dataclass(frozen=True)
class LaunchSpec:
    """Where the sandbox's parts are on the host, and the environment of the warm parent."""

    python: str
    site: str
    runner_dir: str
    env: dict
    home: str | None = None  # a host folder for the warm parent's own files (tiers without a private /tmp)


# The warm parent (runner.py's zygote) is started once per grading worker; each submission's process
# is a fork of it that confines itself (`child_spec`) before it reads the student's first cell.
# The warm parent runs only the runner's code; it is root where the grader is, so that each child can
# enter its own namespaces and drop to its pool uid.


def bubblewrap_command(spec: LaunchSpec, root: bool, fontlist: dict[str, int] | None = None) -> list[str]:
    """The warm parent's command; `fontlist`: {matplotlib's file name: an open descriptor of its content}, copied
    into its config folder (/tmp/matplotlib) so that its matplotlib reads the list and does not build it."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
    # as root: no user namespace (the children must take real pool uids); the capabilities stay with the
    # warm parent, which runs only runner.py, and every child drops all of them before student code runs
    unshare = (["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
               if root else ["--unshare-all"])
    cmd = [
        bwrap, *unshare, "--die-with-parent", "--new-session", "--cap-add", "ALL",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin", "--perms", "0755", "--dir", "/sandbox",
        "--ro-bind", spec.site, "/sandbox/site",
        *[arg for name in RUNNER_FILES
          for arg in ("--ro-bind", os.path.join(spec.runner_dir, name), f"/sandbox/{name}")],
        "--proc", "/proc", "--dev", "/dev", "--size", str(64 * 1024**2), "--tmpfs", "/tmp", "--chdir", "/tmp",
        "--clearenv",
    ]
    if not spec.python.startswith("/usr/"):
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(spec.python)))
        cmd += ["--ro-bind", prefix, prefix]
    for key, value in dict(spec.env, HOME="/tmp", MPLCONFIGDIR="/tmp/matplotlib").items():
        cmd += ["--setenv", key, value]
    for name, fd in (fontlist or {}).items():
        cmd += ["--dir", "/tmp/matplotlib", "--file", str(fd), f"/tmp/matplotlib/{name}"]
    return cmd + [spec.python, "-I", "-S", "/sandbox/runner.py"]


def host_command(spec: LaunchSpec, root: bool, fontlist: dict[str, int] | None = None) -> list[str]:
    """The warm parent of the landlock and rlimits tiers runs on the host; its children fence themselves. (Its
    font list is written into its own folder, MPLCONFIGDIR, by the grader.)"""
    return [spec.python, "-I", "-S", os.path.join(spec.runner_dir, "runner.py")]


ZYGOTE_COMMANDS = {"bubblewrap": bubblewrap_command, "landlock": host_command, "rlimits": host_command}


def child_spec(tier: str, spec: LaunchSpec, uid: int | None, scratch: str | None, scratch_bytes: int) -> dict:
    """How one submission's process confines itself after the fork (runner.py's `_child`)."""
    root = os.geteuid() == 0
    if tier == "bubblewrap":
        return {"namespaces": ["mount", "pid", "net", "ipc", "uts"], "private_tmp": scratch_bytes,
                "workdir": "/tmp/work", "uid": uid, "site": "/sandbox/site", "refuse_syscalls": ["keys"]}
    if tier == "landlock":
        if landlock_abi() < 1:
            raise SandboxUnavailable("Landlock is not enabled in this kernel")
        python_prefix = os.path.dirname(os.path.dirname(os.path.realpath(spec.python)))
        return {"namespaces": ["pid", "net", "ipc", "uts"] if root else [], "workdir": scratch, "uid": uid,
                "site": spec.site, "landlock": {
                    "read": ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/dev/null", "/dev/urandom", python_prefix,
                             spec.site, spec.runner_dir],
                    "write": [scratch]},
                "no_unix_sockets": True,  # Landlock does not fence connect() on a pathname socket: seccomp does
                "refuse_syscalls": ["keys"] if root else ["keys", "sysv_ipc"]}  # as root: an IPC namespace
    if tier == "rlimits":
        return {"namespaces": [], "workdir": scratch, "uid": uid, "site": spec.site,
                "refuse_syscalls": ["keys", "sysv_ipc"]}
    raise SandboxUnavailable(f"unknown sandbox tier {tier!r}")


@functools.lru_cache(maxsize=None)
def bubblewrap_works() -> bool:
    """Start bwrap once as the warm parent would and see that it runs a program."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    root = os.geteuid() == 0
    unshare = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"] if root else ["--unshare-all"]
    cmd = [bwrap, *unshare, "--die-with-parent", "--cap-add", "ALL", "--ro-bind", "/usr", "/usr",
           "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev",
           "/usr/bin/true"]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def available() -> list[str]:
    """The tiers this machine can run, strongest first (rlimits is always possible)."""
    tiers = []
    if bubblewrap_works():
        tiers.append("bubblewrap")
    if landlock_abi() >= 1:
        tiers.append("landlock")
    tiers.append("rlimits")
    return tiers


def choose(requested: str | None, allow_weak: bool) -> str:
    """The tier to use: the requested one (if it runs here), else the strongest that runs here.

    The rlimits tier is chosen only when asked for by name or allowed with `allow_weak`.
    """
    tiers = available()
    if requested:
        if requested not in TIERS:
            raise SandboxUnavailable(f"unknown sandbox tier {requested!r}; choose one of {', '.join(TIERS)}")
        if requested not in tiers:
            raise SandboxUnavailable(f"sandbox tier {requested!r} does not work on this machine (available: {tiers})")
        return requested
    strong = [t for t in tiers if t != "rlimits"]
    if strong:
        return strong[0]
    if allow_weak:
        return "rlimits"
    raise SandboxUnavailable(
        "neither bubblewrap nor Landlock works here; install bubblewrap, or pass --sandbox rlimits to accept "
        "a sandbox with resource limits and a timeout only"
    )
