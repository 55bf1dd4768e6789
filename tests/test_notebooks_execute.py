"""The notebooks run in a real Jupyter kernel as a student would run them (Restart & Run All)."""

import ast
import json
import re

import nbformat
import pytest

from conftest import STUDENT_IDS, release_notebook, source_notebook
from notebook_exec import execute_notebook
from autograder.assignments import assignment_ids, has_hand
from solutions.student_params import student_answers

ASSIGNMENTS = assignment_ids()
HAND = tuple(a for a in ASSIGNMENTS if has_hand(a))

ANSWER_MARK = "__HAND_ANSWERS__"
ALLOWED_IN_RELEASE = {"NotImplementedError", "NameError"}


def grade_cell_ids(path):
    nb = nbformat.read(path, as_version=4)
    return [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")
            and c.cell_type == "code"]


def with_answer_dump(path, tmp_path, assignment_id):
    """A copy of the notebook with one last cell that prints the hand-computation answers as JSON."""
    nb = nbformat.read(path, as_version=4)
    if assignment_id in HAND:
        names = list(student_answers(assignment_id, "anyone"))
        dump = ", ".join(f"{name!r}: {name}" for name in names)
        nb.cells.append(nbformat.v4.new_code_cell(f"import json\nprint({ANSWER_MARK!r} + json.dumps({{{dump}}}))"))
    copy = tmp_path / path.name
    nbformat.write(nb, copy)
    return copy


def names_solution_cells_define(path) -> set[str]:
    """Top-level names that the solution cells of a source notebook define."""
    names = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    names.add(node.name)
                elif isinstance(node, ast.Assign):
                    names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def dumped_answers(nb):
    for output in nb.cells[-1].get("outputs", []):
        if output.get("output_type") == "stream" and ANSWER_MARK in output["text"]:
            return json.loads(output["text"].split(ANSWER_MARK, 1)[1])
    raise AssertionError("the answer dump cell printed nothing")


def close(a, b, rel=1e-9):
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, rel) for x, y in zip(a, b))
    if isinstance(a, str):
        return a == b
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("student_id", STUDENT_IDS)
@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_source_notebook_passes_all_self_checks(assignment_id, student_id, tmp_path):
    path = with_answer_dump(source_notebook(assignment_id), tmp_path, assignment_id)
    nb, errors = execute_notebook(path, student_id)
    assert errors == [], f"the reference notebook raised: {errors}"
    # every grade cell ran to its end
    passed = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"
              and any("✅" in o.get("text", "") for o in c.get("outputs", []))]
    assert len(passed) == len(grade_cell_ids(path))
    # the reference answers of the hand computations are right for this student's own numbers
    if assignment_id in HAND:
        got, expected = dumped_answers(nb), student_answers(assignment_id, student_id)
        for name, value in expected.items():
            assert close(got[name], value), f"{name}: notebook gives {got[name]}, reference {value}"


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_release_notebook_meets_only_stub_errors(assignment_id):
    nb, errors = execute_notebook(release_notebook(assignment_id), STUDENT_IDS[0])
    unexpected = [e for e in errors if e.ename not in ALLOWED_IN_RELEASE]
    assert unexpected == [], f"a student running the untouched notebook meets: {unexpected}"
    # a NameError may only be about a name that an unanswered solution cell would define
    defined = names_solution_cells_define(source_notebook(assignment_id))
    for error in errors:
        if error.ename == "NameError":
            name = re.search(r"name '(\w+)' is not defined", error.evalue).group(1)
            assert name in defined, f"cell {error.index}: NameError for {name!r}, which no solution cell defines"
    # every part is unanswered, so every grade cell stops at a stub or a missing name
    failing_parts = {e.grade_id for e in errors}
    assert set(grade_cell_ids(release_notebook(assignment_id))) <= failing_parts
