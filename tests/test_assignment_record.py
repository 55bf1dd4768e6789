"""The assignment record: an assignment is declared next to itself (its source notebook's metadata) and found by
scanning, so that adding one is adding files."""

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.assignments import (AssignmentRecordError, UnknownAssignment, assignment_ids, load_assignment)
from solutions.student_params import student_params


def _course(tmp_path: Path, records: dict[str, object], parts=("one_code", "one")) -> Path:
    for aid, record in records.items():
        nb = nbformat.v4.new_notebook()
        nb.cells = [
            nbformat.v4.new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION",
                                      metadata={"nbgrader": {"grade": False, "grade_id": parts[0], "locked": False,
                                                             "schema_version": 3, "solution": True, "task": False}}),
            nbformat.v4.new_code_cell("assert f() == 1",
                                      metadata={"nbgrader": {"grade": True, "grade_id": parts[1], "locked": True,
                                                             "points": 2, "schema_version": 3, "solution": False,
                                                             "task": False}}),
        ]
        if record is not None:
            nb.metadata["autograde"] = record
        (tmp_path / "assignments" / aid).mkdir(parents=True)
        nbformat.write(nb, tmp_path / "assignments" / aid / f"{aid}.ipynb")
    return tmp_path


def test_the_course_is_what_the_records_declare():
    ids = assignment_ids()
    assert ids[:6] == ("rmsnorm", "gqa_saving", "gradient_flow", "rope", "swiglu", "mla")
    hand = {a: sorted(load_assignment(a).hand_parts) for a in ids}
    assert hand["rmsnorm"] == ["rmsnorm_hand"] and hand["rope"] == [] and hand["mla"] == ["mla_comparison"]


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_each_record_agrees_with_its_solution_module_and_release(assignment_id):
    """A declared hand part has per-student numbers (solutions/hand/<id>.py's hand_inputs), an assignment without one
    has none; the record travels into release/ unchanged (the students' tools read it)."""
    assignment = load_assignment(assignment_id)
    if assignment.has_hand:
        assert student_params(assignment_id, "alice")
    else:
        with pytest.raises(ValueError, match="no hand computation"):
            student_params(assignment_id, "alice")
    release = json.loads((REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb").read_text())
    source = json.loads(assignment.source.read_text())
    assert release["metadata"]["autograde"] == source["metadata"]["autograde"]


def test_records_are_found_by_scanning_in_their_order(tmp_path):
    root = _course(tmp_path, {"zeta": {"order": 1}, "alpha": {"order": 2, "hand_parts": ["one"]}, "notes": None})
    (tmp_path / "assignments" / "empty").mkdir()  # a folder with no notebook is not an assignment
    assert assignment_ids(root) == ("zeta", "alpha")  # "notes" has no record
    alpha = load_assignment("alpha", root)
    assert alpha.has_hand and alpha.is_hand_part("one") and not alpha.is_hand_part("one_code")
    assert alpha.max_score == 2
    with pytest.raises(UnknownAssignment, match="the assignments are: zeta, alpha"):
        load_assignment("notes", root)


@pytest.mark.parametrize("record, message", [
    ("yes", "must be an object"),
    ({"order": "1"}, "'order' must be an integer"),
    ({"order": True}, "'order' must be an integer"),
    ({}, "'order' must be an integer"),
    ({"order": 1, "hand_parts": "one"}, "'hand_parts' must be a list"),
    ({"order": 1, "hand": ["one"]}, "unknown keys \\['hand'\\]"),
])
def test_a_malformed_record_is_an_error_naming_the_file(tmp_path, record, message):
    root = _course(tmp_path, {"broken": record})
    with pytest.raises(AssignmentRecordError, match=message) as error:
        assignment_ids(root)
    assert "broken.ipynb" in str(error.value)


def test_a_hand_part_that_is_not_a_part_is_an_error(tmp_path):
    root = _course(tmp_path, {"typo": {"order": 1, "hand_parts": ["one_hand"]}})
    with pytest.raises(AssignmentRecordError, match=r"names \['one_hand'\], which are not graded parts"):
        load_assignment("typo", root)


# --- an eighth assignment, added as new files only --------------------------------------------------------

DUMMY = "l2_unit"
DUMMY_SOLUTION = '''"""Reference of the dummy assignment l2_unit (a test's eighth assignment)."""

import torch


def l2_normalize(x):
    """把 x 的每一行缩放成 L2 范数为 1。"""
    ### BEGIN SOLUTION
    return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    ### END SOLUTION
'''
DUMMY_CHECKS = '''"""Checks of the dummy assignment l2_unit."""

import torch

from autograder.catalogue.l2_unit import VARIANTS  # noqa: F401 (the plugin reads the module's catalogue)
from autograder.checks import F64, check, expect_close, expect_true
from solutions import l2_unit as ref


@check("l2_unit", points=1)
def test_keeps_the_shape(student, rng):
    """l2_normalize 返回与输入同形状、同 dtype 的张量"""
    x = torch.randn(2, 3, 4, generator=rng, dtype=torch.float64)
    out = student.call("l2_normalize", x)
    expect_true(isinstance(out, torch.Tensor) and out.shape == x.shape and out.dtype == x.dtype, "形状或 dtype 不对")


@check("l2_unit", points=1)
def test_rows_have_unit_norm(student, rng):
    """l2_normalize 与参考实现一致（float64）"""
    x = torch.randn(3, 5, generator=rng, dtype=torch.float64)
    expect_close(student.call("l2_normalize", x), ref.l2_normalize(x), F64)
'''
DUMMY_CATALOGUE = '''"""The catalogue of the dummy assignment l2_unit's mistakes: none yet."""

from autograder.catalogue import catalogue

VARIANTS = catalogue()
'''
DUMMY_EXAMPLES = '''from autograder.examples import alternative, mistake

NORM = "return x / torch.linalg.vector_norm(x, dim=-1, keepdim=True)"
ALTERNATIVES = [
    alternative("tensor_norm", "the tensor's own norm method", [(NORM, "return x / x.norm(dim=-1, keepdim=True)")]),
    alternative("square_root", "the square root of the sum of squares",
                [(NORM, "return x / (x * x).sum(dim=-1, keepdim=True).sqrt()")]),
]

MISTAKES = [
    mistake("no_norm", "returns x unchanged",
            [(NORM, "return x")],
            {"test_rows_have_unit_norm"}),
]
'''


def _dummy_notebook() -> nbformat.NotebookNode:
    def meta(grade_id, **kw):
        return {"nbgrader": {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3,
                             "solution": False, "task": False, **kw}}
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["autograde"] = {"order": 8, "hand_parts": []}
    solution = DUMMY_SOLUTION.split("import torch\n\n\n", 1)[1]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# 作业 8：L2 归一化（测试用）"),
        nbformat.v4.new_code_cell("import torch", metadata=meta("setup_imports")),
        nbformat.v4.new_markdown_cell("## 第 1 部分：`l2_normalize`（2 分）"),
        nbformat.v4.new_code_cell(solution, metadata={"nbgrader": {
            "grade": False, "grade_id": "l2_unit_code", "locked": False, "schema_version": 3, "solution": True,
            "task": False}}),
        nbformat.v4.new_code_cell('assert l2_normalize(torch.ones(2, 4)).shape == (2, 4), "形状不对"',
                                  metadata=meta("l2_unit", grade=True, points=2)),
    ]
    return nb


def _run(args: list[str], cwd: Path, timeout=600) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(cwd), PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{args} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.mark.slow
def test_an_eighth_assignment_is_new_files_only(tmp_path):
    """Copy the repository, add an assignment as new files (notebook with its record, reference, checks, one
    mistake, its release generated by nbgrader), and change nothing else: the CLI help, selftest, the bench and
    the demo pick it up."""
    repo = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO_ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, repo / name)
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    (repo / "assignments" / DUMMY).mkdir()
    nbformat.write(_dummy_notebook(), repo / "assignments" / DUMMY / f"{DUMMY}.ipynb")
    (repo / "solutions" / f"{DUMMY}.py").write_text(DUMMY_SOLUTION)
    (repo / "autograder" / "catalogue" / f"{DUMMY}.py").write_text(DUMMY_CATALOGUE)
    (repo / "autograder" / "checks" / f"{DUMMY}.py").write_text(DUMMY_CHECKS)
    (repo / "autograder" / "examples" / f"{DUMMY}.py").write_text(DUMMY_EXAMPLES)
    python = sys.executable
    autograde = [python, "-m", "autograder.cli"]
    _run([python, "-m", "nbgrader", "generate_assignment", DUMMY, "--force", "--log-level=WARN"], repo)
    assert (repo / "release" / DUMMY / f"{DUMMY}.ipynb").is_file()

    count = len(assignment_ids()) + 1
    help_text = " ".join(_run(autograde + ["--help"], repo).stdout.split())
    assert f"Grade the chapter's {count} assignments" in help_text and DUMMY in help_text, help_text

    planned = _run([python, "-c", "import tempfile, pathlib\nfrom autograder.tools.selftest import plan\n"
                    "print(sorted({j.assignment_id for j in plan(pathlib.Path(tempfile.mkdtemp()))}))"], repo).stdout
    assert f"'{DUMMY}'" in planned and "'rmsnorm'" in planned
    selftest = _run(autograde + ["selftest", "--assignment", DUMMY], repo).stdout
    assert "selftest passed: 100%" in selftest and DUMMY in selftest

    bench = _run(autograde + ["bench", "--students", "1", "--workers", "1"], repo).stdout
    assert f"({1} students x {count} assignments)" in bench, bench

    demo = _run([python, "-c", "import sys, pathlib\nfrom autograder.tools.demo.build import build_demo_course\n"
                 "course = build_demo_course(pathlib.Path(sys.argv[1]))\n"
                 f"print(sum(1 for (sid, aid) in course.expected if aid == {DUMMY!r}))", str(tmp_path / "demo")],
                repo).stdout
    assert int(demo.strip().splitlines()[-1]) >= 10, demo
    graded = _run(autograde + ["grade", DUMMY, "--submissions", str(tmp_path / "demo"), "--out",
                               str(tmp_path / "out"), "--workers", "1"], repo)
    rows = (tmp_path / "out" / "grades.csv").read_text()
    assert DUMMY in rows.splitlines()[0], graded.stdout

    changed = sorted(str(name) for name, data in before.items()
                     if not (repo / name).is_file() or (repo / name).read_bytes() != data)
    assert not changed, f"adding an assignment changed files of the repository: {changed}"


