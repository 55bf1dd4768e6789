"""Typed results of grading: per check, per part, per submission; JSON in and out."""

import re
from dataclasses import asdict, dataclass, field

STATUS_GRADED = "graded"  # the notebook ran and every part was scored (whatever the score)
STATUS_ERROR = "error"  # the submission could not be graded at all (unreadable, foreign, too large)

# What one result keeps of its cells: a notebook of 40,000 failing cells must not make a result (or its report)
# of 80 MB. The first MAX_CELL_ERRORS failing cells are kept with their messages (each at most MAX_CELL_MESSAGE
# characters, cut visibly), the rest only counted (SubmissionResult.cell_errors_omitted); cells that ran without
# error are kept while fewer than MAX_CELLS_KEPT are.
MAX_CELL_ERRORS = 50
MAX_CELL_MESSAGE = 2000
MAX_CELLS_KEPT = 500
_SHA256 = re.compile(r"|[0-9a-f]{64}")  # a graded_sha256: a hex digest, or "" (nothing read)


@dataclass
class CheckResult:
    name: str  # the check's function name, stable across regrades
    grade_id: str  # the part (grade cell) it scores
    passed: bool
    points: float  # earned: max_points if passed, else 0
    max_points: float
    description: str  # what the check verifies, for the student (Chinese)
    message: str  # the outcome for the student (Chinese)
    details: dict = field(default_factory=dict)  # shapes, dtypes, max abs error, tolerance; never inputs or expected values
    diagnosis: str | None = None  # the catalogued mistake the output matches, if any
    seconds: float = 0.0
    crash: str | None = None  # the check raised on this submission's values: what (for the instructor)
    check_bug: bool = False  # ... and raised on the reference's output too: a bug of the check, not the student's


@dataclass
class PartResult:
    grade_id: str
    score: float
    max_score: float
    checks: list[CheckResult]
    answered: bool = True  # False: no answer found for this part
    message: str = ""
    by_hand: bool = False  # graded by the instructor (a written answer), never by the checks
    manual_score: float | None = None  # the instructor's score from the gradebook (formgrader); overrides the checks
    comment: str = ""  # the instructor's comment from the gradebook (formgrader)

    @property
    def auto_score(self) -> float | None:
        """What the checks gave (the gradebook's auto score); None for a part graded by hand."""
        return None if self.by_hand else sum(c.points for c in self.checks)

    @property
    def pending(self) -> bool:
        """Graded by hand, and the instructor has not yet given a score ("待批改")."""
        return self.by_hand and self.manual_score is None and self.max_score > 0


@dataclass
class CellRun:
    """One notebook cell as it ran in the sandbox."""

    index: int  # position in the submitted notebook
    grade_id: str | None
    ok: bool
    error_type: str | None = None
    error_message: str = ""
    seconds: float = 0.0


def bounded_cells(runs: list[CellRun]) -> tuple[list[CellRun], int]:
    """The cells a result keeps (in notebook order) and how many failing cells it leaves out."""
    kept, failing, omitted = [], 0, 0
    for run in runs:
        if not run.ok:
            if failing < MAX_CELL_ERRORS:
                kept.append(run)
                failing += 1
            else:
                omitted += 1
        elif len(kept) < MAX_CELLS_KEPT:
            kept.append(run)
    return kept, omitted


@dataclass
class Flag:
    """Something about how a submission was handed in that the instructor should look at (grading still ran)."""

    kind: str  # FLAG_IDENTITY, FLAG_TIME, FLAG_UNVERIFIED, FLAG_ID, FLAG_UNMAPPED, FLAG_WRONG_ASSIGNMENT, ...
    message: str  # for the instructor (English)
    message_zh: str  # for the student's report (Chinese)


FLAG_IDENTITY = "identity"  # the operating system says someone else wrote it
FLAG_TIME = "time"  # the student-written timestamp.txt disagrees with when the exchange saw it land
FLAG_UNVERIFIED = "unverified"  # an exchange is configured but the submission's inbound folder is not there
FLAG_ID = "id"  # the student id found for it was not printable UTF-8: graded under an escaped id
FLAG_UNMAPPED = "unmapped"  # an LMS id not mapped to nbgrader's roster: graded under the LMS id, kept out of grades.csv
FLAG_WRONG_ASSIGNMENT = "wrong_assignment"  # the notebook's grade cells are another assignment's
FLAG_FEEDBACK_WITHHELD = "feedback_withheld"  # identity-flagged: its report is not put into nbgrader's feedback/
FLAG_UNANSWERED = "unanswered"  # no code added or changed, written answers as released: the student answered nothing

