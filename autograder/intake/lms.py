"""The LMS's own files, Canvas and Moodle: whose a downloaded file is, their roster exports, their gradebooks.

    Canvas "Download Submissions":  <name>[_late]_<user id>_<attachment id>_<file the student named>[-N].ipynb
                                    (-1, -2: the student uploaded a file of that name again)
    Moodle "Download all":          <Full Name>_<participant id>_assignsubmission_file_/<file the student named>
                                    or, not in folders, <Full Name>_<participant id>_assignsubmission_file_<file>
    Canvas gradebook export (CSV):  Student, ID, SIS User ID, SIS Login ID, Section, <Assignment (id)>, ...
                                    with a "Points Possible" row under the header
    Moodle grading worksheet (CSV): Identifier ("Participant N"), Full name, Email address, Status, Grade, ...

The student is the LMS's id in the LMS's part of the name (Canvas user id, Moodle participant id), never the part
the student chose. The LMS's roster export maps it to an nbgrader id: a key column of the export (SIS Login ID,
SIS User ID, ID number, Username) equal to an nbgrader id, else the email equal to a student's email in the
gradebook, else the email's local part equal to an nbgrader id. Everything read here came from students (names,
file names, emails): it is validated here; autograder.recording.lms_export writes the scores and the reports back
in the LMS's formats (through `spreadsheet_safe`).
"""

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path


CANVAS, MOODLE = "canvas", "moodle"
LAYOUTS = ("auto", "nbgrader", "flat", CANVAS, MOODLE)
MAX_ROSTER_BYTES = 50 * 1024**2

# Canvas: the name part is the sortable name with everything but letters and digits removed
CANVAS_FILE = re.compile(r"^(?P<name>[^\W_]*)(?P<late>_(?i:late))?_(?P<user>\d{1,20})_(?P<attachment>\d{1,20})_(?P<file>.+)$")
MOODLE_PART = re.compile(r"^(?P<name>.+)_(?P<participant>\d{1,20})_assign(?P<kind>submission|feedback)_(?P<plugin>[a-z]+)_"
                         r"(?P<file>.*)$", re.S)
RESUBMITTED = re.compile(r"-(?P<n>\d{1,4})$")  # Canvas renames a re-uploaded `x.ipynb` to `x-1.ipynb`, `x-2.ipynb`
# Moodle's file manager names a second upload of `x.ipynb` into the same submission `x (1).ipynb`, then `x (2).ipynb`
MOODLE_RENAMED = re.compile(r" \((?P<n>\d{1,4})\)$")


class LmsError(Exception):
    """An LMS file cannot be read as what it should be: the message says which file and what is expected."""


@dataclass(frozen=True)
class CanvasName:
    user_id: str
    attachment_id: int
    late: bool
    file: str  # the name the student gave the file (Canvas's -N suffix kept)


def parse_canvas_name(name: str) -> CanvasName | None:
    match = CANVAS_FILE.match(name)
    if not match:
        return None
    return CanvasName(match["user"].lstrip("0") or "0", int(match["attachment"]), bool(match["late"]), match["file"])


@dataclass(frozen=True)
class MoodleName:
    full_name: str
    participant_id: str
    plugin: str  # "file" (a file submission), "onlinetext", ...; feedback folders are not submissions
    feedback: bool
    file: str  # the rest of a flat name: the name the student gave the file ("" for a folder)


def parse_moodle_name(name: str) -> MoodleName | None:
    match = MOODLE_PART.match(name)
    if not match:
        return None
    return MoodleName(match["name"], match["participant"].lstrip("0") or "0", match["plugin"],
                      match["kind"] == "feedback", match["file"])


def _upload(file: str, renamed: re.Pattern) -> tuple[str, int]:
    """The file name the student chose and which upload of that name it is, from the LMS's rename of a later upload
    (`renamed`: its suffix on the stem, the number as group `n`); the first upload is 0."""
    stem, dot, ext = file.rpartition(".")
    if not dot:
        stem, ext = file, ""
    match = renamed.search(stem)
    if match is None:
        return file, 0
    return stem[: match.start()] + dot + ext, int(match["n"])


