"""Real OS users for a test's students, and nbgrader run as one of them (tests/test_exchange_roundtrip.py,
tests/test_readme_workflow.py).

Only as root (as in CI): without root, or without useradd/userdel/runuser, the test skips, except under
`.ci/run`, which sets AUTOGRADE_REQUIRE_ROOT=1 so that it fails. The users get names unique to the test run
(`agt` + random hex + a suffix) and are removed afterwards, with their homes and processes, whatever happens.
The students run nbgrader from a world-readable copy for Debian's python3.11 (/opt/autograde/student-tools,
installed by scripts/dev.sh): they cannot run this venv's Python under a private home.
"""

import os
import pwd
import secrets
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

STUDENT_PYTHON = Path("/usr/bin/python3.11")
STUDENT_TOOLS = Path("/opt/autograde/student-tools")
REQUIRE_ROOT = os.environ.get("AUTOGRADE_REQUIRE_ROOT") == "1"


def require_root() -> None:
    """Skip the calling test unless it can create OS users (fail instead under AUTOGRADE_REQUIRE_ROOT=1)."""
    if os.geteuid() != 0:
        reason = "creates OS users for the students: runs only as root (as in CI)"
    elif any(shutil.which(tool) is None for tool in ("useradd", "userdel", "runuser")):
        reason = "needs useradd, userdel and runuser to create the student users"
    else:
        return
    if REQUIRE_ROOT:
        pytest.fail(reason + "; AUTOGRADE_REQUIRE_ROOT=1 (.ci/run) makes this a failure")
    pytest.skip(reason)


@contextmanager
def os_users(suffixes: list[str]):
    """One OS user with a home per suffix, named `agt<hex><suffix>` (hex unique to this call): yields the names,
    in order; removed afterwards (their processes killed first), whatever happens."""
    require_root()
    assert STUDENT_PYTHON.exists() and (STUDENT_TOOLS / "nbgrader").is_dir(), \
        "the students' nbgrader is missing: run `bash scripts/dev.sh test` (it installs /opt/autograde/student-tools)"
    prefix = "agt" + secrets.token_hex(3)
    names = [prefix + s for s in suffixes]
    made = []
    try:
        for name in names:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True, capture_output=True)
            made.append(name)
        yield names
    finally:
        for name in made:
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)  # only that user's processes
            subprocess.run(["userdel", "-r", name], capture_output=True)


def home_of(name: str) -> Path:
    return Path(pwd.getpwnam(name).pw_dir)


def give(name: str, path: Path) -> None:
    """Make `path` the student's (a file the test wrote for them)."""
    user = pwd.getpwnam(name)
    os.chown(path, user.pw_uid, user.pw_gid)


def student_config(name: str, course_id: str, exchange: Path) -> None:
    """The student's nbgrader knows the course and the exchange (~/.jupyter/nbgrader_config.py, theirs)."""
    home = home_of(name)
    subprocess.run(["runuser", "-u", name, "--", "mkdir", "-p", str(home / ".jupyter")], check=True)
    config = home / ".jupyter" / "nbgrader_config.py"
    config.write_text(f"c = get_config()\nc.CourseDirectory.course_id = {course_id!r}\n"
                      f"c.Exchange.root = {str(exchange)!r}\n")
    give(name, config)


def as_student(name: str, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    """`nbgrader ARGS` as the student, in their home, with nothing of root's environment."""
    home = home_of(name)
    env = ["env", "-i", f"HOME={home}", f"USER={name}", f"LOGNAME={name}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8",
           f"PYTHONPATH={STUDENT_TOOLS}"]
    done = subprocess.run(["runuser", "-u", name, "--", *env, str(STUDENT_PYTHON), "-m", "nbgrader", *args],
                          cwd=home, capture_output=True, text=True, timeout=300)
    if check:
        assert done.returncode == 0, f"{name}: nbgrader {' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done
