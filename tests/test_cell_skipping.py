"""Unchanged demo cells are not run (autograder.intake.skipping): which cells, why it changes no grade, and that
every tagged cell of every reference notebook is inert."""

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import REPO_ROOT
from autograder.assignments import assignment_ids, load_assignment
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.intake.reading import neutralise_magics, prepare
from autograder.intake.skipping import CellNames, cells_to_skip
from grading_helpers import TEST_LIMITS, edited_notebook

ASSIGNMENTS = assignment_ids()
TAGGED = [a for a in ASSIGNMENTS if load_assignment(a).not_for_grading]

# --- the rule ------------------------------------------------------------------------------------------------


def test_a_demo_cell_nothing_reads_is_skipped():
    cells = ["def f(x):\n    return 2 * x", "demo = f(3)\nprint(demo)", "y = 1"]
    assert cells_to_skip(cells, [False, True, False]) == {1}


@pytest.mark.parametrize("reader", [
    "z = demo + 1",                            # a later cell reads what the demo assigned
    "def g():\n    return demo",               # ... or a function does, which a check may call later
    "class C:\n    size = demo",
])
def test_a_demo_cell_whose_names_are_read_later_runs(reader):
    assert cells_to_skip(["demo = 3", reader], [True, False]) == set()


def test_an_earlier_cell_reading_the_same_name_at_its_top_level_does_not_keep_the_demo():
    """`for name, p in ...: print(name)` above, `for name, size in ...` in the demo: read before the demo runs."""
    cells = ["for name in 'ab':\n    print(name)", "for name in 'cd':\n    print(name)"]
    assert cells_to_skip(cells, [False, True]) == {1}


def test_locals_and_parameters_are_not_the_notebook_s_names():
    cells = ["d_model = 16\nprint(d_model)", "class A:\n    def __init__(self, d_model):\n        self.d = d_model"]
    assert cells_to_skip(cells, [True, False]) == {0}


@pytest.mark.parametrize("dynamic", [
    "print(globals()['demo'])", "exec('print(demo)')", "eval('demo')", "import __main__\nprint(__main__.demo)",
    "import sys\nprint(sys.modules['__main__'])", "print(vars())", "print(dir())",
    "def f():\n    pass\nprint(f.__globals__)", "print(getattr(object(), '__class__'))",
    "import operator\ndef f():\n    pass\nprint(operator.attrgetter('__glo' + 'bals__')(f))",
    "try:\n    1 / 0\nexcept Exception as e:\n    print(e.__traceback__.tb_frame)",
])
def test_a_cell_that_reaches_names_dynamically_keeps_every_cell(dynamic):
    assert cells_to_skip(["demo = 3", dynamic], [True, False]) == set()


def test_a_running_cell_that_does_not_parse_counts_every_word_of_its_text_as_a_use():
    """It does not run at all; still, every identifier in its text is taken as a use (the sandbox's parser is
    not ours to trust)."""
    assert cells_to_skip(["demo = 3", "def broken(:\n    return demo"], [True, False]) == set()
    assert cells_to_skip(["demo = 3", "def broken(:"], [True, False]) == {0}


@pytest.mark.parametrize("reader", [
    "del demo",                                  # not a reference in symtable's terms, but a use
    "demo += 1",                                 # read, then written
    "x: 'demo' = 1",                             # a string annotation, read by typing.get_type_hints
    "def f() -> 'demo':\n    pass",
    "import typing\ndef f(a: 'demo'):\n    pass\nprint(typing.get_type_hints(f))",
    "print(getattr(__builtins__, 'demo', None))",
    "def g():\n    return '{0[demo]}'.format(dict(demo=1))",  # a word inside a string counts, wherever it is
    "def g():\n    return ｄｅｍｏ",             # fullwidth letters: NFKC makes this the name demo
    "class C:\n    def m(self):\n        return demo",
    "f = lambda: demo",
    "gen = (demo for _ in range(2))",
    "def h(x=demo):\n    pass",                 # a default runs now
    "@demo\ndef h():\n    pass",
])
def test_every_mention_of_a_name_below_or_later_keeps_the_demo(reader):
    assert cells_to_skip(["demo = 3", reader], [True, False]) == set()


