"""One student's report for one assignment: a self-contained HTML page in Chinese.

    from autograder.reporting.student_page import render_report
    html = render_report(result)                       # a SubmissionResult

Each part with its checks, each diagnosed mistake once per part with its title, the student's own hand numbers,
the hand-in time and policy, the cells that failed. No scripts; everything from the student is autoescaped text
(autograder.reporting.formatting).
"""

from dataclasses import dataclass, field
from pathlib import PurePath


from autograder import __version__, assignments
from autograder.assignments import has_hand
from autograder.checks.diagnosis import explain, heading
from autograder.recording.results import (
    FLAG_IDENTITY, FLAG_TIME, FLAG_UNANSWERED, FLAG_UNMAPPED, FLAG_WRONG_ASSIGNMENT, STATUS_ERROR, CheckResult,
    PartResult, SubmissionResult,
)
from solutions.student_params import student_params
from autograder.reporting.copied_answers import _right_answers
from autograder.reporting.local_time import display_of
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


@dataclass
class MistakeView:
    """One diagnosed mistake of a part, shown once: its title, its explanation, the checks it explains."""

    name: str
    title: str
    explanation: str
    checks: list  # descriptions of the failed checks it explains


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



def _hand_view(result: SubmissionResult) -> dict | None:
    """The student's own numbers and the answers they typed (never the right answers)."""
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
    names = list(_right_answers(result.assignment_id, result.student_id) or {})
    names += [n for n in (result.hand_answers or {}) if n not in names]
    typed = [(n, fmt_value((result.hand_answers or {}).get(n)), (result.hand_answers or {}).get(n) is not None)
             for n in names] if result.status != STATUS_ERROR else []
    if not rows and not typed:
        return None
    return {"params": rows, "typed": typed}


def _part_view(part: PartResult, info: AssignmentInfo, result: SubmissionResult) -> PartView:
    label, title = info.part_titles.get(part.grade_id, ("", part.grade_id))
    written = part.grade_id in info.written or part.grade_id in (result.written_answers or {})
    answer = (result.written_answers or {}).get(part.grade_id)
    message = part.message
    if result.status == STATUS_ERROR and message == result.message:
        message = "这份提交无法评分，见上方的说明"
    return PartView(
        grade_id=part.grade_id, label=label, title=title, score=fmt_points(part.score),
        max_score=fmt_points(part.max_score),
        fraction=max(0.0, min(1.0, part.score / part.max_score)) if part.max_score > 0 else 0.0,
        answered=part.answered, message=message, written=written,
        written_answer=clip(answer) if answer and answer.strip() else None,
        checks=[CheckView(c.passed, c.name, c.description, clip(_without_explanation(result.assignment_id, c)),
                          heading(result.assignment_id, c.diagnosis) if not c.passed else None, fmt_points(c.points),
                          fmt_points(c.max_points), safe_details(c.details)) for c in part.checks],
        mistakes=_mistakes(result.assignment_id, part),
        pending=part.pending, comment=clip(part.comment) if part.comment else "",
    )


def _without_explanation(assignment_id: str, check: CheckResult) -> str:
    """A failed check's message without its mistake's explanation (shown once for the part instead)."""
    text = explain(assignment_id, check.diagnosis) if not check.passed else ""
    if text and check.message.endswith(text):
        return check.message[:-len(text)].rstrip("。 ") or check.message
    return check.message


def _mistakes(assignment_id: str, part: PartResult) -> list[MistakeView]:
    views: dict[str, MistakeView] = {}
    for c in part.checks:
        if c.passed or not c.diagnosis:
            continue
        view = views.get(c.diagnosis)
        if view is None:
            view = views[c.diagnosis] = MistakeView(c.diagnosis, heading(assignment_id, c.diagnosis),
                                                    explain(assignment_id, c.diagnosis), [])
        view.checks.append(c.description)
    return list(views.values())


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


def render_report(result: SubmissionResult) -> str:
    """One student's report for one assignment: a self-contained HTML page in Chinese."""
    info = assignment_info(result.assignment_id)
    parts = [_part_view(p, info, result) for p in result.parts]
    hand = _hand_view(result)
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
        error=error, score=fmt_points(result.final_score), max_score=fmt_points(result.max_score),
        score_class=_score_class(result.final_score, result.max_score, error), handin=_handin_view(result),
        pending=fmt_points(result.pending_points) if result.pending_points and not error else "",
        notebook=PurePath(result.notebook).name if result.notebook else "",
        version=result.grader_version or __version__, tier=result.tier or "未知",
        tier_note=TIER_NOTES.get(result.tier, "未记录隔离方式"), weak_tier=result.tier == "rlimits",
    )
