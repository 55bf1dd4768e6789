"""The student environment file covers every package the release notebooks import."""

import ast
import re
import sys

import nbformat

from autograder import REPO_ROOT
from conftest import release_notebook
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

# import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "PIL": "pillow"}


def listed_packages() -> set[str]:
    names = set()
    for line in (REPO_ROOT / "environment" / "student-requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            names.add(re.split(r"[<>=!~ \[]", line, maxsplit=1)[0].lower())
    return names


def imported_modules(path) -> set[str]:
    modules = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


def test_student_requirements_cover_the_notebooks():
    listed = listed_packages()
    assert {"torch", "ipykernel"} <= listed
    for assignment_id in ASSIGNMENTS:
        third_party = imported_modules(release_notebook(assignment_id)) - set(sys.stdlib_module_names)
        missing = {DISTRIBUTION.get(m, m).lower() for m in third_party} - listed
        assert not missing, f"{assignment_id} imports {missing}, not in environment/student-requirements.txt"


def test_release_notebooks_import_nothing_of_ours():
    for assignment_id in ASSIGNMENTS:
        assert not imported_modules(release_notebook(assignment_id)) & {"solutions", "autograder"}
