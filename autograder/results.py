"""Typed results of grading: per check, per part, per submission; JSON in and out."""

from dataclasses import asdict, dataclass, field

STATUS_GRADED = "graded"  # the notebook ran and every part was scored (whatever the score)
STATUS_ERROR = "error"  # the submission could not be graded at all (unreadable, foreign, too large)


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


@dataclass
class PartResult:
    grade_id: str
    score: float
    max_score: float
    checks: list[CheckResult]
    answered: bool = True  # False: no answer found for this part
    message: str = ""


@dataclass
class CellRun:
    """One notebook cell as it ran in the sandbox."""

    index: int  # position in the submitted notebook
    grade_id: str | None
    ok: bool
    error_type: str | None = None
    error_message: str = ""
    seconds: float = 0.0


@dataclass
class SubmissionResult:
    student_id: str
    assignment_id: str
    status: str
    score: float
    max_score: float
    parts: list[PartResult] = field(default_factory=list)
    cells: list[CellRun] = field(default_factory=list)
    message: str = ""  # why the status is what it is (Chinese for the student, with an English hint)
    tier: str = ""  # the sandbox tier the code ran under
    seed: int = 0  # the input seed of this student's checks, so a regrade reproduces the score
    grader_version: str = ""
    notebook: str = ""
    seconds: float = 0.0
    timings: dict = field(default_factory=dict)  # seconds spent reading, starting the sandbox, in cells, in checks
    hand_answers: dict = field(default_factory=dict)  # the typed hand-computation answers, as plain numbers
    written_answers: dict = field(default_factory=dict)  # grade_id -> the student's written (markdown) answer

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        data = dict(data)
        data["parts"] = [
            PartResult(**{**p, "checks": [CheckResult(**c) for c in p["checks"]]}) for p in data.get("parts", [])
        ]
        data["cells"] = [CellRun(**c) for c in data.get("cells", [])]
        return cls(**data)

    def identity(self) -> dict:
        """What "identical results" compares: no timings, no paths."""
        return {
            "student_id": self.student_id, "assignment_id": self.assignment_id, "score": self.score,
            "max_score": self.max_score, "status": self.status,
            "checks": [(c.grade_id, c.name, c.passed, c.points, c.diagnosis) for p in self.parts for c in p.checks],
        }
