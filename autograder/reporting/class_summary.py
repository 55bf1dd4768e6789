"""The class summary (English, for the instructor): per assignment the scores, the checks' pass rates and the
mistakes by title, copied hand answers, check bugs, and one sortable row per student linking each report.

    from autograder.reporting.class_summary import render_summary
    html = render_summary(results, roster=["alice", "bob"])

The only markup made here is the score plot, an SVG drawn from numbers alone, and one small
inline script (sorting and filtering the table of students, allowed by its hash in the page's
Content-Security-Policy) that reads no student text as markup.
"""

import base64
import hashlib
import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from markupsafe import Markup

from autograder import __version__
from autograder.assignments import has_hand
from autograder.catalogue import DIAGNOSIS_RAISED, heading
from autograder.results import NOT_ON_ROSTER, STATUS_ERROR, SubmissionResult
from autograder.running.sandbox.tiers import PROTECTS
from autograder.reporting.copied_answers import BorrowedAnswers, find_borrowed_hand_answers
from autograder.intake.local_time import display_of
from autograder.reporting.formatting import (
    LEFT_OUT_FLAGS, SANDBOX_TROUBLE, SUMMARY_COLUMNS, _env, assignment_info, assignment_order, clip,
    fmt_duration, fmt_points, report_href,
)

# --- the class summary -----------------------------------------------------------------------------------