# what the instructor should look at (autograder.recording.class_record.Action), in this order; and why a stored
# result is left out of grades.csv
ACTION_ERROR, ACTION_MISSING, ACTION_CONFLICT, ACTION_COPIED = "error", "missing", "conflict", "copied"
ACTION_KINDS = (ACTION_ERROR, ACTION_MISSING, FLAG_UNANSWERED, ACTION_CONFLICT, ACTION_COPIED)
NOT_ON_ROSTER = "not on the roster"


@dataclass
class HandIn:
    """How and when a submission was handed in, and what lateness costs (autograder.intake.handin)."""

    submitted_at: str | None = None  # the time used (ISO 8601, UTC), None when unknown
    # the same time to the microsecond (ISO 8601, naive UTC), as the gradebook stores it: nbgrader's own reading of
    # timestamp.txt when that is the time used (formgrader compares the two exactly), else the observed time
    submitted_exact: str | None = None
    time_source: str = "none"  # "timestamp.txt", "exchange" (the collector-observed time) or "none"
    student_timestamp: str | None = None  # what timestamp.txt says (ISO 8601, UTC)
    observed_at: str | None = None  # when the exchange saw it land (ISO 8601, UTC)
    submitter: str | None = None  # the OS user who wrote it in the exchange's inbound folder
    inbound: str | None = None  # that folder's name
    due: str | None = None  # the due date with the student's extension (ISO 8601, UTC)
    extension_seconds: float = 0.0
    seconds_late: float = 0.0
    penalty: float = 0.0  # points taken off the raw score; never more than the raw score
    policy: str = "none"  # the late policy, described (English)
    policy_zh: str = ""  # the same for the student (Chinese)
    flags: list[Flag] = field(default_factory=list)
    lms_late: bool = False  # the LMS marked it late (Canvas's `_late`) without saying when it was handed in
    # the course's display zone and format (nbgrader's c.NbGraderAPI.timezone, .timestamp_format): pages show times so
    timezone: str = "UTC"
    timestamp_format: str = "%Y-%m-%d %H:%M:%S %Z"
    # the course lets reports rendered after the due date (with the extension) show the right hand answers for the
    # student's own numbers (c.Autograde.show_hand_answers_after_due; autograder.reporting.student_page)
    show_answers_after_due: bool = False

    @classmethod
    def from_dict(cls, data: dict) -> "HandIn":
        return cls(**{**data, "flags": [Flag(**f) for f in data.get("flags", [])]})


