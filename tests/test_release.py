"""The committed release/ is exactly what nbgrader generates from assignments/, and leaks nothing."""

import re

import nbformat
import pytest

from conftest import release_notebook, source_notebook
from solutions import ASSIGNMENTS

MIN_LEAK_LEN = 20


def cells(path):
    return nbformat.read(path, as_version=4).cells


def solution_region_lines(path) -> set[str]:
    """Stripped lines of 20+ characters inside BEGIN/END SOLUTION regions of a source notebook."""
    lines, inside = set(), False
    for cell in cells(path):
        for line in cell.source.splitlines():
            if "BEGIN SOLUTION" in line:
                inside = True
            elif "END SOLUTION" in line:
                inside = False
            elif inside and len(line.strip()) >= MIN_LEAK_LEN:
                lines.add(line.strip())
        assert not inside, f"{path}: a solution region is not closed"
    return lines


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_release_equals_fresh_generate_assignment(assignment_id, regenerated_release):
    committed = cells(release_notebook(assignment_id))
    fresh = cells(regenerated_release[assignment_id])
    assert len(committed) == len(fresh), "release/ is stale: run nbgrader generate_assignment --force and commit"
    for index, (old, new) in enumerate(zip(committed, fresh)):
        assert old.cell_type == new.cell_type, f"cell {index}: type differs"
        assert old.source == new.source, f"cell {index}: source differs; regenerate release/{assignment_id}"
        assert old.metadata.get("nbgrader") == new.metadata.get("nbgrader"), f"cell {index}: nbgrader metadata differs"


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_release_has_no_solution_markers(assignment_id):
    for index, cell in enumerate(cells(release_notebook(assignment_id))):
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
            assert marker not in cell.source, f"cell {index} contains {marker!r}"


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_release_leaks_no_solution_line(assignment_id):
    secret = solution_region_lines(source_notebook(assignment_id))
    assert secret, "the source notebook should have solution regions"
    for index, cell in enumerate(cells(release_notebook(assignment_id))):
        text = "\n".join(line.strip() for line in cell.source.splitlines())
        leaked = sorted(line for line in secret if line in text)
        assert not leaked, f"cell {index} of the release contains solution lines: {leaked}"


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_every_part_is_solution_cells_then_one_locked_grade_cell(assignment_id):
    """nbgrader's model: answers in solution cells, the part itself is the locked grade cell after them."""
    seen_ids, pending_solution = set(), False
    parts = []
    for cell in cells(source_notebook(assignment_id)):
        meta = cell.metadata.get("nbgrader")
        if not meta:
            continue
        assert meta["grade_id"] not in seen_ids, f"duplicate grade_id {meta['grade_id']}"
        seen_ids.add(meta["grade_id"])
        if meta.get("solution") and not meta.get("grade"):
            pending_solution = True
        elif meta.get("grade"):
            if cell.cell_type == "code":
                assert meta.get("locked"), f"grade cell {meta['grade_id']} must be locked"
                assert pending_solution, f"grade cell {meta['grade_id']} has no solution cell before it"
            assert meta.get("points", 0) >= 0
            assert re.fullmatch(r"[a-z][a-z0-9_]*", meta["grade_id"]), meta["grade_id"]
            parts.append(meta["grade_id"])
            pending_solution = False
    assert len(parts) >= 3, f"{assignment_id} should have at least three parts, found {parts}"