@pytest.mark.parametrize("dynamic", [
    "print(𝐠𝐥𝐨𝐛𝐚𝐥𝐬()['x'])",                  # mathematical bold letters: NFKC makes this globals
    "import string\ndef f():\n    pass\nprint(string.Formatter().get_field('0.__glo' + 'bals__', (f,), {}))",
    "import typing\nprint(typing.get_type_hints(len))",
])
def test_dynamic_access_spelled_in_other_ways_keeps_every_cell(dynamic):
    assert cells_to_skip(["demo = 3", dynamic], [True, False]) == set()


def test_the_analysis_is_linear_in_the_size_of_the_notebook():
    """Thousands of copies of a demo cell and a cell that uses one of their names: each copy is dropped once (the
    old rule took candidates x names: minutes on an 8 MB notebook). Counted in work, not time: the uses of every
    running cell are read once."""
    from autograder.intake import skipping

    demo = "x_demo = 1\n" + "\n".join(f"v{k} = {k}" for k in range(50))
    cells = [demo] * 1500 + ["print(v7)"] + ["y = 2"] * 400
    reads = []
    original = skipping.CellUses.__init__

    def counting(self, source):
        reads.append(source)
        original(self, source)

    skipping._tagged.cache_clear()
    skipping.CellUses.__init__ = counting
    try:
        assert cells_to_skip(cells, [True] * 1500 + [False] * 401) == set()
    finally:
        skipping.CellUses.__init__ = original
    assert len(reads) == 401 + 1  # every running cell once, the demo's text once (cached): 1,500 copies dropped


def test_past_the_cap_every_cell_runs():
    from autograder.intake.skipping import MAX_ANALYSED_CELLS

    cells = ["demo = 3"] + ["y = 1"] * MAX_ANALYSED_CELLS
    assert cells_to_skip(cells, [True] + [False] * MAX_ANALYSED_CELLS) == set()
    assert cells_to_skip(cells[:10], [True] + [False] * 9) == {0}


def test_two_demo_cells_that_share_names_are_skipped_together():
    """gradient_flow's depth sweep reads the first demo's inputs: both go, or both stay."""
    cells = ["x_demo = 1", "print(x_demo * 2)", "print('done')"]
    assert cells_to_skip(cells, [True, True, False]) == {0, 1}
    assert cells_to_skip(cells, [True, False, False]) == set()


def test_cell_names_follow_python_scopes():
    names = CellNames("import torch\nclass A:\n    def f(self, n):\n        return n + k\n"
                      "def g():\n    global G\n    G = [z for z in W]\nx = 3\nprint(x, q)")
    assert names.stores == {"torch", "A", "g", "G", "x"}
    assert names.loads_now == {"print", "x", "q"} and names.loads_later == {"k", "W"}


def test_only_a_byte_identical_copy_of_a_tagged_cell_is_skipped(tmp_path):
    assignment = load_assignment("gradient_flow")
    skipped = prepare(assignment.source, assignment).skipped
    assert len(skipped) == 2
    nb = nbformat.read(assignment.source, as_version=4)
    nb.cells[skipped[1]].source += " "  # one space more: the student's own cell now
    edited = tmp_path / "edited.ipynb"
    nbformat.write(nb, edited)
    assert prepare(edited, assignment).skipped == []  # the second reads the first's names: both run
    nb.cells[skipped[1]].metadata.pop("autograde")  # the student's metadata means nothing either way
    nb.cells[skipped[1]].source = nb.cells[skipped[1]].source[:-1]
    nbformat.write(nb, edited)
    assert prepare(edited, assignment).skipped == skipped
    assert prepare(edited, assignment, run_all_cells=True).skipped == []


# --- every tagged cell of every reference notebook is inert -------------------------------------------------


def _checks_read(assignment_id: str) -> set[str]:
    """The names the checks ask the student's notebook for: literal names of student.call / call_repeatedly /
    variable / module, the string constants of the module's UPPERCASE constants (names passed on by variable), and
    the hand answers' variables. (Labels in dicts are not names.)"""
    import ast

    tree = ast.parse((REPO_ROOT / "autograder" / "checks" / f"{assignment_id}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("call", "call_repeatedly", "variable", "module"):
            args = node.args[1:] if node.func.attr == "call_repeatedly" else node.args
            if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
                names.add(args[0].value)
    for node in tree.body:
        if isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets) \
                and isinstance(node.value, (ast.Constant, ast.Tuple, ast.List)):  # CLASS = "RMSNorm", NAMES = (...)
            names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                      and c.value.isidentifier()}
    if load_assignment(assignment_id).has_hand:
        from solutions.student_params import student_answers
        names |= set(student_answers(assignment_id, "alice"))
    return names


