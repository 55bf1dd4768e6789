"""One student's report for one assignment: a self-contained HTML page in Chinese.

    from autograder.reporting.student_page import render_report
    html = render_report(result)                       # a SubmissionResult

Each part with its checks, each diagnosed mistake once per part with its title, the student's own hand numbers,
the hand-in time and policy, the cells that failed. No scripts; everything from the student is autoescaped text
(autograder.reporting.formatting).
"""

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import PurePath


from autograder import __version__, assignments
from autograder.assignments import has_hand
from autograder.catalogue import explain, heading
from autograder.results import (
    FLAG_IDENTITY, FLAG_TIME, FLAG_UNANSWERED, FLAG_UNMAPPED, FLAG_WRONG_ASSIGNMENT, STATUS_ERROR, CheckResult,
    PartResult, SubmissionResult,
)
from solutions.student_params import student_params
from autograder.reporting.copied_answers import _right_answers
from autograder.intake.local_time import display_of
from autograder.reporting.formatting import (
    AssignmentInfo, CELL_ERROR_HINTS, TIER_NOTES, _env, _score_class, assignment_info, clip, fmt_duration_zh,
    fmt_points, fmt_value, safe_details,
)

# --- the student's report --------------------------------------------------------------------------------


@dataclass
class CheckView:
    passed: bool
    name: str
    description: str
    message: str
    diagnosis: str | None
    points: str
    max_points: str
    details: list
    lost: str = "0"  # points lost, as shown ("0.5")


@dataclass
class MistakeView:
    """One diagnosed mistake of a part, shown once: its title, its explanation, the checks it explains."""

    name: str
    title: str
    explanation: str
    checks: list  # CheckView of the failed checks it explains
    anchor: str = ""  # the id of its box on the page
    lost: float = 0.0  # the points of the checks it explains


@dataclass
class PartView:
    grade_id: str
    label: str  # "第 1 部分" or ""
    title: str  # may hold `code`
    score: str
    max_score: str
    fraction: float
    answered: bool
    message: str
    written: bool
    written_answer: str | None
    checks: list
    hand: dict | None = None  # params / typed answers, in the part of the hand computation
    mistakes: list = field(default_factory=list)  # MistakeView: each diagnosed mistake once per part
    pending: bool = False  # graded by hand, not yet graded ("待批改")
    comment: str = ""  # the instructor's comment (formgrader)
    lost: float = 0.0  # points lost in this part (0 while it waits for the instructor)

    @property
    def undiagnosed(self) -> list:
        """Failed checks no mistake explains: each says what it checked."""
        return [c for c in self.checks if not c.passed and not c.diagnosis]

    @property
    def passed(self) -> list:
        return [c for c in self.checks if c.passed]

    @property
    def passed_points(self) -> str:
        return fmt_points(sum(float(c.max_points) for c in self.passed))


@dataclass
class FixFirst:
    """What to fix first: a mistake that cost the most points (with a link to its explanation), or the part that
    lost the most when no mistake is named."""

    title: str
    anchor: str
    lost: str
    where: str  # the parts it is in ("第 2、3 部分")
    mistake: bool = True


def due_passed(result: SubmissionResult, now: datetime | None = None) -> bool:
    """Is `now` (default: the present) after the submission's due date, the student's extension included?"""
    try:  # as autograder.intake.handin stores it: "2026-12-01 18:09:00 UTC", naive UTC
        due = datetime.fromisoformat(result.handin.due.removesuffix(" UTC"))
    except (AttributeError, TypeError, ValueError):  # no hand-in, no due date, or not a time
        return False
    if due.tzinfo is not None:
        due = due.astimezone(timezone.utc).replace(tzinfo=None)
    now = now if now is not None else datetime.now(timezone.utc)
    if now.tzinfo is not None:
        now = now.astimezone(timezone.utc).replace(tzinfo=None)
    return now > due


