"""The grader's memory is bounded by what it accepts (issue 21): a class with a 40,000-failing-cell notebook (5 MiB),
a hand answer of 4 million numbers, a forged reply naming one 64 MiB buffer 20 times and an honest student, graded
as the CLI grades (worker processes with a memory limit of their own): every stored result and every report is
under 4 MiB and says what it cut ("…（已截断）"), no grader process (this run's own, its workers) passes 1.25 GiB,
and the honest student gets full marks."""

import json
import os
import subprocess
import sys

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.examples import notebook_with_edits
from autograder.results import MAX_CELL_ERRORS, CellRun, bounded_cells
from autograder.engine import typed_value
from autograder.intake.validate import CUT, bounded_tree, clipped
from hostile.corpus import FLOOD_CELL, FORGERY, HAND_ANSWER_4_MILLION, forge

FLOOD = 40_000
GIB = 1024**3
MIB = 1024**2


def test_a_long_typed_answer_is_cut_and_said():
    stored = typed_value([1] * 4_000_000)
    assert stored[:8] == [1] * 8 and len(stored) == 9 and stored[-1] == f"{CUT}共 4000000 个数"
    assert typed_value((1.5, 2.0, 3.0)) == [1.5, 2.0, 3.0] and typed_value(0.25) == 0.25
    assert typed_value("B" * 1000).endswith(CUT) and len(typed_value("B" * 1000)) == 200
    assert typed_value(True) is None and typed_value({"a": 1}) is None


def test_cell_errors_beyond_the_first_fifty_are_counted_not_kept():
    runs = [CellRun(i, None, i % 2 == 0, None if i % 2 == 0 else "ValueError", "x" * 10) for i in range(2 * FLOOD)]
    kept, omitted = bounded_cells(runs)
    assert sum(not c.ok for c in kept) == MAX_CELL_ERRORS and omitted == FLOOD - MAX_CELL_ERRORS
    assert len(kept) <= 600 and [c.index for c in kept] == sorted(c.index for c in kept)


def test_texts_and_details_are_cut_visibly():
    assert clipped("x" * 50, 20) == "x" * (20 - len(CUT)) + CUT and clipped("short", 20) == "short"
    details = bounded_tree({"param_shapes": {f"p{i}": [i] for i in range(10_000)}, "names": ["n"] * 5000})
    assert len(details["param_shapes"]) == 101 and CUT in details["param_shapes"]
    assert len(details["names"]) == 101 and details["names"][-1].startswith(CUT)


CLASS = """
import json, resource, sys, time
from pathlib import Path
from autograder.run import RunOptions, run_grading
out, submitted = Path(sys.argv[1]), Path(sys.argv[2])
started = time.monotonic()
summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=submitted, out=out, workers=1,
                                 cell_timeout=10.0, probe_timeout=10.0, submission_timeout=float(sys.argv[3]),
                                 memory_budget=1024**3))
print(json.dumps({"self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "usage": summary.usage,
                  "seconds": time.monotonic() - started,
                  "results": {r.student_id: {"identity": r.identity(), "seconds": r.seconds, "message": r.message}
                              for r in summary.results}}))
"""


def _bloated_honest_notebook():
    """The reference with 300 copies of its demo cell and 7 cells of 1 MiB of assignments: an 8 MB notebook built
    like the one that once took 300 s to analyse before its budget started (past the analysis cap, every cell runs)."""
    from autograder.assignments import load_assignment

    assignment = load_assignment("rmsnorm")
    nb = notebook_with_edits("rmsnorm", [])
    demo = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source in assignment.not_for_grading)
    names = "".join(f"v{k} = {k}\n" for k in range(70_000))[:1024**2 - 64]
    names = names[:names.rindex("\n") + 1]
    extra = [nbformat.v4.new_code_cell(nb.cells[demo].source) for _ in range(300)]
    extra += [nbformat.v4.new_code_cell(names) for _ in range(7)]
    nb.cells[demo + 1:demo + 1] = extra
    return nb


