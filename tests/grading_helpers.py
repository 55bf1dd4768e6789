"""Build submissions for the grading tests: the source notebook with edits, under a student's name."""

import os
from dataclasses import replace
from pathlib import Path

import nbformat

from autograder.examples import notebook_with_edits
from autograder.running.sandbox.process import Limits

# Small budgets: hostile cases cost seconds, not minutes.
TEST_LIMITS = Limits(cell_timeout=8.0, probe_timeout=8.0, startup_timeout=60.0, grace=2.0,
                     memory_bytes=3 * 1024**3, cpu_seconds=120)
# Smaller still for the hostile corpus (a dozen endless loops per tier); an honest cell or probe takes < 0.5 s.
# All of a submission's processes together: 1 GiB (a multi-process memory hog then fits the machine).
HOSTILE_LIMITS = replace(TEST_LIMITS, cell_timeout=5.0, probe_timeout=5.0, grace=1.0, submission_memory_bytes=1024**3)


def edited_notebook(assignment_id: str, edits, out: Path, base: Path | None = None,
                    extra_cells: list[tuple[int, str]] = ()) -> Path:
    """Write the source notebook (or `base`) with `edits` and `extra_cells` to `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook_with_edits(assignment_id, edits, list(extra_cells), base), out)
    return out


def scores_by_check(result) -> dict[str, bool]:
    return {c.name: c.passed for p in result.parts for c in p.checks}


def runner_processes(root: int) -> list[int]:
    """The Python processes of runner.py at or below `root` (the warm parent and the sandboxes forked from it; not
    bwrap, whose arguments name runner.py too), in pid order."""
    from autograder.running.sandbox.memory import descendants

    found = []
    for pid in sorted({root} | descendants(root)):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"python" in os.path.basename(argv[0]) and any(arg.endswith(b"runner.py") for arg in argv):
            found.append(pid)
    return found