@pytest.mark.parametrize("assignment_id", assignment_ids())
def test_a_source_notebook_is_read_as_nbformat_reads_it(assignment_id):
    """assignments.source_cells reads the instructor's nbformat-4 notebook as JSON: the metadata and every cell's
    metadata, type and source are what nbformat.read(as_version=4) gives."""
    from autograder.assignments import NotebookNode, source_cells

    assignment = load_assignment(assignment_id)
    for path in (assignment.source, assignment.release):
        nb = nbformat.read(path, as_version=4)
        metadata, cells = source_cells(path)
        assert metadata == nb.metadata and kinds(metadata) == kinds(nb.metadata)
        assert as_read(cells) == as_read(nb.cells)
        assert all(type(c) is NotebookNode for c in cells)  # read as JSON: the run's start imports no nbformat
        assert any("\n" in c.source for c in cells)  # stored as lists of lines, joined as nbformat joins them


def as_read(cells) -> list:
    """What a caller of source_cells can read of each cell: the three keys it has, by key, and each of the three by
    attribute (its value, or the AttributeError a NotebookNode raises)."""
    seen = []
    for c in cells:
        by_attribute = []
        for key in ("metadata", "cell_type", "source"):
            try:
                by_attribute.append(getattr(c, key))
            except AttributeError as exc:
                by_attribute.append(f"AttributeError: {exc}")
        seen.append(({k: c[k] for k in ("metadata", "cell_type", "source") if k in c}, by_attribute,
                     kinds(c.get("metadata"))))
    return seen


