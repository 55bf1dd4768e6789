"""What every page shares: the whitelisted details, the Chinese texts of cell troubles and sandbox tiers, the
Jinja2 environment (autoescaping on), number and time formatting, and the assignment's titles from its source
notebook.

Rendering only: no grading, no file discovery. Everything that came from a student (outputs, error
messages, written answers, typed hand answers, even the student id) reaches a page through Jinja2
with autoescaping on: it is text, never markup. Check details are whitelisted (`SAFE_DETAIL_KEYS`); the
seed, the inputs and the expected values are never rendered. Pages are self-contained: inline CSS and no
external resources.
"""

import functools
import math
import re
from dataclasses import dataclass
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from autograder.assignments import assignment_ids

# The only detail keys a report may show: nothing that could carry an input or an expected value.
SAFE_DETAIL_KEYS = ("shape", "expected_shape", "dtype", "max_abs_error", "tolerance")
DETAIL_LABELS = {"shape": "你的形状", "expected_shape": "应有形状", "dtype": "dtype",
                 "max_abs_error": "最大绝对误差", "tolerance": "容限"}

# Checks of the hand computations (typed numbers, the choice letter): by name, as in autograder/checks.
HAND_REL_TOL = 5e-4  # four significant figures, as the hand checks (autograder.checks.HAND)

# Cells that went wrong in a way the instructor should look at (the sandbox killed or skipped them).
SANDBOX_TROUBLE = ("Timeout", "Crash", "Refused", "NotRun")
CELL_ERROR_HINTS = {
    "Timeout": "超时：这个单元格运行超过了时间限制，已被终止（是否有死循环，或计算量太大？）",
    "Crash": "崩溃：运行这个单元格时进程异常退出（例如内存用尽），已被跳过",
    "Refused": "回复被拒绝：运行这个单元格后，沙箱发回的回复超出了评分程序接收的大小或格式，已被跳过",
    "NotRun": "未运行：沙箱多次重启后放弃，这个单元格没有运行",
}

# What each isolation tier protects against (autograder.running.sandbox.tiers.PROTECTS, for the student, in Chinese).
TIER_NOTES = {
    "bubblewrap": "独立的用户、进程、网络和文件系统命名空间（只读的系统文件、私有临时目录、无网络），外加资源限制",
    "landlock": "Landlock 限制文件读写、禁止 TCP 网络和向沙箱外发信号，外加独立用户和资源限制",
    "rlimits": "只有资源限制（内存、CPU、文件大小、进程数）和超时：没有文件系统、网络或进程隔离",
}

MAX_TEXT = 4000  # characters of one student-written text shown (error messages, written answers)

_env = Environment(
    loader=PackageLoader("autograder.reporting", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


# --- formatting -------------------------------------------------------------------------------------------


def fmt_points(x) -> str:
    """Points as a person writes them: 10, 1.5, 1.25, 0.125 (three decimals: an eighth of a point, e.g. a share of a
    check kept as convention credit, is not shown as 0.12)."""
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return str(x)
    return f"{round(float(x), 3):g}"


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



def _duration_units(seconds: float) -> list[tuple[int, int]]:
    """A lateness in whole seconds (a started second counts), as (number, unit index) for each unit that is not
    zero: days, hours, minutes, seconds. Every unit down to the second is kept: a lateness of 3 hours and 30 seconds
    charged as 4 started hours must not read "3 hours" (`fmt_duration_zh`, `fmt_duration`)."""
    seconds = int(math.ceil(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return [(n, unit) for unit, n in enumerate((days, hours, minutes, secs)) if n] or [(0, 3)]


def fmt_duration_zh(seconds: float) -> str:
    """For the student's report: "1 天 1 秒", "3 小时 30 秒", "51 分钟"."""
    return " ".join(f"{n} {('天', '小时', '分钟', '秒')[unit]}" for n, unit in _duration_units(seconds))


def fmt_duration_words(seconds: float) -> str:
    """A length of time in words, to the minute: "2 days", "1 day 3 hours", "1 hour 30 minutes"."""
    minutes = int(round(seconds / 60))
    days, rest = divmod(minutes, 1440)
    hours, minutes = divmod(rest, 60)
    parts = [f"{n} {unit}{'s' if n != 1 else ''}" for n, unit in ((days, "day"), (hours, "hour"), (minutes, "minute"))
             if n]
    return " ".join(parts) or "0 minutes"


def fmt_duration(seconds: float) -> str:
    """For the instructor's summary: "1d 1s", "3h 30s", "51m"."""
    return " ".join(f"{n}{'dhms'[unit]}" for n, unit in _duration_units(seconds))



def _score_class(score: float, max_score: float, error: bool = False) -> str:
    if error:
        return "neutral"
    if max_score <= 0:
        return "neutral"
    fraction = score / max_score
    return "good" if fraction >= 0.9 else "fair" if fraction >= 0.6 else "poor"



SUMMARY_COLUMNS = ("assignment", "submitted", "mean", "median", "best", "out of", "errors")

LEFT_OUT_FLAGS = {"not on the roster": "not_on_roster", "unmapped LMS id": "unmapped",
                  "submission no longer found": "not_found"}


def report_href(student_id: str, assignment_id: str) -> str:
    """The report's address relative to summary.html (OUT/reports/<safe name>/<assignment>.html), URL-encoded."""
    from autograder.intake.validate import safe_name

    return f"reports/{quote(safe_name(student_id), safe='')}/{quote(assignment_id, safe='')}.html"
