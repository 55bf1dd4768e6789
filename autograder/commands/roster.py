"""`autograde roster`: the course's roster into nbgrader's gradebook (the roster is nbgrader's)."""

from pathlib import Path

from autograder.class_run import GradingRunError


def import_roster(course: Path, roster_csv: Path) -> None:
    """`nbgrader db student import` into the course's gradebook (the roster is nbgrader's)."""
    from autograder.recording.gradebook import run_nbgrader

    done = run_nbgrader(["db", "student", "import", str(roster_csv)], course)
    if done.returncode != 0:
        raise GradingRunError(f"nbgrader db student import failed: {done.stderr[-500:]}")