def kinds(value):
    """The type names in a value (what an error on it names: 'NotebookNode', not 'dict')."""
    if isinstance(value, dict):
        return type(value).__name__, {k: kinds(v) for k, v in value.items()}
    if isinstance(value, list):
        return [kinds(v) for v in value]
    return type(value).__name__


def test_a_source_notebook_of_an_older_format_is_converted_by_nbformat(tmp_path):
    from autograder.assignments import source_cells

    v3 = nbformat.v3.new_notebook(worksheets=[nbformat.v3.new_worksheet(cells=[
        nbformat.v3.new_code_cell(input="x = 1\ny = 2", metadata={"nbgrader": {"grade_id": "a"}}),
        nbformat.v3.new_text_cell("markdown", source="# 标题")])])
    path = tmp_path / "old.ipynb"
    path.write_text(nbformat.v3.writes_json(v3), encoding="utf-8")
    assert json.loads(path.read_text(encoding="utf-8"))["nbformat"] == 3
    metadata, cells = source_cells(path)
    converted = nbformat.read(path, as_version=4)
    assert metadata == converted.metadata and metadata["orig_nbformat"] == 3
    assert as_read(cells) == as_read(converted.cells)
    assert [(c.cell_type, c.source, c.metadata["nbgrader"]) for c in cells[:1]] == [
        ("code", "x = 1\ny = 2", {"grade_id": "a"})]


