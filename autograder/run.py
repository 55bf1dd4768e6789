"""`autograde grade`: the class run, holding the locks of OUT and of the gradebook (a second run stops), its
stages run in the order autograder.pipeline lists them (autograder.class_run: the stages and their state).
Resumable: a run killed at any point and started again grades exactly what has no result file under the same key
yet.
"""

from pathlib import Path

from autograder.assignments import assignment_ids as course_assignments
from autograder.class_run import (  # noqa: F401 (the names callers take from here: the run's options and errors)
    ClassRun, GradingInterrupted, GradingRunError, RunOptions, interrupted_message,
)
from autograder.intake.discovery import course_root
from autograder.recording.locking import LockedError, gradebook_lock, out_lock, run_locks
from autograder.run_summary import RunSummary  # noqa: F401 (also the callers')


def resolve_assignments(names: list[str]) -> list[str]:
    if not names:
        raise GradingRunError("name at least one assignment, or `all`")
    if "all" in names:
        return list(course_assignments())
    unknown = [n for n in names if n not in course_assignments()]
    if unknown:
        raise GradingRunError(f"no such assignment: {', '.join(unknown)}; the assignments are: {', '.join(course_assignments())} "
                              "(or `all`)")
    return list(dict.fromkeys(names))


def run_grading(opts: RunOptions, progress: bool = False, progress_interval: float | None = None) -> RunSummary:
    """Find, grade, record and export, holding the locks of OUT and of the gradebook (a second run stops).
    `progress`: a bar on a terminal, else a line every `progress_interval` seconds (autograder.progress)."""
    assignment_ids = resolve_assignments(opts.assignments)
    if not Path(opts.submissions).exists():  # before OUT is made: a mistyped path leaves nothing behind
        raise GradingRunError(f"{opts.submissions}: no such file or directory; pass the folder that holds the "
                              "submissions (nbgrader's submitted/), a folder of .ipynb files, or a .zip")
    out = Path(opts.out)
    made = _first_missing(out)  # OUT (and the folders above it) this run makes: unmade if it ends with nothing there
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GradingRunError(f"cannot create the output folder {out}: {exc.strerror}") from None
    course = course_root(Path(opts.submissions)) if Path(opts.submissions).is_dir() else None
    gradebook_path = Path(opts.gradebook or (course / "gradebook.db" if course else out / "gradebook.db"))
    try:
        with run_locks(f"autograde grade {' '.join(assignment_ids)}", out, gradebook_path):
            return run_stages(ClassRun(opts, assignment_ids, out, course, gradebook_path, progress,
                                       progress_interval))
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None
    finally:
        if made is not None:
            _unmake(out, made, gradebook_path)


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` (itself included) that does not exist yet; None if it exists."""
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


def _unmake(out: Path, top: Path, gradebook: Path) -> None:
    """OUT made by a run that wrote nothing there (a dry run, nothing found, a setting refused): its lock files
    removed, and OUT and the folders made for it up to `top`, if they are empty then."""
    locks = {out_lock(out), gradebook_lock(gradebook)}
    try:
        if any(entry not in locks for entry in out.iterdir()):
            return
        for lock in locks:
            if lock.parent == out:
                lock.unlink(missing_ok=True)
        folder = out
        while True:
            folder.rmdir()  # only an empty one
            if folder == top:
                return
            folder = folder.parent
    except OSError:
        return


def no_results(out: Path, what: str = "results") -> GradingRunError:
    return GradingRunError(f"no stored {what} in {out / 'results'}: run `autograde grade` first", exit_code=1)


def run_stages(run: ClassRun) -> RunSummary:
    """The class stages (autograder.pipeline.CLASS_STAGES), in order, over `run`; the one that sets the summary
    ends the run (a dry run ends after its settings). Whatever a failing stage leaves open (the gradebook's
    transaction, the workers, a warm sandbox parent) is closed as it fails."""
    from autograder.pipeline import CLASS_STAGES

    with run.stack:
        for stage in CLASS_STAGES:
            stage.function()(run)
            if run.summary is not None:
                return run.summary
    raise AssertionError("no stage of the class run ended it")  # the last stage, export, sets the summary
