"""Render results as HTML: one student's report (Chinese) and the class summary (English, for the instructor).

    from autograder.report import render_report, render_summary, find_borrowed_hand_answers
    html = render_report(result)                       # a SubmissionResult
    html = render_summary(results, roster=["alice", "bob"])

Rendering only: no grading, no file discovery. Everything that came from a student (outputs, error
messages, written answers, typed hand answers, even the student id) reaches the page through Jinja2
with autoescaping on: it is text, never markup. The only markup made here is the score plot, an SVG
that matplotlib draws from numbers alone. Check details are whitelisted (`SAFE_DETAIL_KEYS`); the
seed, the inputs and the expected values are never rendered. Pages are self-contained: inline CSS and no
external resources; the reports have no scripts, the summary one small inline script (sorting and filtering its
table of students, allowed by its hash in the page's Content-Security-Policy) that reads no student text as markup.
"""

import base64
import functools
import hashlib
import io
import math
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import PurePath
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from autograder import __version__, assignments
from autograder.assignments import assignment_ids, has_hand
from autograder.diagnosis import explain, heading
from autograder.results import (FLAG_IDENTITY, FLAG_TIME, FLAG_UNMAPPED, FLAG_WRONG_ASSIGNMENT, STATUS_ERROR,
                                CheckResult, PartResult, SubmissionResult)
from autograder.sandbox.tiers import PROTECTS
from solutions.student_params import student_answers, student_params

# The only detail keys a report may show: nothing that could carry an input or an expected value.
SAFE_DETAIL_KEYS = ("shape", "expected_shape", "dtype", "max_abs_error", "tolerance")
DETAIL_LABELS = {"shape": "你的形状", "expected_shape": "应有形状", "dtype": "dtype",
                 "max_abs_error": "最大绝对误差", "tolerance": "容限"}

# Checks of the hand computations (typed numbers, the choice letter): by name, as in autograder/checks.
HAND_REL_TOL = 5e-4  # four significant figures, as the hand checks (autograder.checks.HAND)

# Cells that went wrong in a way the instructor should look at (the sandbox killed or skipped them).
SANDBOX_TROUBLE = ("Timeout", "Crash", "NotRun")
CELL_ERROR_HINTS = {
    "Timeout": "超时：这个单元格运行超过了时间限制，已被终止（是否有死循环，或计算量太大？）",
    "Crash": "崩溃：运行这个单元格时进程异常退出（例如内存用尽），已被跳过",
    "NotRun": "未运行：沙箱多次重启后放弃，这个单元格没有运行",
}

# What each isolation tier protects against (autograder.sandbox.tiers.PROTECTS, for the student, in Chinese).
TIER_NOTES = {
    "bubblewrap": "独立的用户、进程、网络和文件系统命名空间（只读的系统文件、私有临时目录、无网络），外加资源限制",
    "landlock": "Landlock 限制文件读写、禁止 TCP 网络和向沙箱外发信号，外加独立用户和资源限制",
    "rlimits": "只有资源限制（内存、CPU、文件大小、进程数）和超时：没有文件系统、网络或进程隔离",
}

MAX_TEXT = 4000  # characters of one student-written text shown (error messages, written answers)

