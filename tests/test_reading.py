"""Reading a submission: by grade_id, outputs ignored, magics neutralised, broken notebooks a clear error."""

import json

import nbformat
import pytest

from autograder.assignments import load_assignment
from autograder.intake.reading import UnreadableNotebook, neutralise_magics, prepare
from conftest import source_notebook

RMSNORM = load_assignment("rmsnorm")


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_parts_and_points_come_from_the_source_notebook():
    assert [(p.grade_id, p.points) for p in RMSNORM.parts] == [
        ("rmsnorm_hand", 2.0), ("rmsnorm_function", 4.0), ("rmsnorm_module", 4.0)]
    assert RMSNORM.part("rmsnorm_function").answer_cells == ("rms_norm_code",)
    written = load_assignment("gradient_flow").part("gradient_flow_observation")
    assert written.written and written.points == 2  # graded by hand (formgrader)


def test_grade_cells_are_not_run_and_outputs_are_ignored(tmp_path):
    nb = nbformat.read(source_notebook("rmsnorm"), as_version=4)
    nb.cells[13].outputs = [nbformat.v4.new_output("stream", text="score: 10/10")]
    nb.cells[13].execution_count = 1
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    prepared = prepare(path, RMSNORM)
    run_ids = [c.grade_id for c in prepared.cells]
    assert "rms_norm_code" in run_ids and not set(run_ids) & RMSNORM.grade_cells
    assert {"hand_answer", "rms_norm_code", "rmsnorm_module_code"} <= prepared.answer_cells_found


def test_magics_and_shell_lines_are_neutralised():
    source = "%matplotlib inline\nx = 1\n!rm -rf /\nif x:\n    %time y = 2\n"
    out = neutralise_magics(source)
    compile(out, "<cell>", "exec")
    assert "rm -rf" not in out.replace("# IPython: !rm -rf /", "") and "x = 1" in out
    assert neutralise_magics("%%bash\nrm -rf /\n").startswith("# %%bash")


@pytest.mark.parametrize("data,fragment", [
    (b"{not json", "不是有效的 JSON"),
    (b"\xff\xfe\x00garbage", "UTF-8"),
    (json.dumps({"cells": []}).encode(), "nbformat"),
    (json.dumps([1, 2, 3]).encode(), "nbformat"),
])
def test_broken_notebooks_are_a_clear_error(tmp_path, data, fragment):
    with pytest.raises(UnreadableNotebook) as info:
        prepare(write(tmp_path, "broken.ipynb", data), RMSNORM)
    assert fragment in info.value.message


def test_a_link_to_a_secret_is_refused(tmp_path):
    secret = write(tmp_path, "secret.txt", b'{"nbformat": 4, "cells": []}')
    link = tmp_path / "submission.ipynb"
    link.symlink_to(secret)
    with pytest.raises(UnreadableNotebook):
        prepare(link, RMSNORM)


def test_an_nbformat_3_notebook_is_read(tmp_path):
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [
        {"cells": [{"cell_type": "code", "input": "x = 1", "language": "python", "outputs": [], "metadata": {}}]}]}
    prepared = prepare(write(tmp_path, "old.ipynb", json.dumps(v3).encode()), RMSNORM)
    assert [c.source for c in prepared.cells] == ["x = 1"]


def test_wire_round_trips_odd_strides_and_dtypes():
    """Tensors with any strides (one-element ones included), dtypes and nesting cross the boundary intact."""
    import torch

    from autograder.running.sandbox import wire

    values = {"one": torch.zeros(4, dtype=torch.float64)[::2][:1], "t": torch.arange(6.0).reshape(2, 3).t(),
              "bf16": torch.ones(3, dtype=torch.bfloat16), "dtype": torch.float64, "nested": ([1, 2.5], (None, "x")),
              "empty": torch.empty(0, 3)}
    buffers = []
    back = wire.decode(wire.encode(values, buffers), buffers, 10**6)
    for key in ("one", "t", "bf16", "empty"):
        assert torch.equal(back[key], values[key]) and back[key].dtype == values[key].dtype
    assert back["dtype"] is torch.float64 and back["nested"] == ([1, 2.5], (None, "x"))


def test_wire_refuses_lying_headers():
    from autograder.running.sandbox import wire

    with pytest.raises(wire.WireError):
        wire.decode({"$tensor": 0, "dtype": "float32", "shape": [1000, 1000]}, [b"\0" * 16], 10**9)
    with pytest.raises(wire.WireError):
        wire.decode({"$tensor": 0, "dtype": "object", "shape": [1]}, [b"\0" * 8], 10**9)
    with pytest.raises(wire.WireError):
        wire.decode({"$tensor": 0, "dtype": "float32", "shape": [10**6]}, [b"\0" * 4 * 10**6], 1000)
    with pytest.raises(wire.WireError):
        wire.decode({"$pickle": "gASV..."}, [], 10)


def test_the_cached_analysis_of_the_instructors_cells_decides_as_the_analysis_itself(tmp_path):
    """The reading's fast path (a cell byte-identical to one of the source notebook's code cells has its analysis
    cached per process) decides, for every notebook of the selftest's examples and the hostile corpus, exactly what
    the uncached analysis decides; and only the instructor's cells are its keys (nothing a student wrote is kept)."""
    import dataclasses

    from autograder.assignments import assignment_ids
    from autograder.examples import notebook_with_edits
    from autograder.intake import skipping
    from autograder.tools import selftest
    from hostile import corpus
    from test_cell_skipping import _hostile_cases_without_the_test_s_listeners

    notebooks = [(job.submission.notebook, job.submission.assignment_id) for job in selftest.plan(tmp_path / "ex")]
    for case in _hostile_cases_without_the_test_s_listeners():
        path = tmp_path / "hostile" / case.name / f"{corpus.ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(notebook_with_edits(corpus.ASSIGNMENT, list(case.edits), list(case.cells)), path)
        notebooks.append((path, corpus.ASSIGNMENT))
    assert len(notebooks) >= 250
    skipping._instructors.cache_clear()
    some_skipped = 0
    for path, assignment_id in notebooks:
        assignment = load_assignment(assignment_id)
        fast = prepare(path, assignment)
        slow = prepare(path, dataclasses.replace(assignment, instructor_code=frozenset()))
        assert (fast.cells, fast.skipped, fast.all_cells) == (slow.cells, slow.skipped, slow.all_cells), path
        some_skipped += bool(fast.skipped)
    assert some_skipped >= len(notebooks) // 2
    info = skipping._instructors.cache_info()
    assert info.hits > 3 * len(notebooks)  # the fast path is the one taken (about 5 cells a notebook)
    assert info.currsize <= sum(len(load_assignment(a).instructor_code) for a in assignment_ids())


def test_a_notebook_over_the_size_limit_is_refused_with_a_size_above_the_limit(tmp_path):
    """One byte over 64 MiB read "笔记本太大（64 MiB，上限 64 MiB）" (the size rounded down): the size shown is
    rounded up to a tenth of a MiB, so it is always above the limit it is refused by."""
    from autograder.intake.reading import MAX_NOTEBOOK_BYTES, load_notebook_bytes

    for extra, shown in ((1, "64.1 MiB"), (1024**2, "65 MiB")):
        path = tmp_path / f"big{extra}.ipynb"
        with open(path, "wb") as f:
            f.truncate(MAX_NOTEBOOK_BYTES + extra)  # sparse
        with pytest.raises(UnreadableNotebook, match=f"笔记本太大（{shown}，上限 64 MiB）"):
            load_notebook_bytes(path)