@dataclass
class SubmissionResult:
    student_id: str
    assignment_id: str
    status: str
    score: float
    max_score: float
    parts: list[PartResult] = field(default_factory=list)
    cells: list[CellRun] = field(default_factory=list)  # bounded: see bounded_cells
    cell_errors_omitted: int = 0  # failing cells beyond the first MAX_CELL_ERRORS: counted, not kept
    skipped_cells: list[int] = field(default_factory=list)  # demo cells left unchanged, not run (intake.skipping)
    message: str = ""  # why the status is what it is (Chinese for the student, with an English hint)
    tier: str = ""  # the sandbox tier the code ran under
    seed: int = 0  # the input seed of this student's checks, so a regrade reproduces the score
    grader_version: str = ""
    notebook: str = ""
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)  # seconds spent reading, starting the sandbox, in cells, in checks
    hand_answers: dict = field(default_factory=dict)  # the typed hand-computation answers, as plain numbers
    written_answers: dict = field(default_factory=dict)  # grade_id -> the student's written (markdown) answer
    handin: HandIn | None = None  # set by the grading run (autograder.intake.handin), not by the engine
    infrastructure_error: bool = False  # not graded for a reason of ours (a worker died): never kept in the cache
    # the sha256 of the notebook's bytes as the engine read them to grade ("": none could be read; None: not said,
    # the engine's own error or a result stored by an older grader): the cache keeps a result only under the digest
    # of what it graded, and never one that does not say (autograder.recording.rendered.kept_under)
    graded_sha256: str | None = None

    @property
    def penalty(self) -> float:
        return self.handin.penalty if self.handin else 0.0

    @property
    def final_score(self) -> float:
        """The score after the late penalty (`score` is the raw score the checks gave)."""
        return max(0.0, self.score - self.penalty)

    @property
    def flags(self) -> list[Flag]:
        return self.handin.flags if self.handin else []

    @property
    def graded_max_score(self) -> float:
        """The maximum of what has been graded so far: `max_score` without the points still pending."""
        return self.max_score - self.pending_points

    @property
    def pending_points(self) -> float:
        """Points of the parts still waiting for the instructor's grade (not in `score` yet)."""
        return sum(p.max_score for p in self.parts if p.pending)

    def apply_manual_grades(self, grades: dict[str, tuple[float | None, str]]) -> bool:
        """Take the instructor's scores and comments (grade_id -> (manual score, comment), from the gradebook):
        a manual score replaces the part's score, the raw score is summed again. Returns whether anything changed."""
        before = [(p.score, p.manual_score, p.comment) for p in self.parts], self.score
        for part in self.parts:
            part.manual_score, part.comment = grades.get(part.grade_id, (None, ""))
            part.score = float(part.manual_score) if part.manual_score is not None else (part.auto_score or 0.0)
        if self.parts:
            self.score = sum(p.score for p in self.parts)
        return before != ([(p.score, p.manual_score, p.comment) for p in self.parts], self.score)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        data = dict(data)
        data["parts"] = [
            PartResult(**{**p, "checks": [CheckResult(**c) for c in p["checks"]]}) for p in data.get("parts", [])
        ]
        data["cells"] = [CellRun(**c) for c in data.get("cells", [])]
        data["handin"] = HandIn.from_dict(data["handin"]) if data.get("handin") else None
        graded = data.get("graded_sha256")
        if graded is not None and not (isinstance(graded, str) and _SHA256.fullmatch(graded)):
            data["graded_sha256"] = None  # not a digest: the result does not say what it graded
        return cls(**data)

    def identity(self) -> dict:
        """What "identical results" compares: no timings, no paths."""
        return {
            "student_id": self.student_id, "assignment_id": self.assignment_id, "score": self.score,
            "max_score": self.max_score, "status": self.status,
            "checks": [(c.grade_id, c.name, c.passed, c.points, c.diagnosis) for p in self.parts for c in p.checks],
        }


MAX_RESULT_BYTES = 2 * 1024**2  # a stored result (its JSON) stays under this, whatever the submission held


def bound_size(result: SubmissionResult, limit: int = MAX_RESULT_BYTES) -> SubmissionResult:
    """Make `result` fit `limit` bytes of JSON in place (the caps where each value enters keep it far below; this
    is the last guard): texts of cells, checks and answers cut shorter and check details dropped, step by step, each
    cut said with a visible "…（已截断）". Returns the result."""
    import json

    from autograder.intake.validate import CUT, clipped

    def size() -> int:
        return len(json.dumps(result.to_dict(), ensure_ascii=True, default=str))

    for chars in (500, 100):
        if size() <= limit:
            return result
        for cell in result.cells:
            cell.error_message = clipped(cell.error_message, chars)
        for part in result.parts:
            part.message = clipped(part.message, 4 * chars)
            for check in part.checks:
                check.message = clipped(check.message, 4 * chars)
                check.crash = clipped(check.crash, 4 * chars) if check.crash else check.crash
                check.details = {CUT: ""} if check.details else {}
        result.written_answers = {k: clipped(v, 4 * chars) for k, v in result.written_answers.items()}
        result.hand_answers = {k: v if isinstance(v, (int, float)) or v is None else clipped(str(v), chars)
                               for k, v in result.hand_answers.items()}
        result.message = clipped(result.message, 4 * chars)
    if size() > limit:  # still too big: keep what a score needs
        result.cells = [c for c in result.cells if not c.ok][:10]
        result.skipped_cells = result.skipped_cells[:1000]
        result.timings = {}
    return result