_env = Environment(
    loader=PackageLoader("autograder", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


# --- formatting -------------------------------------------------------------------------------------------


def fmt_points(x) -> str:
    """Points as a person writes them: 10, 1.5, 1.25."""
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return str(x)
    return f"{round(float(x), 2):g}"


def fmt_value(value) -> str:
    """A number, list, string or None from a student's hand answers or their parameters, as plain text."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.10g}" if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt_value(v) for v in value) + "]"
    return clip(str(value), 300)


def fmt_detail(key: str, value) -> str:
    if key == "max_abs_error" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:.3g}"
    if key == "tolerance" and isinstance(value, float):
        return f"相对误差 {value:g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(str(v) for v in value) + "]" + ("（0 维张量）" if key.endswith("shape") and not value else "")
    return clip(str(value), 200)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= limit else text[:limit] + f" …（已截断，共 {len(text)} 个字符）"


def code_segments(text: str) -> list[tuple[str, bool]]:
    """'`rms_norm` 函数' -> [('rms_norm', True), (' 函数', False)]: inline code without trusting markup."""
    pieces = str(text).split("`")
    if len(pieces) % 2 == 0:  # an unpaired backtick: plain text
        return [(str(text), False)] if text else []
    return [(piece, i % 2 == 1) for i, piece in enumerate(pieces) if piece]


def safe_details(details: dict) -> list[tuple[str, str]]:
    """(label, text) for the whitelisted detail keys only, in a fixed order."""
    return [(DETAIL_LABELS[k], fmt_detail(k, details[k])) for k in SAFE_DETAIL_KEYS if k in (details or {})]


_env.filters["segments"] = code_segments


# --- the assignment's titles, from the source notebook ---------------------------------------------------


@dataclass(frozen=True)
class AssignmentInfo:
    title: str  # "作业 1：RMSNorm —— 只做缩放的归一化", or the id
    part_titles: dict  # grade_id -> (label "第 1 部分", title "手算 RMSNorm")
    written: frozenset  # grade ids of written (markdown) parts
    order: tuple  # grade ids in notebook order


_PART_HEADING = re.compile(r"^##\s+(第\s*\d+\s*部分)\s*[：:]\s*(.+?)\s*$")
_POINTS_SUFFIX = re.compile(r"（[^（）]*分[^（）]*）$")


@functools.lru_cache(maxsize=None)
def assignment_info(assignment_id: str) -> AssignmentInfo:
    """Titles of the assignment and its parts from the headings of its source notebook (best effort)."""
    try:
        import nbformat

        from autograder.assignments import load_assignment

        assignment = load_assignment(assignment_id)
        nb = nbformat.read(assignment.source, as_version=4)
    except Exception:  # an unknown assignment or an unreadable source: fall back to the ids
        return AssignmentInfo(assignment_id, {}, frozenset(), ())
    title, heading, part_titles = assignment_id, None, {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# ") and title == assignment_id:
                    title = line[2:].strip()
                match = _PART_HEADING.match(line)
                if match:
                    heading = (re.sub(r"\s+", " ", match.group(1)), _POINTS_SUFFIX.sub("", match.group(2)).strip())
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("grade") and heading and grade_id not in part_titles:
            part_titles[grade_id] = heading
    return AssignmentInfo(title, part_titles, frozenset(p.grade_id for p in assignment.parts if p.written),
                          tuple(p.grade_id for p in assignment.parts))


def assignment_order(assignment_id: str) -> tuple:
    known = assignment_ids()
    return (known.index(assignment_id) if assignment_id in known else len(known), assignment_id)


# --- hand computations -----------------------------------------------------------------------------------


def is_hand_check(assignment_id: str, check: CheckResult) -> bool:
    """A check of a part the assignment's record declares a hand computation."""
    return assignments.is_hand_check(assignment_id, check.grade_id)


def _fits(typed, right) -> bool:
    """A typed answer fits a right answer: numbers within HAND_REL_TOL relative, strings exactly."""
    if isinstance(typed, str) or isinstance(right, str):
        return isinstance(typed, str) and isinstance(right, str) and typed == right
    if isinstance(typed, (list, tuple)) and isinstance(right, (list, tuple)):
        return len(typed) == len(right) and all(_fits(a, b) for a, b in zip(typed, right))
    numbers = (int, float)
    if isinstance(typed, bool) or isinstance(right, bool) or not (isinstance(typed, numbers) and isinstance(right, numbers)):
        return False
    if not (math.isfinite(typed) and math.isfinite(right)):
        return False
    return abs(typed - right) <= HAND_REL_TOL * max(abs(right), 1e-12)


@functools.lru_cache(maxsize=4096)
def _right_answers(assignment_id: str, student_id: str) -> dict | None:
    try:
        return student_answers(assignment_id, student_id)
    except Exception:  # an empty or odd student id
        return None


def _hand_checks_failed(result: SubmissionResult) -> bool:
    hand = [c for p in result.parts for c in p.checks if is_hand_check(result.assignment_id, c)]
    if hand:
        return not all(c.passed for c in hand)
    own = _right_answers(result.assignment_id, result.student_id) or {}
    return any(v is not None and not _fits(v, own.get(k)) for k, v in result.hand_answers.items())


@dataclass(frozen=True)
class BorrowedAnswers:
    """`student_id`'s typed hand answers fit `other_student_id`'s numbers (and not their own)."""

    assignment_id: str
    student_id: str
    other_student_id: str
    matched: tuple[str, ...]  # the answer names that fit the other student's numbers
    weak: bool  # only a choice letter matched: a chance fit is likely (about 1 in 4)

    @property
    def sentence(self) -> str:
        return f"{self.student_id}'s answers fit {self.other_student_id}'s numbers"

    @property
    def sentence_zh(self) -> str:
        return f"学生 {self.student_id} 的答案与学生 {self.other_student_id} 的参数吻合"


def find_borrowed_hand_answers(results: list[SubmissionResult], roster: list[str] | None = None) -> list[BorrowedAnswers]:
    """Submissions of a hand-computation assignment whose hand checks failed and whose typed answers fit
    another student's numbers (roster and results), within 5e-4 relative per number, strings exactly.

    A fit counts only when every answer the student typed fits the other student's right answers and at
    least one of them differs from the student's own right answer (otherwise it is no evidence).
    """
    others = sorted(set(roster or ()) | {r.student_id for r in results})
    found = []
    for result in sorted(results, key=lambda r: (assignment_order(r.assignment_id), r.student_id)):
        aid = result.assignment_id
        if not has_hand(aid) or result.status == STATUS_ERROR or not _hand_checks_failed(result):
            continue
        typed = {k: v for k, v in (result.hand_answers or {}).items() if v is not None}
        own = _right_answers(aid, result.student_id) or {}
        if not typed:
            continue
        for other in others:
            if other == result.student_id:
                continue
            theirs = _right_answers(aid, other)
            if theirs is None or not all(k in theirs and _fits(v, theirs[k]) for k, v in typed.items()):
                continue
            telling = [k for k, v in typed.items() if not (k in own and _fits(theirs[k], own[k]))]
            if not telling:
                continue
            weak = all(isinstance(typed[k], str) for k in telling)
            found.append(BorrowedAnswers(aid, result.student_id, other, tuple(sorted(typed)), weak))
    return found


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


def _score_class(score: float, max_score: float, error: bool = False) -> str:
    if error:
        return "neutral"
    if max_score <= 0:
        return "neutral"
    fraction = score / max_score
    return "good" if fraction >= 0.9 else "fair" if fraction >= 0.6 else "poor"


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


def fmt_duration_zh(seconds: float) -> str:
    seconds = int(math.ceil(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days} 天" if days else "", f"{hours} 小时" if hours else "", f"{minutes} 分钟" if minutes else ""]
    text = " ".join(p for p in parts if p)
    return text or f"{secs} 秒"


def fmt_duration(seconds: float) -> str:
    seconds = int(math.ceil(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return " ".join(p for p in (f"{days}d" if days else "", f"{hours}h" if hours else "",
                                f"{minutes}m" if minutes else "") if p) or f"{secs}s"


def _handin_view(result: SubmissionResult) -> dict | None:
    """When it was handed in, the due date, the penalty, and the flags a student should see (Chinese)."""
    h = result.handin
    if h is None:
        return None
    flags = [f.message_zh for f in h.flags if f.kind in (FLAG_IDENTITY, FLAG_TIME, FLAG_UNMAPPED,
                                                          FLAG_WRONG_ASSIGNMENT)]
    if not (h.due or h.penalty or flags):
        return None
    return {
        "submitted_at": h.submitted_at, "due": h.due, "late": h.seconds_late > 0,
        "late_text": fmt_duration_zh(h.seconds_late) if h.seconds_late > 0 else "",
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
    error = result.status == STATUS_ERROR
    return _env.get_template("report.html.j2").render(
        r=result, title=info.title, parts=parts, hand=hand, extra_written=extra_written, failed_cells=failed_cells,
        error=error, score=fmt_points(result.final_score), max_score=fmt_points(result.max_score),
        score_class=_score_class(result.final_score, result.max_score, error), handin=_handin_view(result),
        pending=fmt_points(result.pending_points) if result.pending_points and not error else "",
        notebook=PurePath(result.notebook).name if result.notebook else "",
        version=result.grader_version or __version__, tier=result.tier or "未知",
        tier_note=TIER_NOTES.get(result.tier, "未记录隔离方式"), weak_tier=result.tier == "rlimits",
    )


# --- the class summary -----------------------------------------------------------------------------------


def score_plot_svg(scores: list[float], max_score: float) -> Markup:
    """A histogram of the scores as an inline <svg> (matplotlib, Agg canvas, no pyplot): numbers only."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    import matplotlib

    top = max(max_score, max(scores, default=0.0), 1.0)
    width = 1.0 if top <= 20 else top / 20
    edges = [i * width for i in range(int(math.ceil(top / width)) + 1)]
    if edges[-1] < top:
        edges.append(edges[-1] + width)
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "autograde-summary",
                                "font.family": ["DejaVu Sans", "sans-serif"], "font.size": 9}):
        fig = Figure(figsize=(6.4, 2.4))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        counts, _, bars = ax.hist(scores, bins=edges, color="#4f7cac", edgecolor="white", linewidth=1)
        for count, bar in zip(counts, bars):
            if count:
                ax.annotate(f"{int(count)}", (bar.get_x() + bar.get_width() / 2, count), ha="center", va="bottom",
                            fontsize=8, color="#333", xytext=(0, 2), textcoords="offset points")
        if scores:
            ax.axvline(statistics.mean(scores), color="#c0392b", linewidth=1.2, linestyle="--", label="mean")
            ax.axvline(statistics.median(scores), color="#27865f", linewidth=1.2, linestyle=":", label="median")
            ax.legend(frameon=False, fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=2)
        ax.set_xlim(0, edges[-1])
        ax.set_ylim(0, max(max(counts, default=0), 1) * 1.2)
        ax.set_xlabel(f"score (max {fmt_points(max_score)})")
        ax.set_ylabel("submissions")
        ax.yaxis.get_major_locator().set_params(integer=True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        fig.tight_layout()
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
    svg = buffer.getvalue()
    svg = svg[svg.index("<svg"):]  # no XML prolog or DOCTYPE inside HTML
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)  # inline SVG in HTML needs no namespace URLs
    svg = re.sub(r'<svg([^>]*?)\swidth="[^"]*"\s+height="[^"]*"', r'<svg\1', svg, count=1)  # scale with CSS
    svg = svg.replace("<svg", '<svg role="img" aria-label="score distribution"', 1)
    return Markup(svg)


@dataclass
class CheckStat:
    grade_id: str
    name: str
    description: str
    passed: int = 0
    total: int = 0
    diagnoses: Counter = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def top_diagnosis(self) -> tuple[str, int] | None:
        return self.diagnoses.most_common(1)[0] if self.diagnoses else None


def _assignment_summary(aid: str, results: list[SubmissionResult], roster: list[str] | None,
                        borrowed: list[BorrowedAnswers]) -> dict:
    info = assignment_info(aid)
    scores = [r.final_score for r in results]
    max_score = max((r.max_score for r in results), default=0.0)
    submitted = {r.student_id for r in results}
    missing = sorted(set(roster or ()) - submitted)
    stats: dict[tuple, CheckStat] = {}
    mistakes: Counter = Counter()
    mistake_checks: Counter = Counter()
    for r in results:
        if r.status == STATUS_ERROR:
            continue
        seen = set()
        for p in r.parts:
            for c in p.checks:
                stat = stats.setdefault((c.grade_id, c.name), CheckStat(c.grade_id, c.name, c.description))
                stat.total += 1
                stat.passed += c.passed
                if not c.passed and c.diagnosis:
                    stat.diagnoses[c.diagnosis] += 1
                    mistake_checks[c.diagnosis] += 1
                    seen.add(c.diagnosis)
        mistakes.update(seen)
    order = {gid: i for i, gid in enumerate(info.order)}
    check_rows = sorted(stats.values(), key=lambda s: order.get(s.grade_id, len(order)))
    trouble = []
    for r in sorted(results, key=lambda r: r.student_id):
        if r.status == STATUS_ERROR:
            trouble.append({"student": r.student_id, "kind": "error", "where": "submission", "message": clip(r.message, 500)})
        for c in r.cells:
            if not c.ok and c.error_type in SANDBOX_TROUBLE:
                trouble.append({"student": r.student_id, "kind": c.error_type, "where": f"cell {c.index + 1}"
                                + (f" ({c.grade_id})" if c.grade_id else ""), "message": clip(c.error_message, 300)})
    handins = []
    for r in sorted(results, key=lambda r: r.student_id):
        h = r.handin
        if h is not None and (h.seconds_late > 0 or h.penalty or h.flags):
            handins.append({"student": r.student_id, "submitted_at": h.submitted_at or "—",
                            "source": h.time_source, "submitter": h.submitter or "—", "due": h.due or "—",
                            "late": fmt_duration(h.seconds_late) if h.seconds_late > 0 else "—",
                            "extension": fmt_duration(h.extension_seconds) if h.extension_seconds > 0 else "",
                            "raw": fmt_points(r.score), "penalty": fmt_points(h.penalty),
                            "final": fmt_points(r.final_score), "flags": [(f.kind, f.message) for f in h.flags]})
    return {
        "id": aid, "title": info.title, "count": len(results), "missing": missing,
        "handins": handins, "late": sum(bool(r.handin and r.handin.seconds_late > 0) for r in results),
        "handin_flags": sum(bool(r.flags) for r in results),
        "not_on_roster": sorted(submitted - set(roster)) if roster is not None else [],
        "errors": sum(r.status == STATUS_ERROR for r in results),
        "mean": fmt_points(statistics.mean(scores)) if scores else "—",
        "median": fmt_points(statistics.median(scores)) if scores else "—",
        "best": fmt_points(max(scores)) if scores else "—",
        "max_score": fmt_points(max_score),
        "mean_fraction": statistics.mean(scores) / max_score if scores and max_score else 0.0,
        "plot": score_plot_svg(scores, max_score) if results else None,
        "checks": [{"grade_id": s.grade_id, "part": info.part_titles.get(s.grade_id, ("", ""))[1].replace("`", ""), "name": s.name,
                    "description": s.description, "passed": s.passed, "total": s.total, "rate": s.rate,
                    "rate_class": "good" if s.rate >= 0.9 else "fair" if s.rate >= 0.6 else "poor",
                    "diagnosis": (heading(aid, s.top_diagnosis[0]), s.top_diagnosis[1]) if s.top_diagnosis else None}
                   for s in check_rows],
        "mistakes": [(heading(aid, name), name, n, mistake_checks[name]) for name, n in mistakes.most_common(10)],
        "trouble": trouble,
        "borrowed": [b for b in borrowed if not b.weak],
        "borrowed_weak": [b for b in borrowed if b.weak],
        "hand": has_hand(aid),
        "pending": [(r.student_id, fmt_points(r.pending_points)) for r in sorted(results, key=lambda r: r.student_id)
                    if r.pending_points and r.status != STATUS_ERROR],
        "pending_points": fmt_points(sum(r.pending_points for r in results if r.status != STATUS_ERROR)),
    }


@dataclass
class CheckBug:
    assignment_id: str
    check: str
    count: int  # submissions it cost points
    crash: str  # the last lines of what it raised


def check_bugs(results: list[SubmissionResult]) -> list[CheckBug]:
    """Checks that raised on a student's values and on the reference's too: bugs of ours, for the instructor."""
    found: dict[tuple[str, str], CheckBug] = {}
    for r in results:
        for p in r.parts:
            for c in p.checks:
                if c.check_bug:
                    bug = found.setdefault((r.assignment_id, c.name), CheckBug(
                        r.assignment_id, c.name, 0, "\n".join((c.crash or "").strip().splitlines()[-3:])))
                    bug.count += 1
    return sorted(found.values(), key=lambda b: (assignment_order(b.assignment_id), b.check))


# The terminal's summary table and the page's overview use these words for the same numbers: "best" is the best
# score achieved, "out of" the assignment's maximum (grading_run.RunSummary.print).
SUMMARY_COLUMNS = ("assignment", "submitted", "mean", "median", "best", "out of", "errors")

LEFT_OUT_FLAGS = {"not on the roster": "not_on_roster", "unmapped LMS id": "unmapped",
                  "submission no longer found": "not_found"}


def report_href(student_id: str, assignment_id: str) -> str:
    """The report's address relative to summary.html (OUT/reports/<safe name>/<assignment>.html), URL-encoded."""
    from autograder.outputs import safe_name

    return f"reports/{quote(safe_name(student_id), safe='')}/{quote(assignment_id, safe='')}.html"


def _student_rows(results: list[SubmissionResult], roster: list[str] | None, assignment_ids: list[str],
                  left_out: list, borrowed: list[BorrowedAnswers]) -> list[dict]:
    """One row per student (the roster, then anyone else with a result): scores per assignment with the report's
    link, the total of what grades.csv counts, and the flags."""
    counted = {(r.student_id, r.assignment_id): r for r in results}
    left = {(x.result.student_id, x.result.assignment_id): x for x in left_out}
    copied = {(b.student_id, b.assignment_id) for b in borrowed if not b.weak}
    students = list(dict.fromkeys(list(roster or ()) + sorted({k[0] for k in counted} | {k[0] for k in left})))
    rows = []
    for student in students:
        cells, flags, total = [], set(), 0.0
        for a in assignment_ids:
            r, x = counted.get((student, a)), left.get((student, a))
            shown = r or (x.result if x else None)
            if shown is None:
                cells.append(None)
                if roster and student in roster:
                    flags.add("missing")
                continue
            if r is not None:
                total += r.final_score
            else:
                flags.add(LEFT_OUT_FLAGS.get(x.reason, "left_out"))
            flags.update(f.kind for f in shown.flags)
            if shown.status == STATUS_ERROR:
                flags.add("error")
            if shown.handin and shown.handin.seconds_late > 0:
                flags.add("late")
            if (student, a) in copied:
                flags.add("borrowed")
            cells.append({"score": fmt_points(shown.final_score), "value": shown.final_score,
                          "href": report_href(student, a), "counted": r is not None})
        rows.append({"student": student, "cells": cells, "total": fmt_points(total), "total_value": total,
                     "flags": sorted(flags)})
    return rows


# Sorting by a column and filtering by a flag; text is set with textContent only, nothing is parsed as markup.
TABLE_SCRIPT = """
(function () {
  var table = document.getElementById("students"), body = table.tBodies[0];
  var filter = document.getElementById("flag-filter"), count = document.getElementById("shown");
  function apply() {
    var want = filter.value, shown = 0;
    for (var i = 0; i < body.rows.length; i++) {
      var flags = (body.rows[i].getAttribute("data-flags") || "").split(" ");
      var show = want === "" || (want === "*" ? flags[0] !== "" : flags.indexOf(want) >= 0);
      body.rows[i].hidden = !show;
      if (show) shown++;
    }
    count.textContent = String(shown);
  }
  filter.addEventListener("change", apply);
  var heads = table.tHead.rows[0].cells;
  for (var c = 0; c < heads.length; c++) {
    heads[c].addEventListener("click", (function (col) {
      return function () {
        var down = this.getAttribute("aria-sort") === "ascending";
        for (var k = 0; k < heads.length; k++) heads[k].removeAttribute("aria-sort");
        this.setAttribute("aria-sort", down ? "descending" : "ascending");
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = a.cells[col].getAttribute("data-v"), y = b.cells[col].getAttribute("data-v");
          var nx = parseFloat(x), ny = parseFloat(y);
          var d = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : String(x).localeCompare(String(y));
          return down ? -d : d;
        });
        for (var r = 0; r < rows.length; r++) body.appendChild(rows[r]);
      };
    })(c));
  }
  apply();
})();
"""
TABLE_SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(TABLE_SCRIPT.encode()).digest()).decode()


def render_summary(results: list[SubmissionResult], roster: list[str] | None = None, left_out: list | None = None,
                   conflicts: list | None = None) -> str:
    """The class summary for the instructor (English): per assignment statistics, plots, checks, flags; a table of
    every student (scores per assignment linking each report, flags), and what grades.csv leaves out and why.

    `results`: what grades.csv counts; `left_out`: autograder.class_record.LeftOut records (a result and the
    reason); `conflicts`: (student, assignment, reason) not graded."""
    left_out, conflicts = list(left_out or ()), list(conflicts or ())
    by_assignment: dict[str, list[SubmissionResult]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment_id, []).append(r)
    borrowed = find_borrowed_hand_answers(results, roster)
    assignments = [
        _assignment_summary(aid, by_assignment[aid], roster, [b for b in borrowed if b.assignment_id == aid])
        for aid in sorted(by_assignment, key=assignment_order)
    ]
    column_ids = sorted(set(by_assignment) | {x.result.assignment_id for x in left_out}, key=assignment_order)
    students = _student_rows(results, roster, column_ids, left_out, borrowed)
    flag_kinds = sorted({f for row in students for f in row["flags"]})
    tiers = sorted({r.tier for r in results if r.tier})
    versions = sorted({r.grader_version for r in results if r.grader_version})
    return _env.get_template("summary.html.j2").render(
        check_bugs=check_bugs(results),
        assignments=assignments, total=len(results), students=len({r.student_id for r in results}),
        roster_size=len(roster) if roster else None, borrowed_total=sum(not b.weak for b in borrowed),
        tiers=[(t, PROTECTS.get(t, "")) for t in tiers], versions=versions or [__version__],
        version=__version__, columns=SUMMARY_COLUMNS, student_rows=students, column_ids=column_ids,
        flag_kinds=flag_kinds, script=Markup(TABLE_SCRIPT), script_hash=TABLE_SCRIPT_HASH,
        left_out=[{"student": x.result.student_id, "assignment": x.result.assignment_id, "reason": x.reason,
                   "score": fmt_points(x.result.final_score), "href": report_href(x.result.student_id,
                                                                                  x.result.assignment_id)}
                  for x in left_out],
        conflicts=[{"student": c[0], "assignment": c[1], "reason": c[2]} for c in conflicts],
    )
