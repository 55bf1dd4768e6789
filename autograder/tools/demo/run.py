"""`autograde demo`: the bundled example class built as an nbgrader course and graded, what the README's first
command shows."""

import shutil
from pathlib import Path

from autograder.commands.roster import import_roster
from autograder.run import GradingRunError, RunOptions, RunSummary, run_grading


DEMO_LIMITS = dict(cell_timeout=10.0, probe_timeout=10.0)  # the hostile student's endless loop costs 10 s, not 30


def run_demo(out: Path, tier: str | None = None) -> RunSummary:
    """The bundled example class as an nbgrader course, graded: what the README's first command shows."""
    from autograder.tools.demo.build import DEMO_MARKER, build_demo_course

    from autograder.jobs.executors import default_workers

    try:  # a bad $AUTOGRADE_WORKERS stops before anything is removed
        workers = default_workers()
    except ValueError as exc:
        raise GradingRunError(str(exc)) from None
    out = Path(out)
    if (out / DEMO_MARKER).exists():  # a previous demo: start its grading afresh
        for name in ("autograde", "feedback"):
            shutil.rmtree(out / name, ignore_errors=True)
        (out / "gradebook.db").unlink(missing_ok=True)
    try:
        demo = build_demo_course(out)
    except FileExistsError as exc:
        raise GradingRunError(str(exc)) from None
    import_roster(demo.root, demo.roster_csv)

    return run_grading(RunOptions(assignments=["all"], submissions=demo.root / "submitted",
                                  out=demo.root / "autograde", tier=tier, workers=workers, **DEMO_LIMITS),
                       progress=True)