def _v4(metadata, cells, minor=5):
    return {"nbformat": 4, "nbformat_minor": minor, "metadata": metadata, "cells": cells}


# instructor notebooks of shapes the course's own do not have: each read by source_cells as nbformat.read reads it,
# or refused as nbformat refuses it
ODD_SOURCES = {
    "transient keys": _v4({"signature": "sha256:0", "orig_nbformat": 3, "kernelspec": {"name": "python3"}},
                          [{"cell_type": "code", "id": "a", "metadata": {"trusted": True, "nbgrader": {"grade_id": "x"}},
                            "source": ["a = 1\n", "b = 2"], "outputs": [], "execution_count": None}]),
    "cell without metadata": _v4({}, [{"cell_type": "markdown", "id": "m", "source": "x"}]),
    "null metadata": _v4(None, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x"}]),
    "raw cell, attachments, empty source": _v4({}, [{"cell_type": "raw", "id": "r", "metadata": {}, "source": ""},
                                                    {"cell_type": "markdown", "id": "n", "metadata": {}, "source": [],
                                                     "attachments": {}}], minor=4),
    "4.0 without ids": _v4({}, [{"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [],
                                 "execution_count": 1}], minor=0),
    "unknown cell type": _v4({}, [{"cell_type": "widget", "id": "w", "metadata": {}, "source": "x"}]),
    "source not text": _v4({}, [{"cell_type": "code", "id": "c", "metadata": {}, "source": 7, "outputs": [],
                                 "execution_count": None}]),
    # nbformat asserts integer versions
    "version 4.0": dict(_v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x"}]), nbformat=4.0),
    "minor null": _v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x"}], minor=None),
    "minor text": _v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x"}], minor="5"),
    "no minor": {"nbformat": 4, "metadata": {}, "cells": [{"cell_type": "raw", "metadata": {}, "source": "x"}]},
    # nbformat rejoins outputs and attachments, and refuses their odd shapes
    "attachments a list": _v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x",
                                    "attachments": []}]),
    "attachments of an image": _v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x",
                                         "attachments": {"a.png": {"image/png": ["iVBO", "Rw0K"]}}}]),
    "an output not a dict": _v4({}, [{"cell_type": "code", "id": "c", "metadata": {}, "source": "x", "outputs": [1],
                                      "execution_count": None}]),
    "stream text not text": _v4({}, [{"cell_type": "code", "id": "c", "metadata": {}, "source": "x",
                                      "outputs": [{"output_type": "stream", "name": "stdout", "text": [1]}],
                                      "execution_count": None}]),
    "a real output": _v4({}, [{"cell_type": "code", "id": "c", "metadata": {}, "source": "print(1)",
                               "outputs": [{"output_type": "stream", "name": "stdout", "text": ["1\n"]}],
                               "execution_count": 1}]),
    # cells nbformat reads (logging that they are invalid) but that have no source or no type
    "a raw cell without source": _v4({}, [{"cell_type": "raw", "id": "r", "metadata": {}},
                                          {"cell_type": "code", "id": "c", "metadata": {}, "source": "x = 1",
                                           "outputs": [], "execution_count": None}]),
    "a cell without a type": _v4({}, [{"id": "r", "metadata": {}, "source": "x"}]),
    "a key of another version": _v4({}, [{"cell_type": "markdown", "id": "m", "metadata": {}, "source": "x",
                                          "prompt_number": 1}]),
    "4.5 without ids": _v4({}, [{"cell_type": "markdown", "metadata": {}, "source": "x"}]),
    "metadata 700 deep": _v4({}, [{"cell_type": "markdown", "id": "m", "source": "x",
                                   "metadata": functools.reduce(lambda inner, _: {"a": inner}, range(700), {})}]),
    # what nbformat makes NotebookNodes of, recursively, under any key: too deep, and it raises
    "a deep value under another key": dict(_v4({}, [{"cell_type": "raw", "id": "r", "metadata": {}, "source": ""}]),
                                           extra=functools.reduce(lambda inner, _: [inner], range(700), [])),
    "a deep value in a cell": _v4({}, [{"cell_type": "raw", "id": "r", "metadata": {}, "source": "",
                                        "extra": functools.reduce(lambda inner, _: [inner], range(700), [])}]),
    "a deep execution count": _v4({}, [{"cell_type": "code", "id": "c", "metadata": {}, "source": "", "outputs": [],
                                        "execution_count": functools.reduce(lambda i, _: [i], range(700), [])}]),
    "an id not text": _v4({}, [{"cell_type": "markdown", "id": [], "metadata": {}, "source": "x"}]),
    "metadata 60 deep": _v4(functools.reduce(lambda inner, _: {"a": [inner]}, range(30), {}),
                            [{"cell_type": "markdown", "id": "m", "source": "x", "metadata": {}}]),
}