@pytest.mark.parametrize("assignment_id", TAGGED)
def test_tagged_cells_define_nothing_an_untagged_cell_or_a_check_reads(assignment_id):
    assignment = load_assignment(assignment_id)
    nb = nbformat.read(assignment.source, as_version=4)
    running = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"
               and not c.metadata.get("nbgrader", {}).get("grade")]
    tagged = {i for i, c in running if c.source in assignment.not_for_grading}
    names = {i: CellNames(neutralise_magics(c.source)) for i, c in running}
    checks = _checks_read(assignment_id)
    for i in tagged:
        read_by_untagged = {n for j in names if j not in tagged
                            for n in names[i].stores & (names[j].loads_later | (names[j].loads_now if j > i else set()))}
        assert not read_by_untagged, f"cell {i} defines {sorted(read_by_untagged)}, read by an untagged cell"
        assert not names[i].stores & checks, f"cell {i} defines {sorted(names[i].stores & checks)}, which a check names"
    assert prepare(assignment.source, assignment).skipped == sorted(tagged)


# Runs a notebook's code cells in order, as nbgrader does (grade cells aside), in a fresh process; prints JSON:
# the tagged cells' traces and, with a second argument, the repr of that notebook-level name at the end.
RUN_CELLS = r'''
import io, contextlib, json, os, random, sys
import numpy, torch, nbformat
os.environ["JUPYTERHUB_USER"] = "alice"
os.environ["MPLBACKEND"] = "Agg"
from autograder.intake.reading import neutralise_magics

def fingerprint(value, depth=0):
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.detach().cpu().contiguous().numpy().tobytes())
    if isinstance(value, torch.nn.Module):
        return ("module", tuple((k, fingerprint(v)) for k, v in value.state_dict().items()))
    if depth < 3 and isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(fingerprint(v, depth + 1) for v in value))
    if depth < 3 and isinstance(value, dict):
        return ("dict", tuple((repr(k), fingerprint(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, (int, float, str, bool, bytes, type(None))):
        return value
    return ("object", id(value))

def state():
    return (torch.random.get_rng_state().numpy().tobytes(), repr(random.getstate()),
            repr(numpy.random.get_state()), str(torch.get_default_dtype()))

nb = nbformat.read(sys.argv[1], as_version=4)
ns = {"__name__": "__main__"}
problems = []
for i, cell in enumerate(nb.cells):
    if cell.cell_type != "code" or cell.metadata.get("nbgrader", {}).get("grade"):
        continue
    tagged = bool(cell.metadata.get("autograde", {}).get("not_for_grading"))
    if tagged:
        before = state()
        # the objects themselves are held (not their id()): a name a tagged cell rebinds frees its old object, and a
        # new object may be given the freed id, which would look like the old one changed in place
        names = {k: (v, fingerprint(v)) for k, v in ns.items() if not k.startswith("__")}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(neutralise_magics(cell.source), f"cell {i}", "exec"), ns)
    if tagged:
        after = state()
        for label, a, b in zip(("torch RNG", "random", "numpy RNG", "default dtype"), before, after):
            if a != b:
                problems.append(f"cell {i} changes {label}")
        for k, (value, fp) in names.items():  # a rebound name is the static test's affair (is it read later?)
            if k in ns and ns[k] is value and fingerprint(value) != fp:
                problems.append(f"cell {i} changes {k} in place")
print(json.dumps({"problems": problems, "value": repr(ns[sys.argv[2]]) if len(sys.argv) > 2 else None}))
'''