def _grade_class(tmp_path, name, notebooks, budget):
    submitted = tmp_path / f"{name}-submitted"
    for student, nb in notebooks.items():
        (submitted / student / "rmsnorm").mkdir(parents=True)
        nbformat.write(nb, submitted / student / "rmsnorm" / "rmsnorm.ipynb")
    out = tmp_path / f"{name}-out"
    # one pool uid for the whole run: the key-ring reader is graded on the uid the writer just used
    env = dict(os.environ, AUTOGRADE_UID_BASE="61992", AUTOGRADE_UID_POOL="1")
    done = subprocess.run([sys.executable, "-c", CLASS, str(out), str(submitted), str(budget)], capture_output=True,
                          text=True, timeout=1800, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return submitted, out, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="pool uids (one forced for the run) need root")
def test_a_hostile_class_leaves_every_result_report_and_grader_process_bounded(tmp_path):
    """Issue 21's class, graded in one run: a key-ring (and SysV/POSIX IPC) writer then its reader on the same
    uid, a memory hog of three children over a 1 GiB budget, a forged aliasing reply, a 40,000-failing-cell
    notebook, a 4-million-number hand answer, an 8 MB notebook and honest students. Every honest student's result
    is what they get alone, the reader's too; the hog ends at its memory budget; no grader process passes 1.25 GiB;
    every stored result and report is under 4 MiB and says what it cut; the run ends within its budgets + 30 s."""
    from hostile import corpus

    writer, reader = corpus.by_name("kernel_state_writer"), corpus.by_name("kernel_state_reader")
    honest = {"honest-1": notebook_with_edits("rmsnorm", []), "honest-2": notebook_with_edits("rmsnorm", []),
              "honest-8mb": _bloated_honest_notebook()}
    alone_reader = notebook_with_edits("rmsnorm", list(reader.edits), list(reader.cells))
    notebooks = {
        "a-stash-writer": notebook_with_edits("rmsnorm", list(writer.edits), list(writer.cells)),
        "b-stash-reader": alone_reader,
        "flood": notebook_with_edits("rmsnorm", [], [(-1, FLOOD_CELL)] * FLOOD),
        "hand": notebook_with_edits("rmsnorm", [], [(-1, HAND_ANSWER_4_MILLION)]),
        "aliasing": notebook_with_edits("rmsnorm", list(forge("aliasing")), [(12, FORGERY)]),
        "hog": notebook_with_edits("rmsnorm", [], [(12, corpus.MEMORY_HOG)]),
        **honest,
    }
    budget = 150.0  # bounds the flood's time: the cells it leaves unrun fail too (all 40,000 fail either way)
    submitted, out, report = _grade_class(tmp_path, "class", notebooks, budget)
    size = (submitted / "flood" / "rmsnorm" / "rmsnorm.ipynb").stat().st_size
    assert 4 * MIB < size < 8 * MIB, size  # the 5 MiB notebook
    assert 7.5 * MIB < (submitted / "honest-8mb" / "rmsnorm" / "rmsnorm.ipynb").stat().st_size < 12 * MIB
    results = report["results"]
    assert report["seconds"] < budget * len(notebooks) + 30, report["seconds"]

    # alone: each honest student, and the reader, in a class of their own (a fresh uid state)
    for student in (*honest, "b-stash-reader"):
        _, _, single = _grade_class(tmp_path, f"alone-{student}", {student: notebooks[student]}, budget)
        assert results[student]["identity"] == single["results"][student]["identity"], student
    assert all(results[s]["identity"]["score"] == 10 for s in honest), {s: results[s] for s in honest}
    assert results["b-stash-reader"]["identity"]["score"] < 10  # found nothing of the writer's: its rms_norm is wrong

    hog = results["hog"]
    assert "内存超出限制" in hog["message"], hog
    assert hog["seconds"] < 30, hog  # touching 1 GiB takes ~1 s; it ends within seconds of that, not at its budget
    assert report["self_kib"] * 1024 < 1.25 * GIB, report["self_kib"]
    assert report["usage"] and all(u["worker_maxrss_kib"] * 1024 < 1.25 * GIB for u in report["usage"]), report

    stored = {student: out / "results" / student / "rmsnorm.json" for student in notebooks}
    pages = {student: out / "reports" / student / "rmsnorm.html" for student in notebooks}
    for student in notebooks:
        assert stored[student].stat().st_size < 4 * MIB, (student, stored[student].stat().st_size)
        assert pages[student].stat().st_size < 4 * MIB, (student, pages[student].stat().st_size)
    flood = json.loads(stored["flood"].read_text(encoding="utf-8"))
    flood = flood.get("result", flood)
    kept = [c for c in flood["cells"] if not c["ok"]]
    assert len(kept) == MAX_CELL_ERRORS and flood["cell_errors_omitted"] == FLOOD - MAX_CELL_ERRORS
    assert all(len(c["error_message"]) <= 2000 for c in kept)
    assert "（已截断）" in pages["flood"].read_text(encoding="utf-8")
    assert f"{FLOOD} 个" in pages["flood"].read_text(encoding="utf-8")
    hand = json.loads(stored["hand"].read_text(encoding="utf-8"))
    hand = hand.get("result", hand)
    assert hand["hand_answers"]["rms"][-1] == f"{CUT}共 4000000 个数"
    assert "（已截断）" in pages["hand"].read_text(encoding="utf-8")


