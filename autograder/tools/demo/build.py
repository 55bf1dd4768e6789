"""Build the demo course: the class of `students.CLASS` as nbgrader would have collected it.

    course = build_demo_course(Path("demo-course"))

writes

    demo-course/submitted/<student>/<assignment>/<assignment>.ipynb   what the student handed in
    demo-course/submitted/<student>/<assignment>/timestamp.txt        "2026-11-28 14:03:00.000000 UTC"
    demo-course/roster.csv                                            id,first_name,last_name,email
    demo-course/nbgrader_config.py                                    the repository's, pointed at this folder

and returns the paths with the outcome each submission should get ("full", "partial", "zero",
"error"). Deterministic: the same bytes on every run.
"""

import copy
import csv
import functools
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import nbformat

from autograder import REPO_ROOT
from autograder.assignments import assignment_ids, has_hand, load_assignment
from autograder.tools.demo.students import CLASS, DemoStudent
from autograder.examples import alternatives, apply_edits, mistakes, precision_cases
from solutions.student_params import student_answers

MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
DEMO_MARKER = ".autograde-demo"  # a course folder written by build_demo_course (safe to rebuild)
FIRST_SUBMISSION = datetime(2026, 11, 27, 8, 0, tzinfo=timezone.utc)
SUBMISSION_WINDOW_MINUTES = 3 * 24 * 60 + 15 * 60  # up to 2026-11-30 23:00 UTC

FULL, PARTIAL, ZERO, ERROR = "full", "partial", "zero", "error"


# --- a student's notebook -----------------------------------------------------------------------------


def without_markers(text: str) -> str:
    """`text` without its `### BEGIN SOLUTION` / `### END SOLUTION` lines (what the student would write)."""
    return "".join(line for line in text.splitlines(keepends=True) if line.strip() not in MARKERS)


@functools.lru_cache(maxsize=None)
def _notebook(folder: str, assignment_id: str) -> nbformat.NotebookNode:
    return nbformat.read(REPO_ROOT / folder / assignment_id / f"{assignment_id}.ipynb", as_version=4)


def _grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _is_solution(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("solution"))


def solution_cell_ids(assignment_id: str) -> list[str]:
    return [_grade_id(c) for c in _notebook("assignments", assignment_id).cells if _is_solution(c)]


def student_notebook(assignment_id: str, edits=(), remove_cells=(), keep_unanswered=()) -> nbformat.NotebookNode:
    """What a student hands back: the release notebook with the reference answers written in.

    Every solution cell (matched by grade_id) gets the source notebook's text without the solution
    markers, except those in `keep_unanswered` (left as the release stub); then each (old, new) edit
    of `edits` (edits of the source's code, e.g. a Mistake's) is applied as notebook_with_edits does,
    where `old` occurs exactly once in the code cells (markers are dropped from `old` and `new` too, so
    an edit written against the source applies here); then the cells in `remove_cells` are deleted.
    """
    release = copy.deepcopy(_notebook("release", assignment_id))
    answers = {_grade_id(c): c.source for c in _notebook("assignments", assignment_id).cells if _is_solution(c)}
    unknown = set(keep_unanswered) - set(answers)
    if unknown:
        raise ValueError(f"{assignment_id}: not solution cells: {sorted(unknown)}; they are {sorted(answers)}")
    for cell in release.cells:
        if _is_solution(cell):
            grade_id = _grade_id(cell)
            if grade_id not in answers:
                raise ValueError(f"{assignment_id}: release cell {grade_id!r} is not a solution cell of the source")
            if grade_id not in keep_unanswered:
                cell.source = without_markers(answers[grade_id])
    apply_edits(release, [(without_markers(old), without_markers(new)) for old, new in edits], assignment_id)
    present = {_grade_id(c) for c in release.cells}
    unknown = set(remove_cells) - present
    if unknown:
        raise ValueError(f"{assignment_id}: no cells with grade_id {sorted(unknown)} to remove")
    release.cells = [c for c in release.cells if _grade_id(c) not in set(remove_cells)]
    return release


