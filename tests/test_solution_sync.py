"""The solution cells of assignments/ and the modules of solutions/ are one truth."""

import shutil

import nbformat

from autograder import REPO_ROOT

from autograder.tools import sync_solutions
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()


def test_every_assignment_mirrors_its_reference():
    for assignment_id in ASSIGNMENTS:
        nb = nbformat.read(REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb", as_version=4)
        mirrored = [entry for cell in nb.cells for entry in cell.metadata.get("autograde", {}).get("mirror", [])]
        assert any(entry.startswith(f"solutions.{assignment_id}:") for entry in mirrored), assignment_id
        # every solution cell that defines code is mirrored (hand answers are typed numbers, not code)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type == "code" and meta.get("solution") and ("def " in cell.source or "class " in cell.source):
                assert "autograde" in cell.metadata, f"{assignment_id}: cell {meta['grade_id']} is hand-kept code"


def test_solution_cells_equal_the_references():
    assert sync_solutions.check() == []


def test_a_drifted_cell_is_detected_and_resynced(tmp_path):
    shutil.copytree(REPO_ROOT / "assignments", tmp_path / "assignments")
    path = tmp_path / "assignments" / "rmsnorm" / "rmsnorm.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "solutions.rmsnorm:rms_norm" in c.metadata.get("autograde", {}).get("mirror", []))
    cell.source = cell.source.replace("+ eps)", ") + eps")  # eps outside the root: a hand edit
    nbformat.write(nb, path)

    mismatches = sync_solutions.check(tmp_path)
    assert [(m.notebook, m.mirror) for m in mismatches] == [(path, ("solutions.rmsnorm:rms_norm",))]
    assert sync_solutions.sync(tmp_path) == [path]
    assert sync_solutions.check(tmp_path) == []


def test_definition_source_keeps_the_closing_solution_marker():
    source = sync_solutions.definition_source("solutions.rmsnorm", "rms_norm")
    assert source.startswith("def rms_norm(") and source.rstrip().endswith("### END SOLUTION")