def moodle_upload(file: str) -> tuple[str, int]:
    """Moodle's rename of a second upload into the same submission: `rmsnorm (1).ipynb` -> (`rmsnorm.ipynb`, 1)."""
    return _upload(file, MOODLE_RENAMED)


def students_own_name(file: str) -> str:
    """The file name the student chose, without Canvas's re-upload suffix: `rmsnorm-1.ipynb` -> `rmsnorm.ipynb`."""
    return _upload(file, RESUBMITTED)[0]


# --- the LMS's roster export ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LmsStudent:
    lms_id: str  # Canvas user id, or Moodle participant id
    name: str
    keys: tuple[tuple[str, str], ...]  # (column, value): the columns that may hold the nbgrader id
    email: str = ""


@dataclass
class LmsExport:
    """An LMS's roster or gradebook export, as read: its rows kept whole, to write it back."""

    kind: str  # CANVAS or MOODLE
    path: Path
    header: list[str]
    rows: list[list[str]]  # every row after the header, student or not, as read
    student_rows: dict[str, int] = field(default_factory=dict)  # lms id -> index into rows
    students: dict[str, LmsStudent] = field(default_factory=dict)
    bom: bool = False

    def column(self, name: str) -> int:
        return self.header.index(name)


CANVAS_KEYS = ("SIS Login ID", "SIS User ID", "Integration ID", "Student Number")
MOODLE_KEYS = ("ID number", "Username", "Email address")
MOODLE_IDENTIFIER = re.compile(r"^\s*(?:Participant|参与者|Teilnehmer/in|Participante)\s*(\d{1,20})\s*$", re.I)