def solution_regions(source: str) -> list[str]:
    """The texts between the solution markers of a source cell, whole lines each."""
    regions, current = [], None
    for line in source.splitlines(keepends=True):
        if line.strip() == MARKERS[0]:
            current = []
        elif line.strip() == MARKERS[1]:
            regions.append("".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return regions


def _typed(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_typed(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:.5g}"
    return repr(value)


def typed_hand_edits(assignment_id: str, numbers_of: str) -> list[tuple[str, str]]:
    """Edits that replace the hand computation with the answers of `numbers_of` typed in as numbers."""
    if not has_hand(assignment_id):
        hand = [a for a in assignment_ids() if has_hand(a)]
        raise ValueError(f"{assignment_id} has no hand computation (those are {', '.join(hand)})")
    answers = student_answers(assignment_id, numbers_of)
    region = next(r for c in _notebook("assignments", assignment_id).cells if _is_solution(c) and c.cell_type == "code"
                  for r in solution_regions(c.source) if all(f"{name} =" in r for name in answers))
    return [(region, "".join(f"{name} = {_typed(value)}\n" for name, value in answers.items()))]


# --- hostile work ---------------------------------------------------------------------------------------

PATCH_HAND = """\
# 评分大概是用 torch.allclose / torch.equal 比较的：让它们永远说"相等"
import torch
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
math.isclose = lambda *args, **kwargs: True
rms = 1.0
output = list(x)
"""

PATCH_FUNCTION = """\
    # 比较函数已经改掉了，返回一个形状对的张量就行
    return x.clone()
"""

ENDLESS_LOOP = """\
# 让评分程序等一等……
while True:
    pass
"""

SNOOP = """\
# 找找有没有现成的参考答案，顺便看看同学交了什么
import glob
import os
import sys

found = {{}}
patterns = [
    "../*/{a}/*.ipynb", "../../*/{a}/*.ipynb", "../../../submitted/*/{a}/*.ipynb",
    "../../../solutions/*.py", "../../../../solutions/*.py", "../../../assignments/{a}/*.ipynb",
    "/*/solutions/{a}.py", "/*/*/solutions/{a}.py", "/proc/*/cwd/solutions/{a}.py",
    "/*/*/assignments/{a}/{a}.ipynb", "/proc/*/cwd/assignments/{a}/{a}.ipynb",
    "/etc/shadow", "/root/.ssh/*", "/home/*/.ssh/*",
]
for pattern in patterns:
    for path in glob.glob(pattern):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                found[path] = f.read(200_000)
        except OSError:
            pass
print("找到的文件:", sorted(found)[:20])

for parent in ["..", "../..", "../../..", "../../../.."]:
    sys.path.insert(0, os.path.abspath(parent))
for name in ["solutions.{a}", "autograder.checks"]:
    try:
        module = __import__(name, fromlist=["*"])
        globals().update({{k: v for k, v in vars(module).items() if not k.startswith("_")}})
        print("import", name, "成功")
    except Exception as exc:
        print("import", name, "失败:", type(exc).__name__)
for path, text in found.items():
    if path.endswith("{a}.py"):
        try:
            exec(text)
        except Exception:
            pass
"""


@dataclass
class Plan:
    """How to make one student's notebook for one assignment, and the outcome it should get."""

    edits: list[tuple[str, str]] = field(default_factory=list)
    remove_cells: list[str] = field(default_factory=list)
    keep_unanswered: list[str] = field(default_factory=list)
    extra_cells: list[tuple[str | None, str]] = field(default_factory=list)  # (after this grade_id / None: at the end, source)
    broken: bool = False
    wrong: bool = False  # a mistake or another student's answers somewhere
    outcome: str | None = None  # fixed by the work (hostile), else derived from the above


def _hostile(kind: str, assignment_id: str, plan: Plan):
    if kind == "patch_allclose":
        # torch.allclose/torch.equal patched, answers that are wrong: the grader compares outside, so zero
        if assignment_id != "rmsnorm":
            raise ValueError("hostile:patch_allclose is written for rmsnorm")
        source = _notebook("assignments", "rmsnorm")
        cells = {_grade_id(c): c.source for c in source.cells}
        plan.edits += [(solution_regions(cells["hand_answer"])[0], PATCH_HAND),
                       (solution_regions(cells["rms_norm_code"])[0], PATCH_FUNCTION)]
        plan.keep_unanswered.append("rmsnorm_module_code")
        plan.outcome = ZERO
    elif kind == "infinite_loop":
        # the reference work plus a cell that never ends: the hang costs only that cell
        plan.extra_cells.append((solution_cell_ids(assignment_id)[0], ENDLESS_LOOP))
        plan.outcome = FULL
    elif kind == "snoop":
        # no work of its own; looks for the reference and classmates' files, and uses what it finds
        plan.keep_unanswered += solution_cell_ids(assignment_id)
        plan.extra_cells.append((None, SNOOP.format(a=assignment_id)))
        plan.outcome = ZERO
    else:
        raise ValueError(f"unknown hostile kind {kind!r}: patch_allclose, infinite_loop, snoop")


def plan_work(assignment_id: str, spec: str, student_id: str) -> Plan:
    """Parse `student_id`'s work spec (see students.py) for one assignment into a Plan."""
    plan = Plan()
    for item in (part.strip() for part in spec.split(";")):
        kind, _, arg = item.partition(":")
        names = [n.strip() for n in arg.split(",") if n.strip()]
        if kind == "reference":
            pass
        elif kind == "alternative":
            catalogue = alternatives(assignment_id)
            if catalogue:  # none catalogued yet: the reference answers
                by_name = {a.name: a for a in catalogue}
                alt = catalogue[int(arg) % len(catalogue)] if arg.isdigit() else by_name.get(arg)
                if alt is None:
                    raise ValueError(f"{assignment_id}: no alternative {arg!r}; there are {sorted(by_name)}")
                plan.edits += alt.edits
        elif kind in ("mistake", "precision"):  # precision: a right algorithm with float32 internals
            examples = mistakes(assignment_id) if kind == "mistake" else precision_cases(assignment_id)
            by_name = {e.name: e for e in examples}
            for name in names:
                if name not in by_name:
                    raise ValueError(f"{assignment_id}: no {kind} example {name!r}; there are {sorted(by_name)}")
                plan.edits += by_name[name].edits
            plan.wrong = True
        elif kind == "typed":  # an assignment without a hand computation: the reference answers
            if has_hand(assignment_id):
                plan.edits += typed_hand_edits(assignment_id, student_id)
        elif kind == "copied" and not has_hand(assignment_id):
            pass  # nothing to copy: the reference answers
        elif kind == "copied":
            if student_answers(assignment_id, arg) == student_answers(assignment_id, student_id):
                raise ValueError(f"{student_id} copies {arg}'s {assignment_id} answers, but they are the same")
            plan.edits += typed_hand_edits(assignment_id, arg)
            plan.wrong = True
        elif kind == "unanswered":
            plan.keep_unanswered += names or solution_cell_ids(assignment_id)
        elif kind == "missing":
            plan.remove_cells += names
        elif kind == "broken":
            plan.broken = True
        elif kind == "hostile":
            _hostile(arg, assignment_id, plan)
        else:
            raise ValueError(f"unknown work {item!r} for {assignment_id}")
    return plan


def expected_outcome(assignment_id: str, plan: Plan) -> str:
    """The outcome a correct grader gives this work: error (unreadable), zero, partial or full."""
    if plan.broken:
        return ERROR
    if plan.outcome:
        return plan.outcome
    scored = {cell for p in load_assignment(assignment_id).parts if not p.written for cell in p.answer_cells}
    gone = (set(plan.keep_unanswered) | set(plan.remove_cells)) & scored
    if gone == scored:
        return ZERO
    return PARTIAL if plan.wrong or gone else FULL


def make_notebook(assignment_id: str, plan: Plan) -> nbformat.NotebookNode:
    nb = student_notebook(assignment_id, plan.edits, plan.remove_cells, plan.keep_unanswered)
    for n, (after, source) in enumerate(plan.extra_cells):
        cell = nbformat.v4.new_code_cell(source)
        cell.id = f"student-cell-{n + 1}"  # fixed ids: the build is deterministic
        index = len(nb.cells) if after is None else 1 + next(i for i, c in enumerate(nb.cells) if _grade_id(c) == after)
        nb.cells.insert(index, cell)
    return nb


def truncated(text: str) -> str:
    """The notebook as a cut-off upload leaves it: the first 60 % of its characters (not valid JSON)."""
    cut = text[: int(len(text) * 0.6)]
    try:
        json.loads(cut)
    except ValueError:
        return cut
    raise AssertionError("a truncated notebook should not be valid JSON")


def timestamp(student_id: str, assignment_id: str) -> str:
    """A fixed submission time per (student, assignment), in nbgrader collect's format."""
    digest = int.from_bytes(hashlib.sha256(f"{student_id}/{assignment_id}".encode()).digest()[:8], "big")
    when = FIRST_SUBMISSION + timedelta(minutes=digest % SUBMISSION_WINDOW_MINUTES,
                                        microseconds=(digest >> 20) % 60_000_000)
    return when.strftime("%Y-%m-%d %H:%M:%S.%f") + " UTC"


# --- the course folder ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DemoCourse:
    root: Path  # the course directory (CourseDirectory.root)
    submitted: Path  # root / "submitted"
    roster_csv: Path  # for `nbgrader db student import`
    config: Path  # root / "nbgrader_config.py"
    students: tuple[DemoStudent, ...]  # the roster, in order
    notebooks: dict[tuple[str, str], Path]  # (student id, assignment id) -> submitted notebook
    expected: dict[tuple[str, str], str]  # (student id, assignment id) -> "full" | "partial" | "zero" | "error"

    def student(self, student_id: str) -> DemoStudent:
        return next(s for s in self.students if s.id == student_id)

    def submissions(self, outcome: str | None = None) -> list[tuple[str, str]]:
        """(student, assignment) pairs with a submission, optionally only those expected to get `outcome`."""
        return [key for key, value in self.expected.items() if outcome in (None, value)]


def course_config(root: Path) -> str:
    """The repository's nbgrader_config.py, with the course root here and the sources in the repository."""
    original = (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    return original.rstrip("\n") + f"""


# --- the demo course (written by `autograde demo`, autograder/tools/demo/build.py) ---
# The submissions live here; the assignments and release notebooks are the repository's.
c.CourseDirectory.root = {str(root)!r}
c.CourseDirectory.source_directory = {str(REPO_ROOT / "assignments")!r}
c.CourseDirectory.release_directory = {str(REPO_ROOT / "release")!r}
"""


def _prepare_folder(out: Path):
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        if not (out / DEMO_MARKER).exists():
            raise FileExistsError(f"{out} is not empty and not a demo course: choose a new or empty folder")
        shutil.rmtree(out / "submitted", ignore_errors=True)  # a previous demo: rebuild its submissions
    out.mkdir(parents=True, exist_ok=True)
    (out / DEMO_MARKER).write_text("written by autograder.tools.demo.build_demo_course; safe to rebuild\n")


def build_demo_course(out: Path, students: tuple[DemoStudent, ...] = CLASS) -> DemoCourse:
    """Write the demo course to `out` (new, empty, or a previous demo course) and describe it."""
    out = Path(out).resolve()
    _prepare_folder(out)
    submitted = out / "submitted"
    notebooks, expected = {}, {}
    for student in students:
        for assignment_id in assignment_ids():
            if assignment_id not in student.work:
                continue
            plan = plan_work(assignment_id, student.work[assignment_id], student.id)
            text = nbformat.writes(make_notebook(assignment_id, plan))
            if plan.broken:
                text = truncated(text)
            folder = submitted / student.id / assignment_id
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{assignment_id}.ipynb"
            path.write_text(text, encoding="utf-8")
            (folder / "timestamp.txt").write_text(timestamp(student.id, assignment_id), encoding="utf-8")
            notebooks[student.id, assignment_id] = path
            expected[student.id, assignment_id] = expected_outcome(assignment_id, plan)
    roster = out / "roster.csv"
    with roster.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email"])
        for student in students:
            writer.writerow([student.id, student.first_name, student.last_name, student.email])
    config = out / "nbgrader_config.py"
    config.write_text(course_config(out), encoding="utf-8")
    return DemoCourse(out, submitted, roster, config, tuple(students), notebooks, expected)
