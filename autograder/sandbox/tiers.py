"""Isolation tiers, strongest first, and the probe that tells which this machine can run.

- bubblewrap: its own user, PID, network (loopback only), IPC and mount namespaces; a read-only
  view of /usr, the sandbox environment and the runner, a size-capped tmpfs as the only writable
  place; started as an unprivileged uid (as root: a uid from the pool, dropped with setpriv before
  bwrap starts, since bwrap started as root keeps its capabilities). Plus rlimits.
- landlock: where user namespaces are blocked. Landlock limits reads to /usr, the environment and
  the runner and writes to a scratch folder, forbids TCP (ABI >= 4) and signals out of the domain
  (ABI >= 6); as root also a PID and network namespace (unshare) and a pool uid. Plus rlimits.
- rlimits: rlimits and a wall-clock timeout only (a pool uid as root). Must be asked for
  explicitly, and is named in every result and report.
"""

import ctypes
import functools
import os
import shutil
import subprocess
from dataclasses import dataclass

TIERS = ("bubblewrap", "landlock", "rlimits")

PROTECTS = {
    "bubblewrap": "file system (read-only /usr and runtime, private tmpfs), network, processes and signals "
                  "(own PID namespace, killed as a whole), other students (own uid), resources (rlimits)",
    "landlock": "file system (Landlock: reads limited to the runtime, writes to scratch), TCP network, signals "
                "out of the sandbox (Landlock ABI >= 6), other students (own uid when root), resources (rlimits)",
    "rlimits": "resources only (memory, CPU, file size, processes) and a wall-clock timeout: no file-system, "
               "network or process isolation",
}


class SandboxUnavailable(Exception):
    pass


def landlock_abi() -> int:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return max(int(libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))), 0)
    except OSError:
        return 0


def drop_privileges(uid: int | None) -> list[str]:
    """setpriv to a pool uid when the grader is root; nothing otherwise."""
    if uid is None:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SandboxUnavailable("running as root needs `setpriv` (util-linux) to drop to a sandbox uid")
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]


@dataclass(frozen=True)
class LaunchSpec:
    """What the sandbox needs to know to start: paths outside and the runner's config."""

    python: str
    site: str
    runner_dir: str
    scratch: str | None  # a host folder for the tiers without a private tmpfs
    scratch_bytes: int
    env: dict


def bubblewrap_command(spec: LaunchSpec, uid: int | None, config: dict) -> tuple[list[str], dict]:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable("bubblewrap is not installed (apt-get install bubblewrap)")
    config = dict(config, site="/sandbox/site", workdir="/tmp/work")
    cmd = drop_privileges(uid) + [
        bwrap, "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--ro-bind", spec.site, "/sandbox/site",
        "--ro-bind", os.path.join(spec.runner_dir, "runner.py"), "/sandbox/runner.py",
        "--ro-bind", os.path.join(spec.runner_dir, "wire.py"), "/sandbox/wire.py",
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(spec.scratch_bytes), "--tmpfs", "/tmp", "--dir", "/tmp/work", "--chdir", "/tmp/work",
        "--clearenv",
    ]
    if not spec.python.startswith("/usr/"):
        prefix = os.path.dirname(os.path.dirname(os.path.realpath(spec.python)))
        cmd += ["--ro-bind", prefix, prefix]
    for key, value in dict(spec.env, HOME="/tmp/work", MPLCONFIGDIR="/tmp/work").items():
        cmd += ["--setenv", key, value]
    return cmd + [spec.python, "-I", "-S", "/sandbox/runner.py"], config


def landlock_command(spec: LaunchSpec, uid: int | None, config: dict) -> tuple[list[str], dict]:
    if landlock_abi() < 1:
        raise SandboxUnavailable("Landlock is not enabled in this kernel")
    python_prefix = os.path.dirname(os.path.dirname(os.path.realpath(spec.python)))
    config = dict(config, site=spec.site, workdir=spec.scratch, landlock={
        "read": ["/usr", "/lib", "/lib64", "/etc/ld.so.cache", "/dev/null", "/dev/urandom", python_prefix,
                 spec.site, spec.runner_dir],
        "write": [spec.scratch],
    })
    namespaces = []
    if os.geteuid() == 0 and shutil.which("unshare"):
        namespaces = [shutil.which("unshare"), "--pid", "--fork", "--kill-child", "--net", "--ipc", "--uts", "--"]
    return namespaces + drop_privileges(uid) + [spec.python, "-I", "-S", os.path.join(spec.runner_dir, "runner.py")], config


def rlimits_command(spec: LaunchSpec, uid: int | None, config: dict) -> tuple[list[str], dict]:
    config = dict(config, site=spec.site, workdir=spec.scratch)
    return drop_privileges(uid) + [spec.python, "-I", "-S", os.path.join(spec.runner_dir, "runner.py")], config


COMMANDS = {"bubblewrap": bubblewrap_command, "landlock": landlock_command, "rlimits": rlimits_command}


@functools.lru_cache(maxsize=None)
def bubblewrap_works(uid: int | None) -> bool:
    """Start bwrap once as the sandbox would (as `uid`) and see that it runs a program."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        cmd = drop_privileges(uid) + [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
                                      "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
                                      "--proc", "/proc", "--dev", "/dev", "/usr/bin/true"]
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired, SandboxUnavailable):
        return False


def available(probe_uid: int | None) -> list[str]:
    """The tiers this machine can run, strongest first (rlimits is always possible)."""
    tiers = []
    if bubblewrap_works(probe_uid):
        tiers.append("bubblewrap")
    if landlock_abi() >= 1:
        tiers.append("landlock")
    tiers.append("rlimits")
    return tiers


def choose(requested: str | None, allow_weak: bool, probe_uid: int | None) -> str:
    """The tier to use: the requested one (if it runs here), else the strongest that runs here.

    The rlimits tier is chosen only when asked for by name or allowed with `allow_weak`.
    """
    tiers = available(probe_uid)
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