def _hand_view(result: SubmissionResult, show_right: bool = False) -> dict | None:
    """The student's own numbers and the answers they typed; the right answers for their numbers only when
    `show_right` (the course allows it and the due date has passed)."""
    if not has_hand(result.assignment_id):
        return None
    try:
        params = student_params(result.assignment_id, result.student_id)
    except Exception:
        params = {}
    rows = []
    for name, value in params.items():
        if isinstance(value, dict):  # the choice options: letter -> text
            rows.append((name, [(str(k), fmt_value(v)) for k, v in value.items()]))
        else:
            rows.append((name, fmt_value(value)))
    right = _right_answers(result.assignment_id, result.student_id) or {}
    names = list(right)
    names += [n for n in (result.hand_answers or {}) if n not in names]
    typed = [(n, fmt_value((result.hand_answers or {}).get(n)), (result.hand_answers or {}).get(n) is not None,
              fmt_value(right[n]) if show_right and n in right else None)
             for n in names] if result.status != STATUS_ERROR else []
    if not rows and not typed:
        return None
    return {"params": rows, "typed": typed, "right_shown": show_right and any(t[3] is not None for t in typed)}


def _check_view(assignment_id: str, c: CheckResult) -> CheckView:
    return CheckView(c.passed, c.name, c.description, clip(_without_explanation(assignment_id, c)),
                     heading(assignment_id, c.diagnosis) if not c.passed else None, fmt_points(c.points),
                     fmt_points(c.max_points), safe_details(c.details), fmt_points(max(0.0, c.max_points - c.points)))


def _part_view(part: PartResult, info: AssignmentInfo, result: SubmissionResult) -> PartView:
    label, title = info.part_titles.get(part.grade_id, ("", part.grade_id))
    written = part.grade_id in info.written or part.grade_id in (result.written_answers or {})
    answer = (result.written_answers or {}).get(part.grade_id)
    message = part.message
    if result.status == STATUS_ERROR and message == result.message:
        message = "这份提交无法评分，见上方的说明"
    checks = [_check_view(result.assignment_id, c) for c in part.checks]
    return PartView(
        grade_id=part.grade_id, label=label, title=title, score=fmt_points(part.score),
        max_score=fmt_points(part.max_score),
        fraction=max(0.0, min(1.0, part.score / part.max_score)) if part.max_score > 0 else 0.0,
        answered=part.answered, message=message, written=written,
        written_answer=clip(answer) if answer and answer.strip() else None,
        checks=checks, mistakes=_mistakes(result.assignment_id, part, checks),
        pending=part.pending, comment=clip(part.comment) if part.comment else "",
        lost=0.0 if part.pending else max(0.0, part.max_score - part.score),
    )


def _without_explanation(assignment_id: str, check: CheckResult) -> str:
    """A failed check's message without its mistake's explanation (shown once for the part instead)."""
    text = explain(assignment_id, check.diagnosis) if not check.passed else ""
    if text and check.message.endswith(text):
        return check.message[:-len(text)].rstrip("。 ") or check.message
    return check.message


def _mistakes(assignment_id: str, part: PartResult, checks: list[CheckView]) -> list[MistakeView]:
    views: dict[str, MistakeView] = {}
    for c, view_of_check in zip(part.checks, checks):
        if c.passed or not c.diagnosis:
            continue
        view = views.get(c.diagnosis)
        if view is None:
            view = views[c.diagnosis] = MistakeView(c.diagnosis, heading(assignment_id, c.diagnosis),
                                                    explain(assignment_id, c.diagnosis), [],
                                                    f"mistake-{part.grade_id}-{len(views) + 1}")
        view.checks.append(view_of_check)
        view.lost += max(0.0, c.max_points - c.points)
    return list(views.values())


def _fix_first(parts: list[PartView], limit: int = 2) -> list[FixFirst]:
    """The one or two mistakes that cost the most points (over every part they appear in; ties: the first part's
    first), each linked to its first explanation; with no mistake named, the part that lost the most."""
    found: dict[str, list] = {}  # name -> [lost, order, mistake view, part labels]
    for i, part in enumerate(parts):
        for j, m in enumerate(part.mistakes):
            entry = found.setdefault(m.name, [0.0, (i, j), m, []])
            entry[0] += m.lost
            entry[3].append(part.label or part.title)
    ranked = sorted((e for e in found.values() if e[0] > 0), key=lambda e: (-e[0], e[1]))[:limit]
    if ranked:
        return [FixFirst(m.title, m.anchor, fmt_points(lost), _where(where)) for lost, _, m, where in ranked]
    worst = max((p for p in parts if p.lost > 0), key=lambda p: p.lost, default=None)  # max keeps the first of ties
    if worst is None:
        return []
    return [FixFirst(worst.title, f"part-{worst.grade_id}", fmt_points(worst.lost), _where([worst.label]),
                     mistake=False)]


