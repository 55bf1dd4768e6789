"""The LMS's files written back: the scores into a copy of its gradebook export (`fill_gradebook`), ready to import
into the LMS, and the students' reports named as its bulk feedback routes take them (`lms_feedback`). What the
exports hold came from students (names, emails): every text cell is written through `spreadsheet_safe`."""

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from autograder.intake.lms import CANVAS, MOODLE, LmsExport, grade_column, lms_student_id, map_student
from autograder.recording.outputs import atomic_write, safe_cell


@dataclass
class FillReport:
    path: Path
    column: str
    filled: int
    unmapped: list[str]  # LMS students of the export that are not on the roster (left as they were)
    feedback: "FeedbackReport | None" = None  # the students' reports for the LMS (lms_feedback)


def fill_gradebook(export: LmsExport, assignment_id: str, scores: dict[str, float], roster: dict[str, str],
                   dest: Path, column: str | None = None) -> FillReport:
    """A copy of the LMS's export with the assignment's scores (`scores`: nbgrader id -> final score) for every
    student it maps to the roster (0 for a roster student without a score); every text cell spreadsheet-safe."""
    col = grade_column(export, assignment_id, column)
    rows = [list(r) for r in export.rows]
    filled, unmapped = 0, []
    for lms_id, index in export.student_rows.items():
        mapped = map_student(export.kind, lms_id, export, roster)
        if mapped.unmapped:
            unmapped.append(f"{export.students[lms_id].name} ({lms_id})")
            continue
        row = rows[index]
        row.extend([""] * (col + 1 - len(row)))
        row[col] = f"{round(scores.get(mapped.student_id, 0.0), 4):g}"
        filled += 1
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow([safe_cell(h) for h in export.header])
    for row in rows:
        writer.writerow([safe_cell(c) for c in row])
    atomic_write(dest, ("\ufeff" if export.bom else "") + buffer.getvalue())
    return FillReport(dest, export.header[col], filled, unmapped)


# --- reports back to the LMS's students -------------------------------------------------------------------------

# Moodle's "Upload multiple feedback files in a zip" (Assignment -> View all submissions -> Grading action): its help
# text (mod/assign/feedback/file/lang/en/assignfeedback_file.php, `feedbackzip_help`): "Feedback files will be assigned
# to students based on the participant id which should be the second part of each filename immediately after the users
# full name. This naming convention is used when downloading submissions"; its importer
# (mod/assign/feedback/file/importziplib.php, is_valid_filename_for_import) splits each path part on `_` into
# fullname_participantid_plugintype_pluginname[_rest] (with or without the trailing `_`, Moodle >= 4.1 and earlier).
# So a student's report is `<Full Name>_<participant id>_assignfeedback_file_/<assignment>.html`; the full name may hold
# no `_` (it would shift the participant id out of the second place).
MOODLE_FEEDBACK = "{name}_{participant}_assignfeedback_file_/{file}"
MOODLE_FEEDBACK_NAME = re.compile(r"^(?P<name>[^_/]+)_(?P<participant>\d{1,20})_assignfeedback_file_/(?P<file>[^/]+)$")

# Canvas's bulk route for files, "Re-Upload Submissions" (Assignment -> Download Submissions, then Re-Upload), takes
# back only the files it handed out: canvas-lms app/models/assignment.rb, infer_comment_context_from_filename, reads the
# first two numbers of `<name>_<user id>_<attachment id>_<file>` and ignores a file unless that attachment is one of
# the student's own submitted files; the file is attached as a submission comment under that attachment's own name (the
# student's .ipynb). An HTML report fits no documented bulk route; each student's report is written as its own file,
# named for the student (Canvas's name part, the user id) for a manual upload in SpeedGrader (a comment's attachment).
CANVAS_FEEDBACK = "{name}_{user}_{file}"


@dataclass
class FeedbackReport:
    path: Path  # the zip (Moodle) or folder (Canvas) written
    written: list[str]  # the LMS students who have a report in it ("name (lms id)")
    without: list[str]  # the LMS students of the export with no report (nothing graded for them)


def _lms_name(name: str, kind: str) -> str:
    """The export's name for a file name: Canvas keeps letters and digits (as its downloads do); Moodle the name
    without `_`, `/` and control characters."""
    if kind == CANVAS:
        return re.sub(r"[\W_]+", "", name) or "student"
    cleaned = re.sub(r"[_/\\\x00-\x1f\x7f]+", " ", name).strip()
    return re.sub(r"\s+", " ", cleaned)[:100] or "Participant"


def lms_feedback(export: LmsExport, assignment_id: str, reports: dict[str, Path], roster: dict[str, str],
                 dest_folder: Path) -> FeedbackReport:
    """Each LMS student's report (`reports`: graded student id -> its report file), for the LMS to take back: Moodle's
    feedback-files zip, or for Canvas one file per student. A student of the export is found under the id it was graded
    under: its nbgrader id where the export maps it to the roster (`map_student`), else its LMS id (`canvas:12345`)."""
    import zipfile

    written, without, files = [], [], []
    for lms_id in export.student_rows:
        student = export.students[lms_id]
        mapped = map_student(export.kind, lms_id, export, roster)
        report = reports.get(mapped.student_id if not mapped.unmapped else lms_student_id(export.kind, lms_id))
        label = f"{student.name} ({lms_id})"
        if report is None or not report.is_file():
            without.append(label)
            continue
        name = _lms_name(student.name, export.kind)
        pattern = MOODLE_FEEDBACK if export.kind == MOODLE else CANVAS_FEEDBACK
        files.append((pattern.format(name=name, participant=lms_id, user=lms_id, file=f"{assignment_id}.html"), report))
        written.append(label)
    if export.kind == MOODLE:
        dest = dest_folder / f"{assignment_id}-moodle-feedback.zip"
        dest.parent.mkdir(parents=True, exist_ok=True)
        partial = dest.with_name(dest.name + ".partial")
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zf:
            for member, report in files:
                zf.writestr(member, report.read_bytes())
        partial.replace(dest)
    else:
        dest = dest_folder / f"{assignment_id}-canvas-feedback"
        if dest.is_dir() and not dest.is_symlink():
            for old in dest.glob("*.html"):
                old.unlink()
        for member, report in files:
            atomic_write(dest / member, report.read_text(encoding="utf-8"))
    return FeedbackReport(dest, written, without)
