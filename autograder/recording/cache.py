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

# What decides a score, besides the notebook: the checks, the references, the source notebook (points),
# and the engine that runs them. Reports and exports are not here: `autograde report` re-renders those.
GRADING_CODE = (
    "autograder/checks/*.py", "autograder/engine.py", "autograder/running/notebook_run.py",
    "autograder/intake/reading.py", "autograder/intake/skipping.py", "autograder/assignments.py", "autograder/course.py",
    "autograder/results.py", "autograder/running/sandbox/runner.py", "autograder/running/sandbox/wire.py",
    "autograder/running/sandbox/process.py", "autograder/running/sandbox/tiers.py", "autograder/running/sandbox/reply.py",
    "autograder/intake/validate.py", "solutions/*.py",
)


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