_LABEL = re.compile(r"第 (\d+) 部分")


def _where(labels: list[str]) -> str:
    """["第 2 部分", "第 3 部分"] -> "第 2、3 部分"; other labels joined with "、"."""
    labels = [x for x in dict.fromkeys(labels) if x]
    numbers = [m.group(1) for m in map(_LABEL.fullmatch, labels) if m]
    if labels and len(numbers) == len(labels):
        return f"第 {'、'.join(numbers)} 部分"
    return "、".join(labels)


def _handin_view(result: SubmissionResult) -> dict | None:
    """When it was handed in, the due date, the penalty, and the flags a student should see (Chinese)."""
    h = result.handin
    if h is None:
        return None
    flags = [f.message_zh for f in h.flags if f.kind in (FLAG_IDENTITY, FLAG_TIME, FLAG_UNMAPPED,
                                                          FLAG_WRONG_ASSIGNMENT, FLAG_UNANSWERED)]
    if not (h.due or h.penalty or flags or h.lms_late):
        return None
    shown = display_of(h.timezone, h.timestamp_format).format_stored  # the course's zone, named
    return {
        "submitted_at": shown(h.submitted_at), "due": shown(h.due), "late": h.seconds_late > 0,
        "late_text": "（LMS 标记，提交时间未知）" if h.lms_late else
        fmt_duration_zh(h.seconds_late) if h.seconds_late > 0 else "",
        "lms_late": h.lms_late,
        "extension": fmt_duration_zh(h.extension_seconds) if h.extension_seconds > 0 else "",
        "raw": fmt_points(result.score), "penalty": fmt_points(h.penalty), "final": fmt_points(result.final_score),
        "policy": h.policy_zh, "flags": flags, "source_exchange": h.time_source == "exchange",
    }


def render_report(result: SubmissionResult, now: datetime | None = None, practice: list[str] | None = None) -> str:
    """One student's report for one assignment: a self-contained HTML page in Chinese; `practice`: the lines that
    mark it as a practice attempt's (autograder.service.feedback), shown above everything else.

    The right hand answers (for the student's own numbers) are shown only when the course allows it
    (c.Autograde.show_hand_answers_after_due, kept in the hand-in record) and `now` (default: the present) is after
    the due date with the student's extension."""
    info = assignment_info(result.assignment_id)
    parts = [_part_view(p, info, result) for p in result.parts]
    show_right = bool(result.handin is not None and result.handin.show_answers_after_due
                      and due_passed(result, now))
    hand = _hand_view(result, show_right)
    if hand:
        # the hand computation belongs in the part whose checks are the hand checks
        home = next((v for v in parts if assignments.is_hand_check(result.assignment_id, v.grade_id)), None)
        if home is not None:
            home.hand, hand = hand, None
    known = {p.grade_id for p in result.parts}
    extra_written = [(gid, clip(text)) for gid, text in (result.written_answers or {}).items()
                     if gid not in known and text and text.strip()]
    failed_cells = [
        {"number": c.index + 1, "grade_id": c.grade_id, "error_type": c.error_type or "Error",
         "hint": CELL_ERROR_HINTS.get(c.error_type or "", ""), "message": clip(c.error_message, 2000)}
        for c in result.cells if not c.ok
    ]
    omitted = result.cell_errors_omitted if failed_cells else 0
    error = result.status == STATUS_ERROR
    return _env.get_template("report.html.j2").render(
        r=result, title=info.title, parts=parts, hand=hand, extra_written=extra_written, failed_cells=failed_cells,
        cells_omitted=omitted, failed_count=len(failed_cells) + omitted,
        error=error, score=fmt_points(result.final_score), max_score=fmt_points(result.max_score), practice=practice,
        score_class=_score_class(result.final_score, result.max_score, error), handin=_handin_view(result),
        pending=fmt_points(result.pending_points) if result.pending_points and not error else "",
        notebook=PurePath(result.notebook).name if result.notebook else "",
        version=result.grader_version or __version__, tier=result.tier or "未知",
        tier_note=TIER_NOTES.get(result.tier, "未记录隔离方式"), weak_tier=result.tier == "rlimits",
        fix_first=[] if error else _fix_first(parts), overview=not error and bool(parts),
        all_full=not error and all(p.lost <= 0 for p in parts),
        right_shown=any(v.hand and v.hand["right_shown"] for v in parts) or bool(hand and hand["right_shown"]),
    )
