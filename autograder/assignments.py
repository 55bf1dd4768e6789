"""What an assignment is, read from its nbgrader source notebook: the parts, their points, their cells.

The source notebook in assignments/ is the only authority on a part's maximum: nothing in a
submission (edited metadata, duplicated cells) can change it.
"""

import functools
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import REPO_ROOT
from solutions import ASSIGNMENTS


class UnknownAssignment(ValueError):
    pass


@dataclass(frozen=True)
class Part:
    grade_id: str  # the grade cell that is the part
    points: float
    answer_cells: tuple[str, ...]  # grade ids of the solution cells before it
    written: bool  # a markdown answer, read by the instructor, not auto-graded


@dataclass(frozen=True)
class Assignment:
    id: str
    source: Path
    parts: tuple[Part, ...]
    grade_cells: frozenset[str]  # grade ids of all grade cells (self-checks): never run when grading

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.parts)

    @property
    def notebook_name(self) -> str:
        return self.source.name

    def part(self, grade_id: str) -> Part:
        return next(p for p in self.parts if p.grade_id == grade_id)


@functools.lru_cache(maxsize=None)
def load_assignment(assignment_id: str, root: Path = REPO_ROOT) -> Assignment:
    if assignment_id not in ASSIGNMENTS:
        raise UnknownAssignment(f"unknown assignment {assignment_id!r}; the assignments are: {', '.join(ASSIGNMENTS)}")
    source = root / "assignments" / assignment_id / f"{assignment_id}.ipynb"
    nb = nbformat.read(source, as_version=4)
    parts, pending, grade_cells = [], [], set()
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            grade_cells.add(meta["grade_id"])
            written = cell.cell_type == "markdown"
            answers = (meta["grade_id"],) if written else tuple(pending)
            parts.append(Part(meta["grade_id"], float(meta.get("points", 0)), answers, written))
            pending = []
        elif meta.get("solution"):
            pending.append(meta["grade_id"])
    return Assignment(assignment_id, source, tuple(parts), frozenset(grade_cells))


def all_assignments(root: Path = REPO_ROOT) -> list[Assignment]:
    return [load_assignment(a, root) for a in ASSIGNMENTS]


def assignment_of_notebook(grade_ids: set[str], expected: str) -> str | None:
    """The other assignment a notebook belongs to, judged by its grade cells: None when it has any grade cell of
    `expected` (or none of any assignment), else the assignment whose grade cells it holds most of."""
    cells = {a.id: a.grade_cells | {c for p in a.parts for c in p.answer_cells} for a in _all_cached()}
    if not grade_ids or grade_ids & cells.get(expected, set()):
        return None
    best = max(cells, key=lambda a: len(grade_ids & cells[a]))
    return best if grade_ids & cells[best] else None


@functools.lru_cache(maxsize=1)
def _all_cached() -> tuple[Assignment, ...]:
    return tuple(all_assignments())
