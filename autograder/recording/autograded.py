"""The autograded notebook, where nbgrader's formgrader and `generate_feedback` read it.

nbgrader's own autograde leaves `autograded/<student>/<assignment>/<notebook>.ipynb` (and the submission's
timestamp.txt); formgrader shows each submission from there, written answers included, to grade by hand.
The notebook is the student's, as submitted and graded (its outputs never ran here: the grader runs student code only
in the sandbox and keeps nothing it printed): the bytes the engine read, parsed and graded, and only those; a
submission that could not be read, or whose file has changed since it was graded, gets none.
"""

import hashlib
from pathlib import Path

from autograder.intake.discovery import FoundSubmission
from autograder.recording.outputs import atomic_write
from autograder.intake.reading import UnreadableNotebook, load_notebook_bytes
from autograder.results import STATUS_ERROR, SubmissionResult


def autograded_folder(course: Path, student_id: str, assignment_id: str) -> Path:
    from autograder.recording.outputs import nbgrader_folder_name

    return Path(course) / "autograded" / nbgrader_folder_name(student_id) / assignment_id


def autograded_missing(course: Path, result: SubmissionResult) -> bool:
    """Is the autograded notebook `write_autograded` leaves for `result` gone (nbgrader removes it when its own
    Autograde fails or is refused)? A submission that could not be graded has none."""
    folder = autograded_folder(course, result.student_id, result.assignment_id)
    return result.status != STATUS_ERROR and not (folder / f"{result.assignment_id}.ipynb").is_file()


def write_autograded(course: Path, result: SubmissionResult, found: FoundSubmission | None) -> None:
    if found is None:
        return  # a result kept from an earlier run whose submission is not in this run: leave its files
    folder = autograded_folder(course, result.student_id, result.assignment_id)
    page = folder / f"{result.assignment_id}.ipynb"
    data = None
    if result.status != STATUS_ERROR:
        try:
            data = load_notebook_bytes(found.notebook)
        except UnreadableNotebook:
            pass
    if data is not None and hashlib.sha256(data).hexdigest() != result.graded_sha256:
        # not the bytes that were graded (replaced since, or not said): formgrader would show another notebook's
        # written answers beside these scores. None until the submission is graded again (or kept and found so)
        data = None
    if data is None:
        page.unlink(missing_ok=True)
        return
    atomic_write(page, data, durable=False)
    page.chmod(0o644)
    timestamp = found.folder / "timestamp.txt" if found.folder else None
    if timestamp is not None and timestamp.is_file() and not timestamp.is_symlink():
        atomic_write(folder / "timestamp.txt", timestamp.read_bytes()[:1000], durable=False)