def _run_cells(notebook: Path, name: str | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", RUN_CELLS, str(notebook), *([name] if name else [])],
                         capture_output=True, text=True, env=env, timeout=300, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _inertness(notebook: Path) -> list[str]:
    return _run_cells(notebook)["problems"]


@pytest.mark.slow
@pytest.mark.parametrize("assignment_id", TAGGED)
def test_every_tagged_cell_leaves_no_trace(assignment_id):
    """Run the reference notebook's cells in order: a tagged cell draws nothing from the global random generators,
    seeds nothing, leaves the default dtype, and changes no object an earlier cell made in place."""
    assert _inertness(load_assignment(assignment_id).source) == []


@pytest.mark.slow
def test_the_inertness_check_can_fail(tmp_path):
    nb = nbformat.read(load_assignment("swiglu").source, as_version=4)
    tagged = [c for c in nb.cells if c.metadata.get("autograde", {}).get("not_for_grading")]
    tagged[0].source = "torch.manual_seed(1)\n_ = torch.randn(2)\n" + tagged[0].source
    tagged[1].source += "\ntorch.set_default_dtype(torch.float64)\n_ = vals.data.mul_(2)"
    path = tmp_path / "swiglu.ipynb"
    nbformat.write(nb, path)
    problems = _inertness(path)
    assert any("torch RNG" in p for p in problems) and any("default dtype" in p for p in problems), problems
    assert any("changes vals in place" in p for p in problems), problems


# --- grades are the same both ways -------------------------------------------------------------------------

DRAW_CELL = "_draw = torch.randn(1).item()  # my own cell, after the demos: a draw from the global generator"


def _expected_value(notebook: Path, name: str) -> float:
    """What the notebook-level `name` is when every cell runs in order (as nbgrader runs them)."""
    return float(_run_cells(notebook, name)["value"])


@pytest.mark.slow
def test_student_code_that_depends_on_a_draw_after_the_demos_grades_the_same_both_ways(tmp_path):
    """gradient_flow: the student's layer_grad_norms is right only when their own draw, made after the two depth-sweep
    demos (which are skipped) and an untagged cell, equals what it is when every cell runs. Skipping the demos must
    leave the global generator as running them does; an untagged demo cell always runs."""
    nb = nbformat.read(load_assignment("gradient_flow").source, as_version=4)
    last_code = max(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    probe = edited_notebook("gradient_flow", [], tmp_path / "probe.ipynb", extra_cells=[(last_code + 1, DRAW_CELL)])
    expected = _expected_value(probe, "_draw")
    edits = [("    model.zero_grad(set_to_none=True)\n",
              f"    if abs(_draw - {expected!r}) > 1e-12:\n        return [0.0] * len(model.layers)\n"
              "    model.zero_grad(set_to_none=True)\n")]
    notebook = edited_notebook("gradient_flow", edits, tmp_path / "s.ipynb", extra_cells=[(last_code + 1, DRAW_CELL)])
    runs = {}
    for run_all in (False, True):
        options = GradingOptions(limits=TEST_LIMITS, run_all_cells=run_all)
        runs[run_all] = grade_batch([Submission(notebook, "gradient_flow", "alice")], options)[0]
    assert runs[False].skipped_cells and not runs[True].skipped_cells
    assert runs[False].identity() == runs[True].identity()
    layer = [c for p in runs[False].parts for c in p.checks if p.grade_id == "layer_grad_norms"]
    assert layer and all(c.passed for c in layer), [(c.name, c.message) for c in layer]


def _graded_both_ways(course_root: Path, out: Path) -> tuple[dict, dict, int]:
    from autograder.run import RunOptions, run_grading
    from autograder.tools.demo.run import DEMO_LIMITS

    runs = {}
    for run_all in (False, True):
        summary = run_grading(RunOptions(assignments=["all"], submissions=course_root / "submitted",
                                         out=out / f"run-all-{run_all}", workers=2, run_all_cells=run_all,
                                         **DEMO_LIMITS))
        runs[run_all] = {(r.student_id, r.assignment_id): r for r in summary.results}
    # skipped: kept (a clean result with the demo cells skipped) or tried first and graded again with every cell
    skipped = sum(1 for r in runs[False].values() if r.skipped_cells or "skipped_attempt" in r.timings)
    assert any(r.skipped_cells for r in runs[False].values())
    assert not any(r.skipped_cells or "skipped_attempt" in r.timings for r in runs[True].values())
    return ({k: r.identity() for k, r in runs[False].items()}, {k: r.identity() for k, r in runs[True].items()},
            skipped)


@pytest.mark.slow
def test_the_demo_class_and_a_bench_class_grade_the_same_both_ways(tmp_path):
    """Every check of every submission of the demo class and of `bench --students 5`: the same with the unchanged
    demo cells skipped as with every cell run (--run-all-cells)."""
    from autograder.tools.bench import synthetic_class
    from autograder.tools.demo.build import build_demo_course

    demo = build_demo_course(tmp_path / "demo")
    bench = build_demo_course(tmp_path / "bench", synthetic_class(5, list(ASSIGNMENTS)))
    for course, name in ((demo, "demo"), (bench, "bench")):
        skipping, every_cell, skipped = _graded_both_ways(course.root, tmp_path / f"out-{name}")
        assert skipping.keys() == every_cell.keys() and len(skipping) >= 30
        assert skipped >= len(skipping) // 3, f"{name}: demo cells skipped in only {skipped} of {len(skipping)}"
        different = [k for k in skipping if skipping[k] != every_cell[k]]
        assert not different, f"{name}: graded differently with and without skipping: {different}"


@pytest.mark.slow
def test_student_code_that_depends_on_a_draw_in_an_untagged_demo_cell_grades_the_same_both_ways(tmp_path):
    """swiglu's gate demo (untagged: it seeds and draws) always runs: a student's swish that is right only with the
    demo's draw in hand keeps its points both ways, while the tagged demos around it are skipped."""
    nb = nbformat.read(load_assignment("swiglu").source, as_version=4)
    gate_demo = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "demo_x = 4 * torch.randn" in c.source)
    assert not nb.cells[gate_demo].metadata.get("autograde", {}).get("not_for_grading")
    mine = "_draw = float(demo_x.sum())  # my own cell: a number from the gate demo's draw"
    probe = edited_notebook("swiglu", [], tmp_path / "probe.ipynb", extra_cells=[(gate_demo + 1, mine)])
    expected = _expected_value(probe, "_draw")
    edits = [("def swish(a):\n", f"def swish(a):\n    if abs(_draw - {expected!r}) > 1e-9:\n        return a\n")]
    notebook = edited_notebook("swiglu", edits, tmp_path / "s.ipynb", extra_cells=[(gate_demo + 1, mine)])
    runs = {run_all: grade_batch([Submission(notebook, "swiglu", "alice")],
                                 GradingOptions(limits=TEST_LIMITS, run_all_cells=run_all))[0]
            for run_all in (False, True)}
    # an untagged cell before the student's draw calls swish and fails (NameError: _draw): a result with a failing
    # cell is graded again with every cell (the engine's second layer), and that result stands
    assert "skipped_attempt" in runs[False].timings and not runs[False].skipped_cells
    assert not runs[True].skipped_cells and "skipped_attempt" not in runs[True].timings
    assert runs[False].identity() == runs[True].identity()
    assert runs[False].score == runs[False].max_score, [(c.name, c.message) for p in runs[False].parts for c in p.checks
                                                        if not c.passed]


# Correct MLA notebooks whose challenge cell first uses the MiB demo cell's name, in the ways that once made
# skipping cost them the challenge (10/12 by default, 12/12 with --run-all-cells). The last is seen by no static
# rule (the name is inside a format field built by `+`): the engine's second layer grades it again with every cell.
MLA_DEMO_NAME_USES = {
    "del": "del MiB",
    "augmented": "MiB += 0",
    "nfkc globals": "_mib = 𝐠𝐥𝐨𝐛𝐚𝐥𝐬()['MiB']",
    "string annotation": "import typing\ndef _f(a: 'MiB'):\n    pass\n_hints = typing.get_type_hints(_f)",
    "formatter": "import string\n_mib = string.Formatter().get_field('0.__glo' + 'bals__', (mla_cache_bytes,), {})[0]['MiB']",
    "computed format field": "_mib = ('{0.__glo' + 'bals__[MiB]}').format(mla_cache_bytes)",
}


@pytest.mark.slow
def test_a_challenge_cell_that_uses_the_demo_s_names_grades_the_same_both_ways(tmp_path):
    assignment = load_assignment("mla")
    nb = nbformat.read(assignment.source, as_version=4)
    bonus = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "mla_bonus_code")
    demo = next(i for i, c in enumerate(nb.cells) if c.source in assignment.not_for_grading and "MiB" in c.source)
    assert demo < bonus
    notebooks = {}
    for name, use in MLA_DEMO_NAME_USES.items():
        edited = nbformat.read(assignment.source, as_version=4)
        edited.cells[bonus].source = use + "\n\n" + edited.cells[bonus].source
        notebooks[name] = tmp_path / f"{name.replace(' ', '_')}.ipynb"
        nbformat.write(edited, notebooks[name])
    # the static rule misses only the computed format field
    missed = {name for name, path in notebooks.items() if prepare(path, assignment).skipped}
    assert missed == {"computed format field"}
    runs = {}
    for run_all in (False, True):
        options = GradingOptions(limits=TEST_LIMITS, run_all_cells=run_all)
        results = grade_batch([Submission(path, "mla", "alice") for path in notebooks.values()], options)
        runs[run_all] = dict(zip(notebooks, results))
    for name in notebooks:
        skipping, every_cell = runs[False][name], runs[True][name]
        assert skipping.identity() == every_cell.identity(), name
        assert every_cell.score == every_cell.max_score, (name, [(c.name, c.message) for p in every_cell.parts
                                                                 for c in p.checks if not c.passed])
    assert "skipped_attempt" in runs[False]["computed format field"].timings


