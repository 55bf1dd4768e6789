"""What a grading run leaves in its output folder, written so that nothing is lost half-way.

    OUT/results/<student>/<assignment>.json   one file per submission, written as soon as it is graded
                                              (atomically), so an interrupted run resumes where it stopped
    OUT/results.json                          every submission, for the LMS
    OUT/grades.csv                            one row per student of the roster, one column per assignment
    OUT/reports/<student>/<assignment>.html   the student's report
    OUT/summary.html                          the class summary for the instructor
"""

import csv
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from autograder.results import SubmissionResult
from autograder.intake.validate import (  # noqa: F401 (the names of a student's files: also the callers')
    nbgrader_folder_name, safe_name, safe_tree,
)


def atomic_write(path: Path, data: str | bytes, durable: bool = True) -> None:
    """Write `data` to `path` whole or not at all; `durable`: on disk before it replaces the old file (fsync).

    What can be rebuilt from the stored results (reports, feedback) skips the fsync: it costs more than
    the rendering."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            if durable:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


_NOTEBOOK_SHA256, _CACHE_KEY = "notebook_sha256", "cache_key"


def encode_result(result: SubmissionResult, digest: str | None, cache_key: str | None) -> str:
    """A result file's text: the result, the notebook's digest and the cache key it was graded under."""
    data = safe_tree(result.to_dict())  # whatever text a submission left in it, the file is valid UTF-8 JSON
    data[_NOTEBOOK_SHA256], data[_CACHE_KEY] = digest, cache_key
    return json.dumps(data, ensure_ascii=False, indent=1)


@dataclass
class StoredResult:
    result: SubmissionResult
    notebook_sha256: str | None
    cache_key: str | None  # what it was graded under (grading.cache_key); None: before the cache existed


class ResultStore:
    """One JSON file per graded submission under OUT/results/."""

    def __init__(self, out: Path):
        self.root = Path(out) / "results"

    def path(self, student_id: str, assignment_id: str) -> Path:
        return self.root / safe_name(student_id) / f"{assignment_id}.json"

    def save(self, result: SubmissionResult, digest: str | None = None, cache_key: str | None = None) -> None:
        self.save_encoded(result, encode_result(result, digest, cache_key))

    def save_encoded(self, result: SubmissionResult, text: str) -> None:
        """The result file as `encode_result` made it (perhaps in a worker), for `result`'s student and assignment."""
        atomic_write(self.path(result.student_id, result.assignment_id), text)

    def load(self, student_id: str, assignment_id: str) -> StoredResult | None:
        path = self.path(student_id, assignment_id)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, ValueError):
            return None
        digest, key = data.pop(_NOTEBOOK_SHA256, None), data.pop(_CACHE_KEY, None)
        return StoredResult(SubmissionResult.from_dict(data), digest, key)

    def all(self, assignment_ids: list[str] | None = None) -> list[SubmissionResult]:
        results = []
        for path in sorted(self.root.glob("*/*.json")):
            if assignment_ids is not None and path.stem not in assignment_ids:
                continue
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                continue  # a file cut short by a crash: that submission is graded again on --resume
            data.pop(_NOTEBOOK_SHA256, None)
            data.pop(_CACHE_KEY, None)
            results.append(SubmissionResult.from_dict(data))
        return sorted(results, key=lambda r: (r.student_id, r.assignment_id))


def write_results_json(results: list[SubmissionResult], path: Path,
                       left_out: dict[tuple[str, str], str] | None = None,
                       flags: dict[tuple[str, str], list[str]] | None = None,
                       absent: dict[tuple[str, str], float] | None = None) -> None:
    """The list the LMS import reads: per submission, its score and every check, why grades.csv leaves it out
    (`left_out`: not on the roster, an unmapped LMS id; null when it counts) and its flags (`flags`: the hand-in's
    and what needs action, autograder.recording.class_record; default: the hand-in's). `absent`: (student,
    assignment) -> maximum of the submissions that have no result but a flag (a roster student's missing one, a
    conflict): a row each, with score 0 and the status `missing` or `conflict`."""
    flags = flags or {}
    rows = []
    for r in results:
        key = (r.student_id, r.assignment_id)
        rows.append({"left_out": (left_out or {}).get(key),
            "student": r.student_id, "assignment": r.assignment_id, "score": r.final_score,
            "raw_score": r.score, "late_penalty": r.penalty, "max_score": r.max_score, "status": r.status, "message": r.message, "tier": r.tier, "grader_version": r.grader_version,
            "pending_points": r.pending_points,
            "flags": flags.get(key, list(dict.fromkeys(f.kind for f in r.flags))),
            "parts": [{"grade_id": p.grade_id, "score": p.score, "max_score": p.max_score, "by_hand": p.by_hand,
                       "pending": p.pending, "manual_score": p.manual_score, "comment": p.comment} for p in r.parts],
            "checks": [{"name": c.name, "grade_id": c.grade_id, "passed": c.passed, "points": c.points,
                        "max_points": c.max_points, "message": c.message, "diagnosis": c.diagnosis}
                       for p in r.parts for c in p.checks],
            "handin": _handin_json(r),
        })
    for (student, assignment), max_score in sorted((absent or {}).items()):
        kinds = flags.get((student, assignment), [])
        rows.append({"left_out": None, "student": student, "assignment": assignment, "score": 0.0, "raw_score": 0.0,
                     "late_penalty": 0.0, "max_score": max_score, "status": kinds[0] if kinds else "missing",
                     "message": "", "tier": "", "grader_version": "", "pending_points": 0.0, "flags": kinds,
                     "parts": [], "checks": [], "handin": None})
    rows.sort(key=lambda row: (row["student"], row["assignment"]))
    atomic_write(path, json.dumps(rows, ensure_ascii=False, indent=1))


