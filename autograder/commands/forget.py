"""`autograde forget`: the instructor's explicit removal of one stored result."""

from pathlib import Path

from autograder.class_run import GradingRunError, gradebook_students, write_exports
from autograder.recording.class_record import ClassRecord, ClassState, roster_of
from autograder.recording.locking import LockedError, run_locks
from autograder.recording.outputs import ResultStore
from autograder.run import resolve_assignments


def forget(out: Path, student_id: str, assignment: str, dry_run: bool = False) -> list[str]:
    """The instructor's explicit removal of one stored result (the only way a result leaves the exports): its
    results file, its report, its place in OUT/class.json and its submission in the gradebook the last `grade`
    used; the exports rebuilt. Returns what was (or with `dry_run`, would be) removed."""
    (assignment_id,) = resolve_assignments([assignment])
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to forget: OUT is not made
        raise GradingRunError(f"no stored result of {student_id}/{assignment_id} in {out / 'results'}", exit_code=1)
    try:
        with run_locks("autograde forget", out):
            store = ResultStore(out)
            if store.load(student_id, assignment_id) is None:
                raise GradingRunError(f"no stored result of {student_id}/{assignment_id} in {out / 'results'}",
                                      exit_code=1)
            state = ClassState.load(out)
            from autograder.recording.outputs import safe_name

            files = [p for p in (store.path(student_id, assignment_id),
                                 out / "reports" / safe_name(student_id) / f"{assignment_id}.html") if p.exists()]
            gradebook = Path(state.gradebook) if state.gradebook else None
            done = [f"removed {p}" for p in files]
            if gradebook is not None and gradebook.exists():
                done.append(f"removed {student_id}'s {assignment_id} submission from {gradebook}")
            if dry_run:
                return [line.replace("removed", "would remove", 1) for line in done]
            if gradebook is not None and gradebook.exists():
                from autograder.recording.gradebook import CourseGradebook

                book = CourseGradebook(gradebook)
                try:
                    book.gb.remove_submission(assignment_id, student_id)
                except Exception:  # nbgrader's MissingEntry: nothing of it in the gradebook
                    done.pop()
                finally:
                    book.close()
            for path in files:
                path.unlink()
            state.not_found = [k for k in state.not_found if tuple(k) != (student_id, assignment_id)]
            state.conflicts = [c for c in state.conflicts if (c[0], c[1]) != (student_id, assignment_id)]
            state.save(out)
            results = store.all()
            students = gradebook_students(gradebook) if gradebook is not None and gradebook.exists() else {}
            roster = roster_of(students, state.added_students) if students else list(state.roster)
            write_exports(out, ClassRecord(results, roster, set(state.not_found), state.conflicts))
            return done
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None
