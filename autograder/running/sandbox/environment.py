"""The sandbox's own Python environment: a world-readable interpreter plus a folder holding torch.

Nothing of the course is in it: `solutions` and `autograder` are not importable there, and no path
of the repository is on its sys.path. The sandbox runs `python -I -S runner.py`, and runner.py puts
only the site folder (torch, numpy, matplotlib) and its own folder on sys.path. The files the sandbox
runs (RUNNER_FILES): runner.py (the fork server), confinement.py, probe_server.py and wire.py.

An unprivileged sandbox user can run neither a Python that lives under a private home (pyenv in
a 0700 home) nor read packages there, so the default is Debian's /usr/bin/python3.11 with the site
folder under /opt/autograde (root) or the user's cache folder (no root; then the sandbox keeps the
user's own uid anyway).
"""

import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SANDBOX_PACKAGES = ("torch==2.13.0", "numpy", "matplotlib")
RUNNER_FILES = ("runner.py", "confinement.py", "probe_server.py", "wire.py")


class SandboxEnvironmentError(Exception):
    pass


@dataclass(frozen=True)
class SandboxEnvironment:
    python: Path  # the interpreter that runs student code
    site: Path  # the folder holding torch and friends
    runner_dir: Path  # the folder holding the runner's files (RUNNER_FILES)

    @property
    def runner(self) -> Path:
        return self.runner_dir / "runner.py"


def default_site() -> Path:
    if env := os.environ.get("AUTOGRADE_SANDBOX_SITE"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/opt/autograde/sandbox-py311/site")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "autograde" / "sandbox-py311" / "site"


def default_python() -> Path:
    if env := os.environ.get("AUTOGRADE_SANDBOX_PYTHON"):
        return Path(env)
    for candidate in ("/usr/bin/python3.11", "/usr/local/bin/python3.11"):
        if os.access(candidate, os.X_OK):
            return Path(candidate)
    return Path(sys.executable)


def runner_version() -> str:
    """A digest of the runner's files: checkouts with different runners on one machine don't share a copy."""
    here = Path(__file__).parent
    digest = hashlib.sha256()
    for name in RUNNER_FILES:
        digest.update((here / name).read_bytes())
    return digest.hexdigest()[:16]


def runner_dir(site: Path | None = None) -> Path:
    """A world-readable copy of the runner's files (the checkout itself may sit in a private home)."""
    return (site or default_site()).parent / "runner" / runner_version()


def build(site: Path | None = None, python: Path | None = None, quiet: bool = True) -> SandboxEnvironment:
    """Install the sandbox packages into `site` (idempotent) and copy the runner next to it."""
    site = site or default_site()
    python = python or default_python()
    marker = site / ".autograde-packages"
    wanted = "\n".join(SANDBOX_PACKAGES)
    old_umask = os.umask(0o022)  # world-readable: the sandbox uid must read it
    try:
        if not (marker.exists() and marker.read_text() == wanted):
            site.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--upgrade",
                   "--target", str(site), *SANDBOX_PACKAGES]
            if quiet:
                cmd.insert(4, "--quiet")
            subprocess.run(cmd, check=True)
            marker.write_text(wanted)
        install_runner(runner_dir(site))
    finally:
        os.umask(old_umask)
    return locate(site, python)


def install_runner(target: Path) -> None:
    old_umask = os.umask(0o022)  # world-readable: the sandbox uid must read it
    try:
        target.mkdir(parents=True, exist_ok=True)
        here = Path(__file__).parent
        for name in RUNNER_FILES:
            data = (here / name).read_bytes()
            dest = target / name
            if not dest.exists() or dest.read_bytes() != data:
                tmp = dest.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_bytes(data)
                tmp.chmod(0o644)
                tmp.replace(dest)
    finally:
        os.umask(old_umask)


def locate(site: Path | None = None, python: Path | None = None) -> SandboxEnvironment:
    """The built environment, or a clear error saying how to build it."""
    site = site or default_site()
    python = python or default_python()
    if not (site / "torch" / "__init__.py").exists():
        raise SandboxEnvironmentError(
            f"the sandbox environment is not built ({site} has no torch): run `autograde sandbox-setup`"
        )
    runners = runner_dir(site)
    install_runner(runners)  # keep the runner in step with this checkout
    if not os.access(python, os.X_OK):
        raise SandboxEnvironmentError(f"sandbox interpreter {python} is not executable; set AUTOGRADE_SANDBOX_PYTHON")
    return SandboxEnvironment(python=python, site=site, runner_dir=runners)


def remove(site: Path | None = None) -> None:
    site = site or default_site()
    shutil.rmtree(site.parent, ignore_errors=True)
