"""The service's settings: `c.AutogradeService` in the course's nbgrader_config.py, every one optional.

    c.AutogradeService.instructors_group = "instructors"  # hub group whose members (and the hub's admins) see
                                                          # the instructor's page
    c.AutogradeService.attempts_per_day = 5     # graded attempts per student and assignment per day (None: no cap)
    c.AutogradeService.attempts_total = 20      # ... in all (None: no cap)
    c.AutogradeService.feedback = "report"      # report | checks | score: what a practice attempt shows
    c.AutogradeService.practice_inputs = "attempt"  # attempt | day | fixed: when the hidden inputs change
    c.AutogradeService.hand_verdict = False     # True: say whether a hand computation is right (default: answered)
    c.AutogradeService.after_due = "refuse"     # after the due date and the student's extension: say so, grade nothing
    c.AutogradeService.rate_per_minute = 6      # submissions a student may make per minute, whatever their budget
    c.AutogradeService.assignments = {"mla": {"attempts_per_day": 3, "feedback": "checks"}}  # per assignment

An attempt counts against the budget once graded (an attempt our side could not grade is given back); attempts
still waiting count too, so that a full queue cannot hold more than the budget. Days are the course's local days
(c.NbGraderAPI.timezone).
"""

from dataclasses import dataclass, field, replace
from pathlib import Path

from autograder.intake.handin import HandInError, course_display, load_course_config
from autograder.intake.local_time import TimeDisplay, TimeDisplayError
from autograder.service.practice import ROTATIONS

SECTION = "AutogradeService"
FEEDBACK_LEVELS = ("report", "checks", "score")
AFTER_DUE = ("refuse",)
PER_ASSIGNMENT = ("attempts_per_day", "attempts_total", "feedback", "practice_inputs", "hand_verdict", "after_due")


class ServiceSettingsError(ValueError):
    """A setting the service cannot use: the message names it."""


@dataclass(frozen=True)
class AssignmentPolicy:
    attempts_per_day: int | None = 5
    attempts_total: int | None = 20
    feedback: str = "report"
    practice_inputs: str = "attempt"
    hand_verdict: bool = False
    after_due: str = "refuse"


@dataclass(frozen=True)
class ServiceSettings:
    instructors_group: str = "instructors"
    rate_per_minute: int = 6
    default: AssignmentPolicy = AssignmentPolicy()
    assignments: dict = field(default_factory=dict)  # assignment id -> AssignmentPolicy
    display: TimeDisplay = TimeDisplay()

    def policy(self, assignment_id: str) -> AssignmentPolicy:
        return self.assignments.get(assignment_id, self.default)


def _check(key: str, value, where: str):
    def bad(what: str):
        raise ServiceSettingsError(f"{where}: c.{SECTION}.{key} must be {what}, not {value!r}")

    if key in ("attempts_per_day", "attempts_total"):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            bad("a whole number >= 1 or None")
    elif key == "feedback" and value not in FEEDBACK_LEVELS:
        bad(" or ".join(repr(v) for v in FEEDBACK_LEVELS))
    elif key == "practice_inputs" and value not in ROTATIONS:
        bad(" or ".join(repr(v) for v in ROTATIONS))
    elif key == "after_due" and value not in AFTER_DUE:
        bad(" or ".join(repr(v) for v in AFTER_DUE))
    elif key == "hand_verdict" and not isinstance(value, bool):
        bad("True or False")
    elif key == "rate_per_minute" and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        bad("a whole number >= 1")
    elif key == "instructors_group" and (not isinstance(value, str) or not value.strip()):
        bad("a hub group's name")
    return value


def load_service_settings(course: Path | None, assignment_ids: list[str]) -> ServiceSettings:
    """The settings of the course's nbgrader_config.py, checked: an unknown key, an unknown assignment or a bad value
    is an error that names it."""
    where = f"{Path(course) / 'nbgrader_config.py'}" if course else "settings"
    try:
        config = load_course_config(course)
        display = course_display(course)
    except (HandInError, TimeDisplayError) as exc:
        raise ServiceSettingsError(str(exc)) from None
    section = config[SECTION] if SECTION in config else {}
    known = set(PER_ASSIGNMENT) | {"instructors_group", "rate_per_minute", "assignments"}
    unknown = sorted(set(section) - known)
    if unknown:
        raise ServiceSettingsError(f"{where}: unknown setting(s) {', '.join(f'c.{SECTION}.{k}' for k in unknown)}; "
                                   f"the settings are {', '.join(f'c.{SECTION}.{k}' for k in sorted(known))}")
    default = AssignmentPolicy(**{k: _check(k, section[k], where) for k in PER_ASSIGNMENT if k in section})
    overrides = section.get("assignments", {})
    if not isinstance(overrides, dict):
        raise ServiceSettingsError(f"{where}: c.{SECTION}.assignments must be a dict of assignment id -> settings")
    policies = {}
    for assignment_id, values in overrides.items():
        if assignment_id not in assignment_ids:
            raise ServiceSettingsError(f"{where}: c.{SECTION}.assignments: no assignment {assignment_id!r}; the "
                                       f"assignments are {', '.join(assignment_ids)}")
        if not isinstance(values, dict) or set(values) - set(PER_ASSIGNMENT):
            raise ServiceSettingsError(f"{where}: c.{SECTION}.assignments[{assignment_id!r}] must be a dict of "
                                       f"{', '.join(PER_ASSIGNMENT)}, not {values!r}")
        policies[assignment_id] = replace(default, **{k: _check(k, v, where) for k, v in values.items()})
    top = {k: _check(k, section[k], where) for k in ("instructors_group", "rate_per_minute") if k in section}
    return ServiceSettings(default=default, assignments=policies, display=display, **top)