@pytest.mark.filterwarnings("ignore::nbformat.warnings.MissingIDFieldWarning")  # nbformat's, on "4.5 without ids"
@pytest.mark.parametrize("name", ODD_SOURCES)
def test_an_instructor_notebook_of_any_shape_is_read_or_refused_as_nbformat_does(name, tmp_path, caplog):
    from autograder.assignments import source_cells

    path = tmp_path / "source.ipynb"
    path.write_text(json.dumps(ODD_SOURCES[name]), encoding="utf-8")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # refused: the same refusal
        with pytest.raises(type(exc)):
            source_cells(path)
        return
    metadata, cells = source_cells(path)
    assert metadata == nb.metadata and kinds(metadata) == kinds(nb.metadata)
    assert as_read(cells) == as_read(nb.cells)


@pytest.mark.parametrize("data", [b'{"cells": [', b"\xff\xfe{}", b"", b"[1, 2]"],
                         ids=["cut short", "not UTF-8", "empty", "a list"])
def test_an_instructor_notebook_that_is_not_a_notebook_is_refused_with_nbformat_s_own_error(data, tmp_path):
    """Not JSON, not UTF-8, or JSON of another shape: the error the instructor reads is nbformat's, word for word
    (json's own would name a position in a file, not the notebook)."""
    from autograder.assignments import source_cells

    path = tmp_path / "source.ipynb"
    path.write_bytes(data)
    with pytest.raises(Exception) as theirs:
        nbformat.read(path, as_version=4)
    with pytest.raises(Exception) as ours:
        source_cells(path)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