BIG_REPLY = "return (torch.zeros(32 * 1024**2), torch.zeros(32 * 1024**2))  # 256 MiB: the reply cap"


@pytest.mark.slow
def test_one_worker_grades_with_a_memory_limit_and_an_overflow_ends_a_submission_not_the_run(tmp_path):
    """`-j 1` grades in a worker process with a memory limit of its own (never in the run's process); a submission
    whose replies need more than that limit costs itself, and the honest student after it is graded in full."""
    from autograder.run import RunOptions, run_grading
    from autograder.jobs.executors import WORKER_MEMORY_BYTES
    from autograder.jobs.worker import RETIRE_AT

    def write(folder, student, edits):
        (folder / student / "rmsnorm").mkdir(parents=True)
        nbformat.write(notebook_with_edits("rmsnorm", edits), folder / student / "rmsnorm" / "rmsnorm.ipynb")

    submitted, alone = tmp_path / "submitted", tmp_path / "alone"
    write(submitted, "big", [("return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", BIG_REPLY)])
    write(submitted, "honest", [])
    write(alone, "honest", [])
    one = run_grading(RunOptions(assignments=["rmsnorm"], submissions=alone, out=tmp_path / "one", workers=1,
                                 cell_timeout=10.0, probe_timeout=10.0))
    assert [r.score for r in one.results] == [10]
    assert len(one.usage) == 1 and one.usage[0]["memory_limit_bytes"] == WORKER_MEMORY_BYTES, one.usage

    limit = 450 * MIB
    summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=submitted, out=tmp_path / "out", workers=1,
                                     cell_timeout=10.0, probe_timeout=10.0, worker_memory_bytes=limit))
    scores = {r.student_id: r for r in summary.results}
    assert scores["honest"].score == 10, [(r.student_id, r.status, r.message[:200]) for r in summary.results]
    big = scores["big"]
    assert big.score < 10 and not all(c.passed for p in big.parts for c in p.checks), big.message
    assert summary.usage and all(u["worker_maxrss_kib"] * 1024 < limit + 300 * MIB for u in summary.usage), summary.usage
    # what the student reads is what happened: the grader's own memory ran out on their data (never "your code
    # crashed the process", a protocol error, or a grader error), and the worker that ran out retired: the honest
    # student was graded by a fresh one (a worker that went on at its limit once hung, and once graded them 0)
    failed = [c.message for p in big.parts for c in p.checks if not c.passed]
    assert any("评分程序的内存不够用了" in m for m in failed), failed
    assert not any(w in m for m in failed for w in ("崩溃", "header", "not running", "Error）")), failed
    assert len({u["pid"] for u in summary.usage}) == 2, summary.usage
    # and what it read of that reply was let go once the submission was graded: the worker that ran out ended near
    # where an honest worker is (it once ended at its limit, the half-read reply held by the kept failure's frames,
    # and a worker ending at its limit could fail to say it was done)
    assert all(u["worker_data_kib"] * 1024 < RETIRE_AT * limit for u in summary.usage), summary.usage