def score_plot_svg(scores: list[float], max_score: float) -> Markup:
    """A histogram of the scores as an inline <svg>, drawn here from numbers alone (no text from anyone): bars with
    their counts, the mean (dashed) and the median (dotted), the axes and their labels."""
    top = max(max_score, max(scores, default=0.0), 1.0)
    width = 1.0 if top <= 20 else top / 20
    edges = [i * width for i in range(int(math.ceil(top / width)) + 1)]
    if edges[-1] < top:
        edges.append(edges[-1] + width)
    counts = [0] * (len(edges) - 1)
    for score in scores:  # numpy's rule: [a, b) for every bin but the last, which is [a, b]
        i = min(max(int(score // width), 0), len(counts) - 1)
        counts[i] += 1
    W, H, left, right, top_pad, bottom = 640, 240, 52, 16, 26, 40
    plot_w, plot_h = W - left - right, H - top_pad - bottom
    y_max = max(max(counts, default=0), 1) * 1.2
    x = lambda v: left + plot_w * v / edges[-1]  # noqa: E731
    y = lambda c: top_pad + plot_h * (1 - c / y_max)  # noqa: E731
    parts = [f'<svg role="img" aria-label="score distribution" viewBox="0 0 {W} {H}" '
             'font-family="DejaVu Sans, sans-serif" font-size="11">']
    for i, count in enumerate(counts):
        if count:
            x0, x1 = x(edges[i]), x(edges[i + 1])
            parts.append(f'<rect x="{x0 + 0.5:.1f}" y="{y(count):.1f}" width="{max(x1 - x0 - 1, 0.5):.1f}" '
                         f'height="{y(0) - y(count):.1f}" fill="#4f7cac"/>')
            parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{y(count) - 3:.1f}" text-anchor="middle" font-size="10" '
                         f'fill="#333">{count}</text>')
    parts.append(f'<line x1="{left}" y1="{y(0):.1f}" x2="{left + plot_w}" y2="{y(0):.1f}" stroke="#333"/>')
    parts.append(f'<line x1="{left}" y1="{top_pad}" x2="{left}" y2="{y(0):.1f}" stroke="#333"/>')
    ticks = sorted({round(edges[-1] * k / 5, 2) for k in range(6)})
    for t in ticks:
        parts.append(f'<line x1="{x(t):.1f}" y1="{y(0):.1f}" x2="{x(t):.1f}" y2="{y(0) + 4:.1f}" stroke="#333"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{y(0) + 16:.1f}" text-anchor="middle">{fmt_points(t)}</text>')
    step = max(1, math.ceil(y_max / 5))
    for c in range(0, int(y_max) + 1, step):
        parts.append(f'<text x="{left - 6}" y="{y(c) + 4:.1f}" text-anchor="end">{c}</text>')
    parts.append(f'<text x="{left + plot_w / 2:.1f}" y="{H - 6}" text-anchor="middle">score (max '
                 f'{fmt_points(max_score)})</text>')
    parts.append(f'<text x="14" y="{top_pad + plot_h / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {top_pad + plot_h / 2:.1f})">submissions</text>')
    if scores:
        for value, colour, dash, label, lx in ((statistics.mean(scores), "#c0392b", "6 3", "mean", W - 190),
                                               (statistics.median(scores), "#27865f", "2 2", "median", W - 100)):
            parts.append(f'<line x1="{x(value):.1f}" y1="{top_pad}" x2="{x(value):.1f}" y2="{y(0):.1f}" '
                         f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="{dash}"/>')
            parts.append(f'<line x1="{lx}" y1="12" x2="{lx + 22}" y2="12" stroke="{colour}" stroke-width="1.5" '
                         f'stroke-dasharray="{dash}"/><text x="{lx + 27}" y="16">{label}</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


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
                        borrowed: list[BorrowedAnswers], left_out: list = ()) -> dict:
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
            shown = display_of(h.timezone, h.timestamp_format).format_stored  # the course's zone, named
            handins.append({"student": r.student_id, "submitted_at": shown(h.submitted_at) or "—",
                            "source": "LMS: late" if h.lms_late else h.time_source, "submitter": h.submitter or "—",
                            "due": shown(h.due) or "—",
                            "late": "late (the LMS says; when is not known)" if h.lms_late else
                            fmt_duration(h.seconds_late) if h.seconds_late > 0 else "—",
                            "extension": fmt_duration(h.extension_seconds) if h.extension_seconds > 0 else "",
                            "raw": fmt_points(r.score), "penalty": fmt_points(h.penalty),
                            "final": fmt_points(r.final_score), "flags": [(f.kind, f.message) for f in h.flags]})
    return {
        "id": aid, "title": info.title, "count": len(results), "missing": missing,
        "handins": handins, "late": sum(bool(r.handin and r.handin.seconds_late > 0) for r in results),
        "handin_flags": sum(bool(r.flags) for r in results),
        "not_on_roster": sorted({x.result.student_id for x in left_out if x.reason == NOT_ON_ROSTER}
                                | (submitted - set(roster) if roster else set())),
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
    in_diagnosis: bool = False  # its diagnosis (a variant, hint or key recogniser) raised, not the check on the reference


def check_bugs(results: list[SubmissionResult]) -> list[CheckBug]:
    """Checks that raised on a student's values and on the reference's too, or whose diagnosis raised: bugs of ours,
    for the instructor."""
    found: dict[tuple[str, str], CheckBug] = {}
    for r in results:
        for p in r.parts:
            for c in p.checks:
                if c.check_bug:
                    bug = found.setdefault((r.assignment_id, c.name), CheckBug(
                        r.assignment_id, c.name, 0, "\n".join((c.crash or "").strip().splitlines()[-3:])))
                    bug.count += 1
                    bug.in_diagnosis |= (c.crash or "").startswith(DIAGNOSIS_RAISED)
    return sorted(found.values(), key=lambda b: (assignment_order(b.assignment_id), b.check))


# The terminal's summary table and the page's overview use these words for the same numbers: "best" is the best
# score achieved, "out of" the assignment's maximum (autograder.run.RunSummary.print).

def _student_rows(results: list[SubmissionResult], roster: list[str] | None, assignment_ids: list[str],
                  left_out: list, borrowed: list[BorrowedAnswers], actions: list = ()) -> list[dict]:
    """One row per student (the roster, then anyone else with a result): scores per assignment with the report's
    link, the total of what grades.csv counts, and the flags (grades.csv's words: error, missing, unanswered,
    conflict, copied and the hand-in's)."""
    counted = {(r.student_id, r.assignment_id): r for r in results}
    left = {(x.result.student_id, x.result.assignment_id): x for x in left_out}
    copied = {(b.student_id, b.assignment_id) for b in borrowed if not b.weak}
    conflicted = {(x.student_id, x.assignment_id) for x in actions if x.kind == "conflict"}
    students = list(dict.fromkeys(list(roster or ()) + sorted({k[0] for k in counted} | {k[0] for k in left})))
    rows = []
    for student in students:
        cells, flags, total = [], set(), 0.0
        for a in assignment_ids:
            r, x = counted.get((student, a)), left.get((student, a))
            shown = r or (x.result if x else None)
            if (student, a) in conflicted:
                flags.add("conflict")
            if shown is None:
                cells.append(None)
                if roster and student in roster and (student, a) not in conflicted:
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
                flags.add("copied")
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
                   conflicts: list | None = None, actions: list | None = None) -> str:
    """The class summary for the instructor (English): per assignment statistics, plots, checks, flags; a table of
    every student (scores per assignment linking each report, flags), and what grades.csv leaves out and why.

    `results`: what grades.csv counts; `left_out`: autograder.recording.class_record.LeftOut records (a result and the
    reason); `conflicts`: (student, assignment, reason) not graded; `actions`: autograder.recording.class_record.Action
    records (what needs the instructor's action: the "Needs action" lists, each student's flags)."""
    left_out, conflicts, actions = list(left_out or ()), list(conflicts or ()), list(actions or ())
    by_assignment: dict[str, list[SubmissionResult]] = {}
    for r in results:
        by_assignment.setdefault(r.assignment_id, []).append(r)
    borrowed = find_borrowed_hand_answers(results, roster)
    assignments = [
        _assignment_summary(aid, by_assignment[aid], roster, [b for b in borrowed if b.assignment_id == aid],
                            [x for x in left_out if x.result.assignment_id == aid])
        for aid in sorted(by_assignment, key=assignment_order)
    ]
    column_ids = sorted(set(by_assignment) | {x.result.assignment_id for x in left_out}, key=assignment_order)
    students = _student_rows(results, roster, column_ids, left_out, borrowed, actions)
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
        actions=_action_lists(actions),
    )


ACTION_TITLES = {"error": "could not be graded (the report says why)", "missing": "no submission (roster students)",
                 "unanswered": "nothing answered (code and written answers as released)",
                 "conflict": "two notebooks for one student and assignment: neither graded",
                 "copied": "hand answers that fit another student's numbers"}


def _action_lists(actions: list) -> list[dict]:
    """The "Needs action" lists, one per kind (in ACTION_KINDS' order), every entry."""
    from autograder.results import ACTION_KINDS

    lists = []
    for kind in ACTION_KINDS:
        these = [x for x in actions if x.kind == kind]
        if these:
            lists.append({"kind": kind, "title": ACTION_TITLES.get(kind, kind),
                          "entries": [{"student": x.student_id, "assignment": x.assignment_id, "detail": x.detail,
                                       "href": report_href(x.student_id, x.assignment_id)
                                       if kind not in ("missing", "conflict") else None} for x in these]})
    return lists
