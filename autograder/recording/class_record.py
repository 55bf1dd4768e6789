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

A submitter who is not on a roster is graded (their report is written) and listed as "not on the roster", and is
nowhere else: not in grades.csv, not in the gradebook (autograder.run), so `autograde extension` refuses them and a
second OUT on the same gradebook does not take them for enrolled; once the instructor adds them (`nbgrader db
student add`), the next run records them everywhere.

What needs the instructor's action (`ClassRecord.actions`): submissions that could not be graded (`error`), roster
students without a submission (`missing`), submissions with nothing answered (`unanswered`: no code added or changed;
a hand-in flag set when the notebook is read), two notebooks for one student and assignment (`conflict`) and hand answers that fit another
student's numbers (`copied`). Each is a flag in grades.csv (`<assignment>_flags`) and results.json (`flags`); the run
prints the first few of each kind, the summary has the full lists.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

from autograder.recording.outputs import atomic_write
from autograder.results import (  # noqa: F401 (the action kinds: also the callers')
    ACTION_CONFLICT, ACTION_COPIED, ACTION_ERROR, ACTION_KINDS, ACTION_MISSING, FLAG_UNANSWERED, FLAG_UNMAPPED,
    NOT_ON_ROSTER, STATUS_ERROR, SubmissionResult,
)

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


def student_entry(first_name, last_name, email) -> dict:
    """A gradebook's student as a run uses it: the email ("" when none), and whether they are named (a name or an
    email: imported by the instructor, not added by autograde)."""
    return {"email": email or "", "named": bool(first_name or last_name or email)}


def roster_of(students: dict[str, dict], added: list[str]) -> list[str]:
    """The roster from a gradebook's students (id -> {"email", "named"}): those imported (`nbgrader db student
    import` or formgrader), not those autograde added to a gradebook without a roster (unless given a name since)."""
    added_set = set(added)
    return sorted(s for s, info in students.items() if s not in added_set or info.get("named"))


ACTIONS_SHOWN = 5  # the run's output names this many of each kind; the summary lists them all


@dataclass(frozen=True)
class Action:
    """A submission (or a missing one) the instructor should look at."""

    kind: str  # one of ACTION_KINDS
    student_id: str
    assignment_id: str
    detail: str = ""  # e.g. whose numbers copied answers fit, why a conflict was not graded (English)


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
    _actions: list | None = field(default=None, init=False, repr=False, compare=False)

    def left_out(self) -> list[LeftOut]:
        roster, out = set(self.roster), []
        for r in self.results:
            if any(f.kind == FLAG_UNMAPPED for f in r.flags):
                out.append(LeftOut(r, "unmapped LMS id"))
            elif roster and r.student_id not in roster:
                out.append(LeftOut(r, NOT_ON_ROSTER))
        return out

    def assignment_ids(self) -> list[str]:
        """The assignments with a stored result, in the course's order (grades.csv's columns)."""
        from autograder.assignments import assignment_ids as course_assignments

        return [a for a in course_assignments() if any(r.assignment_id == a for r in self.results)]

    def actions(self) -> list[Action]:
        """What needs the instructor's action, by kind (ACTION_KINDS), then student and assignment: of the results
        grades.csv counts, the roster's missing submissions (of the assignments graded) and the conflicts."""
        if self._actions is not None:
            return list(self._actions)
        from autograder.reporting.copied_answers import find_borrowed_hand_answers

        counted = self.counted()
        found: list[Action] = []
        for r in counted:
            if r.status == STATUS_ERROR:
                found.append(Action(ACTION_ERROR, r.student_id, r.assignment_id, r.message.split("\n")[0][:300]))
            if any(f.kind == FLAG_UNANSWERED for f in r.flags):
                found.append(Action(FLAG_UNANSWERED, r.student_id, r.assignment_id))
        conflicted = {(s, a) for s, a, _ in self.conflicts}
        found += [Action(ACTION_CONFLICT, s, a, reason) for s, a, reason in self.conflicts]
        have = {(r.student_id, r.assignment_id) for r in self.results}
        found += [Action(ACTION_MISSING, s, a) for a in self.assignment_ids() for s in self.roster
                  if (s, a) not in have and (s, a) not in conflicted]
        found += [Action(ACTION_COPIED, b.student_id, b.assignment_id, f"fits {b.other_student_id}'s numbers")
                  for b in find_borrowed_hand_answers(counted, self.roster or None) if not b.weak]
        order = {k: i for i, k in enumerate(ACTION_KINDS)}
        self._actions = sorted(dict.fromkeys(found), key=lambda x: (order[x.kind], x.student_id, x.assignment_id))
        return list(self._actions)

    def flags(self) -> dict[tuple[str, str], list[str]]:
        """(student, assignment) -> the flag kinds of grades.csv and results.json: the hand-in's, then the actions'
        (a missing or conflicting submission has only these)."""
        flags: dict[tuple[str, str], list[str]] = {}
        for r in self.results:
            flags[(r.student_id, r.assignment_id)] = list(dict.fromkeys(f.kind for f in r.flags))
        for x in self.actions():
            kinds = flags.setdefault((x.student_id, x.assignment_id), [])
            if x.kind not in kinds:
                kinds.append(x.kind)
        return flags

    def missing(self) -> list[tuple[str, str]]:
        """(student, assignment) of the roster's missing submissions."""
        return [(x.student_id, x.assignment_id) for x in self.actions() if x.kind == ACTION_MISSING]

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
        return [f"left out of grades.csv: {x.result.student_id}/{x.result.assignment_id} ({x.reason}"
                + (f"; `nbgrader db student add {x.result.student_id}` adds them, the next `autograde grade` records "
                   "them everywhere)" if x.reason == NOT_ON_ROSTER else ")")
                for x in self.left_out()] + self.action_lines(out) + [
            f"kept: {r.student_id}/{r.assignment_id} was not among the submissions graded last; its stored result "
            f"({r.final_score:g}) still counts (`autograde forget {r.student_id} {r.assignment_id}{where}` removes it)"
            for r in self.unseen()]

    def action_lines(self, out: Path | None = None) -> list[str]:
        """The run's output of `actions`: per kind, how many and the first ACTIONS_SHOWN, and where the full lists
        are."""
        actions = self.actions()
        if not actions:
            return []
        where = (f"{out / 'summary.html'} (Needs action) and {out / 'grades.csv'} (the _flags columns)"
                 if out is not None else "summary.html (Needs action) and grades.csv (the _flags columns)")
        lines = [f"needs action: full lists in {where}"]
        for kind in ACTION_KINDS:
            these = [x for x in actions if x.kind == kind]
            if not these:
                continue
            shown = ", ".join(f"{x.student_id}/{x.assignment_id}" + (f" ({x.detail})" if kind == ACTION_COPIED else "")
                              for x in these[:ACTIONS_SHOWN])
            more = f", ... ({len(these)} in all)" if len(these) > ACTIONS_SHOWN else ""
            lines.append(f"  {kind} ({len(these)}): {shown}{more}")
        return lines
