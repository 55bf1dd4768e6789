"""The committed release/ is exactly what nbgrader generates from assignments/, and leaks nothing."""

import re

import nbformat
import pytest

from conftest import release_notebook, source_notebook
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

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


# --- nothing students get carries an answer ------------------------------------------------------------------


def normalised(line: str) -> str:
    return " ".join(line.split())


def _region_lines(text: str) -> set[str]:
    lines, inside = set(), False
    for line in text.splitlines():
        if "BEGIN SOLUTION" in line:
            inside = True
        elif "END SOLUTION" in line:
            inside = False
        elif inside and len(normalised(line)) >= MIN_LEAK_LEN:
            lines.add(normalised(line))
    return lines


def answer_lines() -> dict[str, str]:
    """Normalised line -> where it comes from: every solution region of assignments/ (code and written answers) and
    of solutions/*.py, and the code that computes the hand answers (`hand_answers`, `student_answers`)."""
    import ast

    from autograder import REPO_ROOT

    found = {}
    for path in sorted((REPO_ROOT / "assignments").glob("*/*.ipynb")):
        for cell in cells(path):
            found.update(dict.fromkeys(_region_lines(cell.source), str(path.relative_to(REPO_ROOT))))
    for path in sorted((REPO_ROOT / "solutions").rglob("*.py")):  # solutions/hand/ too
        text = path.read_text(encoding="utf-8")
        found.update(dict.fromkeys(_region_lines(text), str(path.relative_to(REPO_ROOT))))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name in ("hand_answers", "student_answers"):
                body = ast.get_source_segment(text, node).splitlines()[1:]  # the body, not the signature
                found.update({normalised(line): f"{path.name}:{node.name}" for line in body
                              if len(normalised(line)) >= MIN_LEAK_LEN and not normalised(line).startswith('"""')})
    return found


def students_get() -> dict[str, str]:
    """Every file in release/ (what nbgrader hands out, and the checker): name -> its text, normalised per line."""
    from autograder import REPO_ROOT

    texts = {}
    for path in sorted((REPO_ROOT / "release").rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        text = "\n".join(c.source for c in cells(path)) if path.suffix == ".ipynb" else path.read_text(encoding="utf-8")
        texts[str(path.relative_to(REPO_ROOT))] = "\n".join(normalised(line) for line in text.splitlines())
    return texts


def leaked(text: str, secret: dict[str, str]) -> list[str]:
    return sorted(f"{line}  [{where}]" for line, where in secret.items() if line in text)


def test_nothing_students_get_carries_a_solution_line():
    secret = answer_lines()
    assert len(secret) > 100, "the solution regions were not found"
    got = students_get()
    assert all(f"release/{a}/check_notebook.py" in got for a in ASSIGNMENTS) and len(got) >= 3 * len(ASSIGNMENTS)
    for name, text in got.items():
        assert not leaked(text, secret), f"{name} contains answer lines: {leaked(text, secret)[:5]}"


def test_the_leak_check_finds_a_planted_line():
    secret = answer_lines()
    line, where = next((line, where) for line, where in secret.items() if where.startswith("solutions/"))
    hand = next(line for line, where in secret.items() if where.endswith(":hand_answers"))
    checker = students_get()["release/rmsnorm/check_notebook.py"]
    assert leaked(checker + "\n    x = 1; " + line + "\n" + hand, secret) == sorted(
        f"{s}  [{secret[s]}]" for s in {line, hand})


def test_the_committed_checker_is_what_the_build_writes(tmp_path):
    """In every assignment's folder, release/<id>/ and assignments/<id>/ (which generate_assignment copies to
    release/<id>/), the checker and the requirements exactly as `autograde student-checker` writes them."""
    from autograder import REPO_ROOT
    from autograder.tools.student_check import student_files

    fresh = student_files(REPO_ROOT)
    assert sorted(fresh) == ["autograde_submit.py", "check_notebook.py", "student-requirements.txt"]
    for assignment_id in ASSIGNMENTS:
        for folder in (REPO_ROOT / "release" / assignment_id, REPO_ROOT / "assignments" / assignment_id):
            for name, text in fresh.items():
                assert (folder / name).is_file(), f"{folder / name} is missing: run `autograde student-checker`"
                assert (folder / name).read_text(encoding="utf-8") == text, \
                    f"{folder / name} is stale: run `autograde student-checker` (or bash scripts/dev.sh generate)"
    assert not (REPO_ROOT / "release" / "check_notebook.py").exists()  # one place: next to each notebook
    for script in (fresh["check_notebook.py"], fresh["autograde_submit.py"]):  # nothing of the grader's
        assert "import autograder" not in script and "from autograder" not in script
        assert "import solutions" not in script and "from solutions" not in script
    checker = fresh["check_notebook.py"]
    assert "import autograder" not in checker and "from autograder" not in checker
    assert "import solutions" not in checker and "from solutions" not in checker
    # the requirements as they lie next to the notebook: the install line names the file there
    assert "-r student-requirements.txt" in fresh["student-requirements.txt"]
    assert "environment/" not in fresh["student-requirements.txt"]
    assert (REPO_ROOT / "environment" / "student-requirements.txt").read_text(encoding="utf-8").replace(
        "environment/student-requirements.txt", "student-requirements.txt") == fresh["student-requirements.txt"]


def test_release_assignment_hands_out_the_checker_and_the_requirements(tmp_path):
    """nbgrader 0.9.6's release_assignment copies the whole release/<id>/ folder: ExchangeReleaseAssignment.copy_files
    calls Exchange.do_copy(src_path, dest_path), a shutil.copytree filtered only by CourseDirectory.ignore, include
    and max_file_size (nbgrader/exchange/default/release_assignment.py, exchange.py). That same copy, with this
    course's nbgrader_config.py, run here on each release folder."""
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
    from traitlets.config.loader import PyFileConfigLoader

    from autograder import REPO_ROOT

    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    release = ExchangeReleaseAssignment(coursedir=CourseDirectory(config=config), config=config)
    for assignment_id in ASSIGNMENTS:
        release.do_copy(str(REPO_ROOT / "release" / assignment_id), str(tmp_path / assignment_id))
        got = sorted(p.name for p in (tmp_path / assignment_id).iterdir())
        assert got == sorted([f"{assignment_id}.ipynb", "autograde_submit.py", "check_notebook.py",
                              "student-requirements.txt"]), got
        assert (tmp_path / assignment_id / "check_notebook.py").read_bytes() == \
            (REPO_ROOT / "release" / assignment_id / "check_notebook.py").read_bytes()


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_generate_assignment_writes_the_student_files_into_release(assignment_id, regenerated_release):
    """`nbgrader generate_assignment --force` empties release/<id>/ and copies the other files of assignments/<id>/:
    the checker and the requirements come back with every regeneration, equal to the committed ones."""
    from autograder import REPO_ROOT

    fresh = regenerated_release[assignment_id].parent
    committed = REPO_ROOT / "release" / assignment_id
    assert sorted(p.name for p in fresh.iterdir()) == sorted(p.name for p in committed.iterdir())
    for name in ("check_notebook.py", "student-requirements.txt", "autograde_submit.py"):
        assert (fresh / name).read_bytes() == (committed / name).read_bytes()
