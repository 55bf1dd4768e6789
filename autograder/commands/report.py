"""`autograde report`: the reports, the summary and the exports again from OUT/results/, without grading."""

from pathlib import Path

from autograder.class_run import GradingRunError, gradebook_students, write_exports
from autograder.intake.handin import HandInError, show_hand_answers_after_due
from autograder.recording.class_record import ClassRecord, ClassState, roster_of
from autograder.recording.locking import LockedError, run_locks
from autograder.recording.outputs import ResultStore, nbgrader_folder_name
from autograder.recording.feedback import write_feedback, write_report
from autograder.run import no_results


def rerender(out: Path, course: Path | None = None, notes: list[str] | None = None) -> int:
    """Reports, summary and exports again from OUT/results/, without grading; the roster from the course's
    gradebook (--course), else the gradebook the last `grade` used, else the roster it saw. With --course, the
    reports show the right hand answers after the due date as the course's c.Autograde.show_hand_answers_after_due
    says now; without it, as it said when each result was graded."""
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to re-render: OUT is not made (nor a lock file in it)
        raise no_results(out)
    if course is not None and not Path(course).is_dir():
        raise GradingRunError(f"--course {course}: no such folder")
    try:
        with run_locks("autograde report", out, (course / "gradebook.db") if course else None):
            return _rerender(out, course, notes if notes is not None else [])
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None


def _rerender(out: Path, course: Path | None, notes: list[str]) -> int:
    store = ResultStore(out)
    results = store.all()
    if not results:
        raise no_results(out)
    state = ClassState.load(out)
    gradebook = (course / "gradebook.db") if course else Path(state.gradebook) if state.gradebook else out / "gradebook.db"
    students = gradebook_students(gradebook)
    roster = roster_of(students, state.added_students) if students else list(state.roster)
    show_answers = None
    if course is not None:  # the course's setting now, not the one its results were graded under
        try:
            show_answers = show_hand_answers_after_due(course)
        except HandInError as exc:
            raise GradingRunError(str(exc)) from None
    for result in results:
        if show_answers is not None and result.handin is not None:
            result.handin.show_answers_after_due = show_answers
        html = write_report(out, result)
        if course is not None and (not roster or result.student_id in roster):  # not on the roster: no feedback
            folder = course / "submitted" / nbgrader_folder_name(result.student_id) / result.assignment_id
            write_feedback(course / "feedback", result, folder, f"{result.assignment_id}.ipynb", html)
    record = ClassRecord(results, roster, set(state.not_found), state.conflicts)
    write_exports(out, record)
    notes += record.lines(out)  # what grades.csv leaves out and what it keeps unseen, as `grade` prints it
    return len(results)
