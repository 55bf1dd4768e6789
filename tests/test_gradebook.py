"""The gradebook autograde writes is one nbgrader's own tools accept, also when an older autograde made it."""

import nbformat
from nbgrader import utils

from autograder import REPO_ROOT
from autograder.assignments import load_assignment
from autograder.recording.gradebook import CourseGradebook


def release_cells(assignment_id: str) -> tuple[set[str], set[str]]:
    """(every nbgrader cell, the solution cells) of the student notebook, as generate_assignment records them."""
    cells = nbformat.read(REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb", as_version=4).cells
    tracked = {c.metadata["nbgrader"]["grade_id"] for c in cells
               if utils.is_grade(c) or utils.is_solution(c) or utils.is_locked(c)}
    return tracked, {c.metadata["nbgrader"]["grade_id"] for c in cells if utils.is_solution(c)}


def test_a_gradebook_an_older_autograde_wrote_gets_the_cells_and_comments_nbgrader_needs(tmp_path):
    assignment = load_assignment("gradient_flow")
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        # what the first version wrote: the grade cells only, and a submission made from them
        gb.gb.add_assignment(assignment.id)
        gb.gb.update_or_create_notebook(assignment.id, assignment.id)
        for part in assignment.parts:
            gb.gb.update_or_create_grade_cell(part.grade_id, assignment.id, assignment.id, max_score=0.0,
                                              cell_type="markdown" if part.written else "code")
        gb.gb.add_student("alice")
        gb.gb.add_submission(assignment.id, "alice")

        gb.ensure_assignment(assignment)
        tracked, solutions = release_cells(assignment.id)
        notebook = gb.gb.find_notebook(assignment.id, assignment.id)
        assert {c.name for c in notebook.source_cells} == tracked
        assert {c.name for c in notebook.solution_cells} == solutions
        sources = {c.name: c for c in notebook.source_cells}
        assert sources["student_id"].locked and sources["student_id"].checksum
        assert {c.name: c.max_score for c in notebook.grade_cells}["gradient_flow_observation"] == 2.0
        submitted = gb.gb.find_submission_notebook(assignment.id, assignment.id, "alice")
        assert {c.name for c in submitted.comments} == solutions
        assert {g.name for g in submitted.grades} == {p.grade_id for p in assignment.parts}
        assert all(sources[name].source == "" or "BEGIN SOLUTION" not in sources[name].source for name in sources)


# --- the migration head a new gradebook is stamped with, read off nbgrader's scripts ---------------------------

def _alembic_heads(versions) -> list[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(versions.parent))
    return list(ScriptDirectory.from_config(config).get_heads())


def test_the_head_read_off_nbgraders_scripts_is_alembics():
    from autograder.recording.gradebook import _alembic_head, _alembic_script_head, _nbgrader_migrations, _read_head

    versions = _nbgrader_migrations() / "versions"
    assert _read_head(versions) is not None  # the fast path is the one taken with the nbgrader installed
    assert _read_head(versions) == _alembic_script_head() == _alembic_head()
    assert _alembic_heads(versions) == [_read_head(versions)]


def _script(folder, name, revision, down, extra=""):
    (folder / f"{name}.py").write_text(f'"""{name}"""\nrevision = {revision!r}\ndown_revision = {down!r}\n{extra}'
                                       "\n\ndef upgrade():\n    pass\n\n\ndef downgrade():\n    pass\n")


def test_the_head_read_off_scripts_agrees_with_alembic_or_leaves_it_to_alembic(tmp_path):
    from autograder.recording.gradebook import _read_head

    cases = {
        "chain": [("a", None), ("b", "a"), ("c", "b")],
        "merge": [("a", None), ("b", "a"), ("c", "a"), ("m", ("b", "c"))],
        "two heads": [("a", None), ("b", "a"), ("c", "a")],
        "labels": [("a", None), ("b", "a", "branch_labels = ('x',)")],
        "depends": [("a", None), ("b", "a"), ("c", "a", "depends_on = 'b'")],
        "computed": [("a", None), ("b", "a", "down_revision = 'a'.upper().lower()")],
        "missing down": [("b", "a")],
    }
    for name, scripts in cases.items():
        versions = tmp_path / name.replace(" ", "_") / "versions"
        versions.mkdir(parents=True)
        for n, (revision, down, *extra) in enumerate(scripts):
            _script(versions, f"r{n}_{revision}", revision, down, *extra)
        read = _read_head(versions)
        if name in ("chain", "merge"):
            assert read == {"chain": "c", "merge": "m"}[name]
        if read is not None:
            assert _alembic_heads(versions) == [read], name
        else:
            assert name in ("two heads", "labels", "depends", "computed", "missing down"), name
