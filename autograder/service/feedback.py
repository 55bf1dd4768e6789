"""What a practice attempt shows its student, at the assignment's feedback level (c.AutogradeService.feedback):

- "report": the report the final grading writes (autograder.reporting.student_page), marked as a practice attempt;
- "checks": each check passed or not, with what it verifies, and no more (no messages, no named mistakes);
- "score": the score alone.

A hand computation's numbers are the student's own and the same in every attempt, so unless the course turns its
verdict on (c.AutogradeService.hand_verdict), a hand part is shown only as answered or not, and its points are
left out of the practice score (both said on the page).
"""

import copy

from autograder.assignments import load_assignment
from autograder.reporting.formatting import assignment_info, fmt_points
from autograder.reporting.student_page import render_report
from autograder.results import STATUS_ERROR, SubmissionResult

PRACTICE_LINES = [
    "这是练习评分，不是最终成绩：练习用的隐藏输入与最终评分的不同，每次练习也可能不同；"
    "最终成绩以截止后老师统一评分为准。",
]


def _without_hand_verdict(result: SubmissionResult) -> tuple[SubmissionResult, list[dict]]:
    """The result less its hand parts' verdicts: [(grade_id, label, answered)] for the page."""
    assignment = load_assignment(result.assignment_id)
    hand = [p for p in result.parts if assignment.is_hand_part(p.grade_id)]
    if not hand:
        return result, []
    shown = copy.deepcopy(result)
    shown.parts = [p for p in shown.parts if not assignment.is_hand_part(p.grade_id)]
    shown.score = sum(p.score for p in shown.parts)
    shown.max_score = sum(p.max_score for p in shown.parts)
    shown.hand_answers = {}
    labels = assignment_info(result.assignment_id).part_titles
    notes = [{"grade_id": p.grade_id, "label": " ".join(labels.get(p.grade_id, (p.grade_id,))),
              "answered": bool(p.answered) and result.status != STATUS_ERROR} for p in hand]
    return shown, notes


def practice_view(result: SubmissionResult, level: str, hand_verdict: bool) -> dict:
    """The student's view of one practice attempt (stored as JSON; autograder.service.app renders it)."""
    shown, hand = (result, []) if hand_verdict else _without_hand_verdict(result)
    view = {"level": level, "status": shown.status, "score": shown.final_score, "max_score": shown.max_score,
            "score_text": f"{fmt_points(shown.final_score)} / {fmt_points(shown.max_score)}", "hand": hand,
            "message": shown.message if shown.status == STATUS_ERROR else ""}
    lines = list(PRACTICE_LINES)
    for note in hand:
        lines.append(f"{note['label']}（手算）：{'已作答' if note['answered'] else '未作答'}；"
                     "练习评分不判手算的对错，也不计入上面的分数，最终评分会判。")
    view["practice_lines"] = lines
    if level == "checks":
        view["parts"] = [{"grade_id": p.grade_id, "label": " ".join(assignment_info(result.assignment_id)
                                                                      .part_titles.get(p.grade_id, (p.grade_id,))),
                          "checks": [{"description": c.description, "passed": c.passed} for c in p.checks]}
                         for p in shown.parts if not p.by_hand]
    elif level == "report":
        view["report_html"] = render_report(shown, practice=lines)
    return view
