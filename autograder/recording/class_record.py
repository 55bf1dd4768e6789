"""What the class exports are built from: every stored result in OUT, the roster, and what stays out of grades.csv.

Whatever subset of assignments or students a run graded, results.json, grades.csv and summary.html are built from
every stored result in OUT/results/ and the roster. A stored result stays out of grades.csv (and is listed in the
summary and the run's output) when its student is not on the roster, or when it was graded under an LMS id that is
not mapped to the roster (`unmapped`). A result whose submission a later run did not find (a partial LMS download,
one group, "download selected") still counts: it is listed as kept, and leaves the exports only when the instructor
says so (`autograde forget STUDENT ASSIGNMENT`).

OUT/class.json keeps what a later `autograde report` (without --course) needs and what no stored result says:

    {"gradebook": "...", "roster": [...], "added_students": [...], "not_found": [[student, assignment], ...],
     "conflicts": [[student, assignment, reason], ...]}

`added_students` are those autograde itself put into a gradebook that had no roster (they are not a roster).
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.recording.outputs import atomic_write
from autograder.recording.results import FLAG_UNMAPPED, SubmissionResult

FILE = "class.json"


@dataclass
class ClassState:
    gradebook: str | None = None
    roster: list[str] = field(default_factory=list)
    added_students: list[str] = field(default_factory=list)
    not_found: list[tuple[str, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)

    @classmethod
    def load(cls, out: Path) -> "ClassState":
        try:
            data = json.loads((Path(out) / FILE).read_text(encoding="utf-8"))
            return cls(data.get("gradebook"), [str(s) for s in data.get("roster", [])],
                       [str(s) for s in data.get("added_students", [])],
                       [(str(s), str(a)) for s, a in data.get("not_found", [])],
                       [(str(s), str(a), str(r)) for s, a, r in data.get("conflicts", [])])
        except (OSError, ValueError, TypeError, AttributeError):
            return cls()

    def save(self, out: Path) -> None:
        data = {"gradebook": self.gradebook, "roster": sorted(self.roster), "added_students": sorted(self.added_students),
                "not_found": sorted(map(list, self.not_found)), "conflicts": sorted(map(list, self.conflicts))}
        atomic_write(Path(out) / FILE, json.dumps(data, ensure_ascii=False, indent=1))


def roster_of(students: dict[str, dict], added: list[str]) -> list[str]:
    """The roster from a gradebook's students (id -> {"email", "named"}): those imported (`nbgrader db student
    import` or formgrader), not those autograde added to a gradebook without a roster (unless given a name since)."""
    added_set = set(added)
    return sorted(s for s, info in students.items() if s not in added_set or info.get("named"))


@dataclass
class LeftOut:
    result: SubmissionResult
    reason: str  # "not on the roster", "unmapped LMS id"


@dataclass
class ClassRecord:
    results: list[SubmissionResult]  # every stored result
    roster: list[str]  # empty: no roster (then every graded student counts)
    not_found: set[tuple[str, str]] = field(default_factory=set)
    conflicts: list[tuple[str, str, str]] = field(default_factory=list)

    def left_out(self) -> list[LeftOut]:
        roster, out = set(self.roster), []
        for r in self.results:
            if any(f.kind == FLAG_UNMAPPED for f in r.flags):
                out.append(LeftOut(r, "unmapped LMS id"))
            elif roster and r.student_id not in roster:
                out.append(LeftOut(r, "not on the roster"))
        return out

    def unseen(self) -> list[SubmissionResult]:
        """Counted results whose submissions the latest run of their assignment did not find: kept, and said."""
        left = {id(x.result) for x in self.left_out()}
        return [r for r in self.results if (r.student_id, r.assignment_id) in self.not_found and id(r) not in left]

    def counted(self) -> list[SubmissionResult]:
        """The results grades.csv holds."""
        left = {id(x.result) for x in self.left_out()}
        return [r for r in self.results if id(r) not in left]

    def lines(self, out: Path | None = None) -> list[str]:
        where = f" --out {out}" if out is not None else ""
        return [f"left out of grades.csv: {x.result.student_id}/{x.result.assignment_id} ({x.reason})"
                for x in self.left_out()] + [
            f"kept: {r.student_id}/{r.assignment_id} was not among the submissions graded last; its stored result "
            f"({r.final_score:g}) still counts (`autograde forget {r.student_id} {r.assignment_id}{where}` removes it)"
            for r in self.unseen()]
