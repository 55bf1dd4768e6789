"""The regrade cache's key: a submission is graded again only when something that decides its score changed.

A stored result is reused when its key equals the key of the submission now: the same notebook
bytes, the same student id (the inputs are drawn from it), the same checks, references, source
notebook and grading code, the same grader version, limits, sandbox tier, convention credit and
course secret. `autograde grade --force` regrades regardless.
"""

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from autograder import REPO_ROOT, __version__

# What decides a score, besides the notebook: the checks and the mistake catalogue they name mistakes from, the
# references and their hand computations, the source notebook (points), and the engine and sandbox that run them
# (every file the sandbox runs: the fork server and what it imports, environment.RUNNER_FILES). Reports and exports
# are not here: `autograde report` re-renders those. tests/test_regrade_cache_code.py: every module the grading
# imports is matched here or named in NOT_GRADING_CODE with why it decides no score.
GRADING_CODE = (
    "autograder/checks/*.py", "autograder/catalogue/*.py", "autograder/engine.py", "autograder/running/*.py",
    "autograder/running/sandbox/*.py", "autograder/intake/reading.py", "autograder/intake/skipping.py",
    "autograder/intake/validate.py", "autograder/assignments.py", "autograder/course.py", "autograder/results.py",
    "solutions/*.py", "solutions/hand/*.py",
)

# Modules the grading imports that decide no score, and why (the test above fails on one missing from both).
NOT_GRADING_CODE = {
    "autograder/__init__.py": "the version and the repository root; the version is in the key as a setting",
    "autograder/intake/__init__.py": "the package's docstring",
}


@lru_cache(maxsize=None)
def _code_digest(root: Path, assignment_id: str) -> str:
    digest = hashlib.sha256()
    paths = sorted({p for pattern in GRADING_CODE for p in root.glob(pattern)})
    paths.append(root / "assignments" / assignment_id / f"{assignment_id}.ipynb")
    for path in paths:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() if path.exists() else b"<missing>")
    return digest.hexdigest()


def grading_key(assignment_id: str, tier: str, limits: dict, convention_credit: float, secret: bytes,
                root: Path = REPO_ROOT, run_all_cells: bool = False) -> str:
    """Everything but the submission that decides a score in `assignment_id`."""
    settings = json.dumps({"version": __version__, "tier": tier, "limits": limits,
                           "convention_credit": convention_credit, "run_all_cells": run_all_cells,
                           "secret": hashlib.sha256(secret).hexdigest()}, sort_keys=True)
    return hashlib.sha256(f"{_code_digest(Path(root), assignment_id)}\0{settings}".encode()).hexdigest()


def submission_key(grading: str, student_id: str, notebook_sha256: str | None) -> str | None:
    """The cache key of one submission; None (never reused) when its notebook could not be read."""
    if notebook_sha256 is None:
        return None
    return hashlib.sha256(f"{grading}\0{student_id}\0{notebook_sha256}".encode()).hexdigest()