def read_export(path: Path) -> LmsExport:
    """A Canvas gradebook CSV or a Moodle grading worksheet CSV, recognised by its header."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_ROSTER_BYTES:
            raise LmsError(f"{path}: larger than {MAX_ROSTER_BYTES // 1024**2} MiB; is it the LMS's roster export?")
        data = path.read_bytes()
    except OSError as exc:
        raise LmsError(f"{path}: cannot read it ({exc.strerror})") from None
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LmsError(f"{path}: not UTF-8 text; export it from the LMS again as CSV (UTF-8)") from None
    try:
        table = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise LmsError(f"{path}: not a readable CSV ({exc})") from None
    if not table:
        raise LmsError(f"{path}: empty; export the LMS's gradebook (Canvas) or grading worksheet (Moodle) as CSV")
    header, rows = [h.strip() for h in table[0]], table[1:]
    if {"Student", "ID"} <= set(header) and any(k in header for k in CANVAS_KEYS):
        export = LmsExport(CANVAS, path, header, rows, bom=bom)
        _canvas_students(export)
    elif {"Identifier", "Full name"} <= set(header):
        export = LmsExport(MOODLE, path, header, rows, bom=bom)
        _moodle_students(export)
    else:
        raise LmsError(f"{path}: neither a Canvas gradebook export (columns Student, ID, SIS User ID, SIS Login ID) "
                       "nor a Moodle grading worksheet (columns Identifier, Full name, Email address); header: "
                       + ", ".join(repr(h[:40]) for h in header[:8]))
    return export


def _cell(row: list[str], index: int | None) -> str:
    return row[index].strip() if index is not None and index < len(row) else ""


def _canvas_students(export: LmsExport) -> None:
    h = export.header
    id_col, name_col = h.index("ID"), h.index("Student")
    keys = [(k, h.index(k)) for k in CANVAS_KEYS if k in h]
    for i, row in enumerate(export.rows):
        lms_id = _cell(row, id_col)
        if not lms_id.isdigit() or len(lms_id) > 20:  # "Points Possible", "Manual Posting": not a student
            continue
        lms_id = lms_id.lstrip("0") or "0"
        values = tuple((k, _cell(row, c)) for k, c in keys if _cell(row, c))
        email = next((v for _, v in values if "@" in v), "")
        export.student_rows[lms_id] = i
        export.students[lms_id] = LmsStudent(lms_id, _cell(row, name_col), values, email)


def _moodle_students(export: LmsExport) -> None:
    h = export.header
    id_col, name_col = h.index("Identifier"), h.index("Full name")
    keys = [(k, h.index(k)) for k in MOODLE_KEYS if k in h]
    for i, row in enumerate(export.rows):
        match = MOODLE_IDENTIFIER.match(_cell(row, id_col))
        if not match:
            continue
        lms_id = match[1].lstrip("0") or "0"
        values = tuple((k, _cell(row, c)) for k, c in keys if _cell(row, c))
        email = dict(values).get("Email address", "")
        export.student_rows[lms_id] = i
        export.students[lms_id] = LmsStudent(lms_id, _cell(row, name_col), values, email)


@dataclass(frozen=True)
class Mapped:
    student_id: str  # the nbgrader id, or the LMS id (e.g. `canvas:12345`) when unmapped
    unmapped: bool
    how: str  # how the id was found, for --dry-run and the run's output


def lms_student_id(kind: str, lms_id: str) -> str:
    """The id an unmapped LMS student is graded under: never one an nbgrader roster would hold by chance."""
    return f"{kind}:{lms_id}"


def map_student(kind: str, lms_id: str, export: LmsExport | None, roster: dict[str, str]) -> Mapped:
    """The nbgrader id of an LMS student; `roster`: nbgrader id -> email (the gradebook's students)."""
    label = f"{'Canvas user' if kind == CANVAS else 'Moodle participant'} {lms_id}"
    fallback = lms_student_id(kind, lms_id)
    if export is None:
        return Mapped(fallback, True, f"{label}; no --lms-roster to map it to the roster")
    if export.kind != kind:
        return Mapped(fallback, True, f"{label}; --lms-roster is a {export.kind} export, not {kind}'s")
    student = export.students.get(lms_id)
    if student is None:
        return Mapped(fallback, True, f"{label}; not in {export.path.name}")
    if not roster:
        return Mapped(fallback, True, f"{label}; the gradebook has no roster to map it to (import it with "
                      "`nbgrader db student import`, or pass the course's --gradebook)")
    for column, value in student.keys:
        if value in roster:
            return Mapped(value, False, f"{label} -> {column} {value!r}")
    by_email = {email.lower(): sid for sid, email in roster.items() if email}
    if student.email and student.email.lower() in by_email:
        return Mapped(by_email[student.email.lower()], False, f"{label} -> email {student.email!r}")
    local = student.email.split("@", 1)[0] if student.email else ""
    if local and local in roster:
        return Mapped(local, False, f"{label} -> email {student.email!r} (its user name)")
    return Mapped(fallback, True, f"{label} ({student.name!r}); none of {', '.join(k for k, _ in student.keys) or 'its columns'} "
                  "is an id or email of the roster")


# --- grades back into the LMS's export -----------------------------------------------------------------------


def grade_column(export: LmsExport, assignment_id: str, column: str | None = None) -> int:
    """The column to fill: `column` if given; Moodle's "Grade"; Canvas's one column named after the assignment
    (`rmsnorm (123456)`)."""
    h = export.header
    if column is not None:
        if column not in h:
            raise LmsError(f"{export.path}: no column {column!r}; the columns are: {', '.join(h)}")
        return h.index(column)
    if export.kind == MOODLE:
        if "Grade" not in h:
            raise LmsError(f"{export.path}: no Grade column; download the grading worksheet again")
        return h.index("Grade")
    candidates = [i for i, name in enumerate(h)
                  if re.sub(r"\s*\(\d+\)\s*$", "", name).strip().lower() == assignment_id.lower()]
    if not candidates:
        candidates = [i for i, name in enumerate(h) if assignment_id.lower() in name.lower() and i > 4]
    if len(candidates) != 1:
        which = "no column" if not candidates else "several columns"
        raise LmsError(f"{export.path}: {which} named after {assignment_id!r}; name the assignment's column with "
                       "--lms-column (e.g. --lms-column \"RMSNorm (123456)\")")
    return candidates[0]
