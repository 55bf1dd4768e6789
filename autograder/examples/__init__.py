"""Example submissions: catalogued student mistakes and correct work in other styles, per assignment.

Each example is the assignment's source notebook (the reference answer) with a few exact text edits
in its code cells. A Mistake names the checks that must fail for it (all others must pass); an
Alternative is correct work written differently and must get full marks; a PrecisionCase is a right algorithm
with float32 internals on float64 inputs, which loses only the parts' precision checks. The tests grade every
example, the demo class is built from them, and `autograde selftest` uses them.
"""

import importlib
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import REPO_ROOT


@dataclass(frozen=True)
class Mistake:
    name: str
    description: str
    edits: tuple[tuple[str, str], ...]  # (old, new): `old` occurs exactly once in the notebook's code cells
    failing: frozenset[str]  # names of the checks that must fail; every other check must pass
    diagnosis: str | None = None  # the catalogued variant (VARIANTS) the failing checks must name
    # checks that may fail or pass, by student id: a slip a few float32 roundings away from the reference where a
    # float32 check's tolerance is (e.g. an eps of 1e-5 for 1e-6 on unit-scale float32 inputs). Never a precision check
    may_fail: frozenset[str] = frozenset()

    def judged(self, failed: set[str]) -> bool:
        """The failed checks are the ones this mistake must fail, plus any of those it may fail."""
        return set(self.failing) <= failed <= set(self.failing) | set(self.may_fail)


@dataclass(frozen=True)
class Alternative:
    name: str
    description: str
    edits: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class PrecisionCase:
    """Right algorithm, float32 internals on float64 inputs (LlamaRMSNorm's cast, a float32 softmax): it must lose
    exactly the parts' precision checks (`failing`), be named as the precision, and keep at least 85% of the points."""

    name: str
    description: str
    edits: tuple[tuple[str, str], ...]
    failing: frozenset[str]


def precision(name: str, description: str, edits: list[tuple[str, str]], failing: set[str]) -> PrecisionCase:
    return PrecisionCase(name, description, tuple(edits), frozenset(failing))


def with_precision_checks(examples: list[Mistake], precision_of: dict[str, str],
                          forward_right: tuple[str, ...] = ()) -> list[Mistake]:
    """Each mistake that fails a part's float64 check (a key of `precision_of`) also fails that part's precision
    check (its value): both compare a float64 output with the reference, one of them strictly. Mistakes named in
    `forward_right` fail only a gradient, which a forward-only precision check does not see."""
    out = []
    for m in examples:
        extra = set() if m.name in forward_right else {precision_of[c] for c in m.failing if c in precision_of}
        out.append(Mistake(m.name, m.description, m.edits, m.failing | extra, m.diagnosis, m.may_fail))
    return out


def mistake(name: str, description: str, edits: list[tuple[str, str]], failing: set[str],
            diagnosis: str | None = None, may_fail: set[str] = frozenset()) -> Mistake:
    return Mistake(name, description, tuple(edits), frozenset(failing), diagnosis, frozenset(may_fail))


def alternative(name: str, description: str, edits: list[tuple[str, str]]) -> Alternative:
    return Alternative(name, description, tuple(edits))


def mistakes(assignment_id: str) -> list[Mistake]:
    return list(importlib.import_module(f"autograder.examples.{assignment_id}").MISTAKES)


def alternatives(assignment_id: str) -> list[Alternative]:
    return list(getattr(importlib.import_module(f"autograder.examples.{assignment_id}"), "ALTERNATIVES", []))


def precision_cases(assignment_id: str) -> list[PrecisionCase]:
    return list(getattr(importlib.import_module(f"autograder.examples.{assignment_id}"), "PRECISION", []))


class EditDoesNotApply(ValueError):
    pass


def notebook_with_edits(assignment_id: str, edits, extra_cells: list[tuple[int, str]] = (),
                        base: Path | None = None) -> nbformat.NotebookNode:
    """The source notebook (or `base`) with each (old, new) edit applied where `old` occurs exactly once in
    the code cells, and plain code cells inserted at the given positions (negative: from the end)."""
    nb = nbformat.read(base or REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb", as_version=4)
    taken = {cell.get("id") for cell in nb.cells}
    for position, source in extra_cells:
        index = position if position >= 0 else len(nb.cells) + 1 + position
        cell = nbformat.v4.new_code_cell(source)
        while cell.id in taken:  # random ids: of 40,000 cells, two share one about every fifth notebook
            cell.id = nbformat.v4.new_code_cell().id
        taken.add(cell.id)
        nb.cells.insert(index, cell)
    return apply_edits(nb, edits, assignment_id)


def apply_edits(nb: nbformat.NotebookNode, edits, assignment_id: str) -> nbformat.NotebookNode:
    """Apply each (old, new) edit to `nb` in place, in order, where `old` occurs exactly once in its code
    cells (else EditDoesNotApply); return `nb`. Used for the source notebook and for student notebooks."""
    for old, new in edits:
        hits = [c for c in nb.cells if c.cell_type == "code" and old in c.source]
        count = sum(c.source.count(old) for c in hits)
        if count != 1:
            raise EditDoesNotApply(f"edit target occurs {count} times in {assignment_id}: {old!r}")
        hits[0].source = hits[0].source.replace(old, new)
    return nb