def test_the_values_of_one_submission_are_not_kept_while_the_next_is_graded(tmp_path):
    """A check's failure (its traceback: every frame's locals, the student's values among them) is read and let go:
    neither the grader nor pytest (sys.last_value, for a debugger) keeps it past the submission. Kept, a reply of
    256 MiB (the reply cap) took that much of the next student's memory in the same worker; here 24 MiB, whose
    tensors no other tensor of the grader matches in size."""
    import gc

    import torch

    from autograder.engine import grade_batch
    from autograder.running.jobs import GradingOptions, Submission

    size = 3 * 1024**2 + 7
    reply = f"return (torch.zeros({size}), torch.zeros({size}))"
    submissions = []
    for student, edits in (("big", [("return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", reply)]),
                           ("honest", [])):
        path = tmp_path / student / "rmsnorm.ipynb"
        path.parent.mkdir()
        nbformat.write(notebook_with_edits("rmsnorm", edits), path)
        submissions.append(Submission(path, "rmsnorm", student))
    alive = {}

    def on_result(result):
        gc.collect()
        # type(o), not isinstance: an isinstance over every object reads torch.distributed's deprecated attributes
        alive[result.student_id] = sum(1 for o in gc.get_objects()
                                       if issubclass(type(o), torch.Tensor) and o.numel() == size)

    results = grade_batch(submissions, GradingOptions(), on_result)
    assert [r.score for r in results][1] == 10 and results[0].score < 10, [(r.student_id, r.score) for r in results]
    assert alive == {"big": 0, "honest": 0}, alive


def test_a_caught_memory_error_lets_go_of_what_its_frames_held():
    """The sandbox's reader, out of memory halfway through a reply, raises its own error in its place: that error
    keeps the MemoryError as its __context__, and without memory_pressure.release the half-read reply with it."""
    import weakref

    from autograder.running import memory_pressure

    class Chunk:
        pass

    held = []

    def read():
        chunk = Chunk()
        held.append(weakref.ref(chunk))
        raise MemoryError

    with pytest.raises(RuntimeError) as caught:
        try:
            read()
        except MemoryError as exc:
            memory_pressure.release(exc)
            raise RuntimeError("out of memory on this request's data") from None
    assert isinstance(caught.value.__context__, MemoryError)
    assert held[0]() is None


def test_a_workers_peak_memory_is_its_own_not_its_starters():
    """Linux carries getrusage's ru_maxrss over an exec: a worker started by a process at 800 MiB said 800 MiB.
    The usage the run reports (the bench prints it) is the worker's own peak."""
    script = ("import subprocess, sys\n"
              "block = bytearray(800 * 1024**2)\n"
              "block[::4096] = b'x' * len(block[::4096])\n"
              "code = 'from autograder.jobs.worker import usage; print(usage()[\"worker_maxrss_kib\"])'\n"
              "print(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)")
    reported = int(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                                  timeout=120).stdout)
    assert 0 < reported * 1024 < 300 * MIB, reported


def test_a_result_too_big_for_its_cap_is_cut_until_it_fits():
    from autograder.results import MAX_RESULT_BYTES, CheckResult, PartResult, SubmissionResult, bound_size

    checks = [CheckResult(f"c{i}", "p", False, 0.0, 1.0, "d", "失败" * 10_000, {"names": ["n" * 2000] * 100})
              for i in range(40)]
    result = SubmissionResult("alice", "rmsnorm", "graded", 0.0, 10.0, parts=[PartResult("p", 0.0, 10.0, checks)],
                              cells=[CellRun(i, None, False, "ValueError", "x" * 2000) for i in range(50)],
                              written_answers={"w": "答" * 20_000})
    assert len(json.dumps(result.to_dict())) > MAX_RESULT_BYTES
    bound_size(result)
    assert len(json.dumps(result.to_dict())) <= MAX_RESULT_BYTES
    assert all(c.message.endswith(CUT) for c in checks) and result.parts[0].checks[0].name == "c0"
    assert [c.index for c in result.cells] == list(range(50)) and result.score == 0.0


def test_cells_added_to_a_test_notebook_get_ids_no_other_cell_has(monkeypatch):
    """nbformat draws each new cell's id at random: among the flood's 40,000 cells two shared one in about every
    fifth notebook, and writing it warned (DuplicateCellId) and changed the id."""
    import warnings
    from nbformat.v4 import nbbase

    source_ids = [c.id for c in nbformat.read(REPO_ROOT / "assignments" / "rmsnorm" / "rmsnorm.ipynb", 4).cells]
    drawn = iter([source_ids[0], "same-id", "same-id", "same-id", "other-id", "same-id", "third-id"])
    monkeypatch.setattr(nbbase, "random_cell_id", lambda: next(drawn))
    nb = notebook_with_edits("rmsnorm", [], [(-1, "x = 1"), (-1, "y = 2"), (3, "z = 3")])
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) == len(source_ids) + 3
    assert {"same-id", "other-id", "third-id"} <= set(ids)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbformat.writes(nb)
