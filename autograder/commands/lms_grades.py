"""`autograde lms-grades`: the LMS's exported gradebook filled with the final scores, and the reports as the
LMS takes them back."""

from pathlib import Path

from autograder.class_run import GradingRunError, gradebook_students
from autograder.intake import lms
from autograder.recording import lms_export
from autograder.recording.class_record import ClassRecord, ClassState, roster_of
from autograder.recording.locking import LockedError, run_locks
from autograder.recording.outputs import ResultStore
from autograder.run import resolve_assignments


def fill_lms_gradebook(out: Path, assignment: str, lms_gradebook: Path, column: str | None = None) -> "lms_export.FillReport":
    """The LMS's exported gradebook with the assignment's final scores (what grades.csv counts), written to
    OUT/lms/<its name>; its students mapped to the roster as `--lms-roster` maps them."""
    (assignment_id,) = resolve_assignments([assignment])
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to fill in: OUT is not made
        raise GradingRunError(f"no stored results of {assignment_id} in {out / 'results'}: grade it first", exit_code=1)
    try:
        with run_locks("autograde lms-grades", out):
            results = ResultStore(out).all()
            if not any(r.assignment_id == assignment_id for r in results):
                raise GradingRunError(f"no stored results of {assignment_id} in {out / 'results'}: grade it first",
                                      exit_code=1)
            state = ClassState.load(out)
            students = gradebook_students(Path(state.gradebook)) if state.gradebook else {}
            roster = roster_of(students, state.added_students) if students else list(state.roster)
            record = ClassRecord(results, roster, set(state.not_found), state.conflicts)
            scores = {r.student_id: r.final_score for r in record.counted() if r.assignment_id == assignment_id}
            export = lms.read_export(lms_gradebook)
            emails = {s: students.get(s, {}).get("email", "") for s in roster}
            filled = lms_export.fill_gradebook(export, assignment_id, scores, emails,
                                        out / "lms" / Path(lms_gradebook).name, column)
            from autograder.recording.outputs import safe_name

            reports = {r.student_id: out / "reports" / safe_name(r.student_id) / f"{assignment_id}.html"
                       for r in results if r.assignment_id == assignment_id}
            filled.feedback = lms_export.lms_feedback(export, assignment_id, reports, emails, out / "lms")
            return filled
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None
    except lms.LmsError as exc:
        raise GradingRunError(str(exc)) from None