def _handin_json(r: SubmissionResult) -> dict | None:
    h = r.handin
    if h is None:
        return None
    return {"submitted_at": h.submitted_at, "time_source": h.time_source, "student_timestamp": h.student_timestamp,
            "observed_at": h.observed_at, "submitter": h.submitter, "due": h.due,
            "extension_seconds": h.extension_seconds, "seconds_late": h.seconds_late, "penalty": h.penalty,
            "policy": h.policy, "flags": [{"kind": f.kind, "message": f.message} for f in h.flags]}


# A spreadsheet runs a cell as a formula when it starts with one of these; an importer that splits a field on
# another separator (`;` in many locales, a tab, `|`) makes a new cell after each separator.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")  # and full-width forms
_SEPARATED_FORMULA = re.compile(r"(^|[,;\t|\r\n])(\s*)(?=[=+\-@\uff1d\uff0b\uff0d\uff20])"
                                r"(?!-(?:$|[,;\t|\r\n]))")  # a lone "-" (an LMS's "no value") is no formula


def spreadsheet_safe(value: str) -> str:
    """A text cell a spreadsheet shows as text, never runs as a formula: a `'` before every formula character
    that starts the cell or follows a separator (`,` `;` tab `|` line break), as the cell would be split.

    `x;=1+2;` becomes `x;'=1+2;`, `=HYPERLINK(..)` becomes `'=HYPERLINK(..)`; a tab or CR starting the cell
    is prefixed too. Plain text and numbers written as text are unchanged."""
    text = str(value)
    text = _SEPARATED_FORMULA.sub(lambda m: m.group(1) + m.group(2) + "'", text)
    return "'" + text if text[:1] in ("\t", "\r", "\n") else text


def safe_cell(value: str) -> str:
    """A CSV cell written back as it was read: a plain number (`10`, `-1`, `2.5`) as it is, text spreadsheet-safe."""
    text = str(value)
    if re.fullmatch(r"\s*-?\d+(\.\d+)?\s*", text):
        return text
    return spreadsheet_safe(text)


CSV_COLUMNS = ("", "_raw", "_penalty", "_flags", "_pending", "_submitted")  # per assignment: final score, raw score,
# penalty, flags, points of written answers still to grade by hand ("待批改"; not in the scores yet), and when it was
# handed in, in the course's zone with the zone named (c.NbGraderAPI.timezone; "late (LMS)" when only the LMS's mark says)


def write_grades_csv(results: list[SubmissionResult], roster: list[str], assignment_ids: list[str],
                     path: Path, flags: dict[tuple[str, str], list[str]] | None = None) -> None:
    """One row per student (roster first, then anyone else who submitted), zero where nothing was submitted.

    Per assignment: the final score (after the late penalty), the raw score, the penalty, the flags (kinds,
    `;`-separated: the hand-in's, e.g. identity, time, unverified, and what needs action: error, missing,
    unanswered, conflict, copied; `flags`, default: the hand-in's), and the points still pending (written answers
    the instructor has not graded, "待批改"); the total is of the final scores.
    """
    by_key = {(r.student_id, r.assignment_id): r for r in results}
    students = list(dict.fromkeys(list(roster) + sorted({r.student_id for r in results})))
    with tempfile.SpooledTemporaryFile(mode="w+", newline="", encoding="utf-8") as buf:
        writer = csv.writer(buf)
        writer.writerow(["student", *(f"{a}{suffix}" for a in assignment_ids for suffix in CSV_COLUMNS), "total"])
        for student in students:
            row, total = [], 0.0
            for a in assignment_ids:
                r = by_key.get((student, a))
                final = r.final_score if r else 0.0
                total += final
                kinds = (flags or {}).get((student, a), list(dict.fromkeys(f.kind for f in r.flags)) if r else [])
                row += [_num(final), _num(r.score if r else 0.0), _num(r.penalty if r else 0.0), ";".join(kinds),
                        _num(r.pending_points if r else 0.0), spreadsheet_safe(_submitted(r))]
            writer.writerow([spreadsheet_safe(student), *row, _num(total)])
        buf.seek(0)
        lines = buf.read()
    atomic_write(path, lines)


def _submitted(r: SubmissionResult | None) -> str:
    """When it was handed in, as the course shows times (autograder.intake.local_time)."""
    from autograder.intake.local_time import display_of

    h = r.handin if r else None
    if h is None:
        return ""
    if h.lms_late and not h.submitted_at:
        return "late (LMS)"
    return display_of(h.timezone, h.timestamp_format).format_stored(h.submitted_at) or ""


def _num(value: float) -> str:
    return f"{value:g}"


