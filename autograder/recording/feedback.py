"""The report files of one graded submission: the student's page under OUT/reports/, and the same page where
nbgrader expects feedback (feedback/<student>/<assignment>/), with the files `nbgrader release_feedback` reads."""

import os
from pathlib import Path

from autograder.recording.outputs import atomic_write, nbgrader_folder_name, safe_name
from autograder.results import FLAG_IDENTITY, SubmissionResult


def write_report(out: Path, result: SubmissionResult, html: str | None = None) -> str:
    """The student's report under OUT/reports/ (`html`: as rendered elsewhere, e.g. in a worker); returns its HTML
    (the feedback is the same page)."""
    from autograder.reporting.student_page import render_report

    html = render_report(result) if html is None else html
    atomic_write(out / "reports" / safe_name(result.student_id) / f"{result.assignment_id}.html", html, durable=False)
    return html


def feedback_page(feedback_root: Path, result: SubmissionResult, notebook_name: str | None = None) -> Path:
    """Where nbgrader's release_feedback reads the submission's report: feedback/<student>/<assignment>/<nb>.html."""
    name = Path(notebook_name).stem if notebook_name else result.assignment_id
    return feedback_root / nbgrader_folder_name(result.student_id) / result.assignment_id / f"{name}.html"


def withheld_because(result: SubmissionResult, release_flagged: bool = False) -> str | None:
    """Why the submission's report is kept out of nbgrader's feedback/ (None: it is not): the OS says someone else
    wrote it, and the instructor has not released it (--release-flagged-feedback)."""
    if release_flagged:
        return None
    identity = [f for f in result.flags if f.kind == FLAG_IDENTITY]
    return f"{identity[0].message} (identity)" if identity else None


def write_feedback(feedback_root: Path, result: SubmissionResult, submission_folder: Path | None,
                   notebook_name: str, html: str, release_flagged: bool = False) -> None:
    """The report where nbgrader expects feedback, with the files `nbgrader release_feedback` reads beside it.

    A submission the OS says someone else wrote gets no feedback here (its report would go to whoever
    made it): the instructor decides, then grades again with --release-flagged-feedback.
    """
    page = feedback_page(feedback_root, result, notebook_name)
    folder = page.parent
    if withheld_because(result, release_flagged):
        page.unlink(missing_ok=True)
        return
    atomic_write(page, html, durable=False)
    os.chmod(page, 0o644)  # release_feedback copies the mode into the exchange: students must read it
    for name in ("timestamp.txt", "submission_secret.txt"):
        source = submission_folder / name if submission_folder else None
        if source is not None and source.is_file() and not source.is_symlink():
            atomic_write(folder / name, source.read_bytes(), durable=False)
