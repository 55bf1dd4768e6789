"""The bundled demo class: student notebooks, the catalogue applied to them, the course folder, its outcomes."""

import csv
import json
import re
import time

import nbformat
import pytest
from traitlets.config import Config

from autograder import REPO_ROOT
from autograder.tools.demo import CLASS, build_demo_course, student_notebook, without_markers
from autograder.tools.demo.build import solution_cell_ids
from autograder.examples import alternatives, mistakes, notebook_with_edits
from conftest import release_notebook
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

STUB = "raise NotImplementedError()"
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} UTC$")
SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def nbgrader_meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


# --- student_notebook ----------------------------------------------------------------------------------


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_student_notebook_is_the_release_with_the_reference_answers(assignment_id):
    release = nbformat.read(release_notebook(assignment_id), as_version=4)
    source = nbformat.read(REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb", as_version=4)
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in source.cells if nbgrader_meta(c).get("solution")}
    nb = student_notebook(assignment_id)
    nbformat.validate(nb)
    assert len(nb.cells) == len(release.cells)
    for mine, theirs in zip(nb.cells, release.cells):
        assert mine.cell_type == theirs.cell_type and mine.metadata == theirs.metadata
        if nbgrader_meta(theirs).get("solution"):
            assert mine.source == without_markers(answers[nbgrader_meta(theirs)["grade_id"]])
            assert mine.source.strip() and "SOLUTION" not in mine.source and "YOUR ANSWER HERE" not in mine.source
        else:
            assert mine.source == theirs.source
    assert all(STUB not in c.source for c in nb.cells if c.cell_type == "code")  # (the instructions mention it)
    assert len(answers) >= 3


