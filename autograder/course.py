"""The course: where its files are, its secret, and the per-student seed of the hidden inputs."""

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from autograder import REPO_ROOT

# `c.Autograde.allow_unsandboxed_nbgrader = True` in nbgrader_config.py lets nbgrader's own Autograde run student code
# with no sandbox (autograder.recording.nbgrader_guard); a setting of c.Autograde that reading the course's settings
# accepts (autograder.intake.handin). Here, where both read it without importing nbconvert.
UNSANDBOXED_NBGRADER_FLAG = "allow_unsandboxed_nbgrader"

SECRET_ENV = "AUTOGRADE_SECRET"
SECRET_FILE = ".autograde-secret"


def course_secret(root: Path = REPO_ROOT) -> bytes:
    """The secret that, with the student id, seeds the hidden inputs; kept out of the repository.

    From $AUTOGRADE_SECRET, else from `<root>/.autograde-secret` (created on first use, mode 600,
    git-ignored). Keep it for the whole term: a regrade with another secret draws other inputs.
    """
    if value := os.environ.get(SECRET_ENV):
        return value.encode()
    path = root / SECRET_FILE
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        token = secrets.token_hex(32).encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(token + b"\n")
        return token


def student_seed(secret: bytes, assignment_id: str, student_id: str) -> int:
    """A 63-bit seed, different for every (assignment, student), unguessable without the secret."""
    digest = hmac.new(secret, f"{assignment_id}\n{student_id}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1