def _hostile_cases_without_the_test_s_listeners():
    """The hostile corpus's runtime cases that need nothing the hostile test sets up (listeners, a planted
    course, a marker folder), contained by the tier these tests run under."""
    from autograder.running.sandbox import tiers
    from hostile import corpus

    tier = tiers.choose(None, False)
    timed = {"sleep_forever_in_probe"}  # ends by a probe's timeout: its result depends on the clock, not on skipping
    # a case over HOSTILE_LIMITS' 1 GiB budget (MemoryLimit) fits TEST_LIMITS' larger one and sleeps on until a
    # cell's timeout: the clock again (and 8 s a run, twice when skipping)
    return [case for case in corpus.CASES
            if case.build is None and tier in case.contained_by and case.name not in timed
            and not {"Timeout", "MemoryLimit"} & case.expect_for(tier).cell_errors
            and "@@" not in "".join(new for _, new in case.edits) + "".join(src for _, src in case.cells)]


@pytest.mark.slow
def test_selftest_is_at_100_percent_both_ways_and_the_whole_corpus_grades_the_same(tmp_path):
    """`autograde selftest --both-ways` on every example (references for two ids, release, catalogued mistakes,
    other styles, precision cases) plus the hostile corpus's self-contained cases, in one grading each way: the
    selftest at 100% with the unchanged demo cells skipped and with every cell run, and every result the same
    check by check. (The demo class and a bench class: the test above.)"""
    from autograder.examples import notebook_with_edits
    from autograder.tools import selftest
    from hostile import corpus

    jobs = selftest.plan(tmp_path / "examples")
    submissions = [job.submission for job in jobs]
    for case in _hostile_cases_without_the_test_s_listeners():
        path = tmp_path / "hostile" / case.name / f"{corpus.ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(notebook_with_edits(corpus.ASSIGNMENT, list(case.edits), list(case.cells)), path)
        submissions.append(Submission(path, corpus.ASSIGNMENT, "hostile-" + case.name))
    assert len(submissions) >= 250
    runs = selftest.grade_plan(submissions, both_ways=True, limits=TEST_LIMITS)
    for run_all, results in runs.items():
        lines = []
        verdicts = [selftest.judge(job, result) for job, result in zip(jobs, results)]
        assert selftest.report(verdicts, assignment_ids(), lines.append), (run_all, "\n".join(lines))
    assert selftest.differences(submissions, runs) == []
    # demo cells skipped, in the result kept or in a first attempt graded again with every cell
    assert sum(1 for r in runs[False] if r.skipped_cells or "skipped_attempt" in r.timings) >= len(submissions) // 2
    # the engine's rule, result by result: a result graded with skipped cells is kept only when every cell that ran
    # succeeded and every check passed (so the every-cell result is clean too, less the skipped cells); otherwise the
    # submission was graded again with every cell. (A clean every-cell result may still have been graded again:
    # where skipping broke a cell, e.g. a demo's name read in a way no static rule sees.)
    kept = set()
    for s, fast, every_cell in zip(submissions, *runs.values()):
        skippable = prepare(s.notebook, load_assignment(s.assignment_id)).skipped
        if not skippable:
            assert not fast.skipped_cells and "skipped_attempt" not in fast.timings, s.notebook
            continue
        clean = (all(c.ok for c in every_cell.cells if c.index not in skippable)
                 and all(c.passed for p in every_cell.parts for c in p.checks))
        assert bool(fast.skipped_cells) != ("skipped_attempt" in fast.timings), s.notebook  # kept, or graded again
        if fast.skipped_cells:
            assert clean and fast.skipped_cells == list(skippable), s.notebook
            kept.add((s.notebook, s.student_id))
        elif not clean:
            assert "skipped_attempt" in fast.timings, s.notebook
    assert len(kept) >= 20  # the references, other styles and hostile cases that pass every check