def test_student_notebook_unanswered_and_removed_cells():
    nb = student_notebook("rmsnorm", keep_unanswered=["rmsnorm_module_code"], remove_cells=["rmsnorm_function"])
    cells = {nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    assert "rmsnorm_function" not in cells
    assert STUB in cells["rmsnorm_module_code"].source and STUB not in cells["rms_norm_code"].source
    with pytest.raises(ValueError):
        student_notebook("rmsnorm", keep_unanswered=["rmsnorm_function"])  # a grade cell, not a solution cell
    with pytest.raises(ValueError):
        student_notebook("rmsnorm", remove_cells=["no_such_cell"])


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_every_mistake_and_alternative_applies_to_a_student_notebook(assignment_id):
    """Each catalogued edit applies to the student's notebook and has there exactly its effect on the source."""
    plain = student_notebook(assignment_id)
    examples = mistakes(assignment_id) + alternatives(assignment_id)
    assert len(mistakes(assignment_id)) >= 3
    for example in examples:
        nb = student_notebook(assignment_id, example.edits)  # raises EditDoesNotApply if an edit does not apply
        edited_source = notebook_with_edits(assignment_id, example.edits)
        assert len(nb.cells) == len(edited_source.cells), example.name
        for mine, theirs in zip(nb.cells, edited_source.cells):
            expected = without_markers(theirs.source) if nbgrader_meta(theirs).get("solution") else theirs.source
            assert mine.source == expected, (example.name, nbgrader_meta(theirs).get("grade_id"))
        assert [c.source for c in nb.cells] != [c.source for c in plain.cells], example.name


# --- the demo course -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    started = time.monotonic()
    built = build_demo_course(tmp_path_factory.mktemp("demo") / "course")
    assert time.monotonic() - started < 10
    return built


def test_the_class_is_about_twenty_varied_students(course):
    ids = [s.id for s in course.students]
    assert 18 <= len(ids) <= 25 and len(set(ids)) == len(ids)
    assert all(SAFE_ID.match(i) and i not in (".", "..") for i in ids), ids
    assert any("." in i for i in ids) and sum(i.isdigit() for i in ids) >= 15
    assert all(s.description and "\n" not in s.description for s in course.students)
    outcomes = list(course.expected.values())
    assert {"full", "partial", "zero", "error"} <= set(outcomes)
    assert outcomes.count("full") >= len(outcomes) // 3 and outcomes.count("partial") >= 10
    specs = [w for s in course.students for w in s.work.values()]
    for name in ("no_sqrt", "eps_outside_root", "chapter_mod_mapping", "mask_ignored", "percent_not_fraction",
                 "half_split_pairing", "gate_up_swapped", "bias_true", "cache_returns_k", "stacks_swapped"):
        assert any(name in w for w in specs), name
    for kind in ("alternative:", "copied:", "missing:", "unanswered", "broken", "hostile:"):
        assert any(kind in w for w in specs), kind
    assert any(len(s.work) < len(ASSIGNMENTS) for s in course.students), "someone handed in only some assignments"


def test_the_course_has_nbgraders_layout(course):
    submitted = course.root / "submitted"
    assert course.submitted == submitted
    found = {(p.parent.parent.name, p.parent.name): p for p in submitted.glob("*/*/*.ipynb")}
    assert found == course.notebooks and set(course.expected) == set(course.notebooks)
    for (student_id, assignment_id), path in course.notebooks.items():
        assert path == submitted / student_id / assignment_id / f"{assignment_id}.ipynb"
        assert assignment_id in course.student(student_id).work
        stamp = (path.parent / "timestamp.txt").read_text()
        assert TIMESTAMP.match(stamp), stamp
    for student in course.students:
        assert {a for s, a in course.notebooks if s == student.id} == set(student.work)
    assert sum(len(s.work) for s in course.students) == len(course.notebooks)


def test_the_roster_lists_every_student(course):
    with course.roster_csv.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
    assert reader.fieldnames == ["id", "first_name", "last_name", "email"]
    assert [r["id"] for r in rows] == [s.id for s in CLASS]
    assert all(r["first_name"] and r["last_name"] and "@" in r["email"] for r in rows)


def test_the_config_points_nbgrader_at_the_course(course):
    config = Config()
    exec(course.config.read_text(encoding="utf-8"), {"get_config": lambda: config, "__file__": str(course.config)})
    assert config.CourseDirectory.root == str(course.root)
    assert (REPO_ROOT / "assignments" / "rmsnorm" / "rmsnorm.ipynb").samefile(
        f"{config.CourseDirectory.source_directory}/rmsnorm/rmsnorm.ipynb")
    assert config.CourseDirectory.course_id


def test_the_broken_notebook_is_not_valid_json_and_the_others_are_notebooks(course):
    broken = course.submissions("error")
    assert len(broken) == 1
    for key, path in course.notebooks.items():
        text = path.read_text(encoding="utf-8")
        if key in broken:
            with pytest.raises(ValueError):
                json.loads(text)
            assert text.startswith("{")
        else:
            nbformat.validate(nbformat.reads(text, as_version=4))


def test_unanswered_work_is_the_release_stub(course):
    student_id, assignment_id = course.submissions("zero")[0]
    nb = nbformat.read(course.notebooks[student_id, assignment_id], as_version=4)
    stubs = {nbgrader_meta(c)["grade_id"] for c in nb.cells
             if nbgrader_meta(c).get("solution") and c.cell_type == "code" and STUB in c.source}
    assert stubs, (student_id, assignment_id)
    assert stubs <= set(solution_cell_ids(assignment_id))


def test_the_build_is_deterministic_and_rebuilds_a_demo_folder(course, tmp_path):
    again = build_demo_course(tmp_path / "again")
    assert again.expected == course.expected
    for key, path in course.notebooks.items():
        assert again.notebooks[key].read_bytes() == path.read_bytes(), key
        assert (again.notebooks[key].parent / "timestamp.txt").read_bytes() == (path.parent / "timestamp.txt").read_bytes()
    assert again.roster_csv.read_bytes() == course.roster_csv.read_bytes()
    build_demo_course(tmp_path / "again")  # a previous demo course may be rebuilt in place
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        build_demo_course(tmp_path / "other")  # never into a folder that holds something else


# --- grading a sample ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_grading_a_sample_of_the_demo_gives_the_expected_outcomes(course):
    from autograder.engine import GradingOptions, Submission, grade_batch
    from grading_helpers import TEST_LIMITS

    broken = course.submissions("error")[0]
    assignment_id = broken[1]
    hostile = next((s.id, a) for s in course.students for a, w in s.work.items()
                   if a == assignment_id and w.startswith("hostile:"))
    full = next(k for k in course.submissions("full") if k[1] == assignment_id and course.student(k[0]).work[k[1]] == "reference")
    partial = next(k for k in course.submissions("partial") if k[1] == assignment_id
                   and course.student(k[0]).work[k[1]].startswith("mistake:"))
    sample = [full, partial, broken, hostile]
    results = grade_batch([Submission(course.notebooks[k], k[1], k[0]) for k in sample],
                          GradingOptions(limits=TEST_LIMITS))
    by_key = {(r.student_id, r.assignment_id): r for r in results}

    def outcome(r):
        if r.status == "error":
            return "error"
        return "full" if r.score == r.graded_max_score else "zero" if r.score == 0 else "partial"

    assert {k: outcome(by_key[k]) for k in sample} == {k: course.expected[k] for k in sample}
    assert [course.expected[k] for k in sample] == ["full", "partial", "error", course.expected[hostile]]
    assert "JSON" in by_key[broken].message
