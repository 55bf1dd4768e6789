"""Every variant, hint and key recogniser of autograder/checks/ runs on some example: the examples
(autograder/examples/) are graded in-process under coverage.py, and a diagnosis function that never ran fails the
test (a diagnosis that only runs on a wrong answer is where a NameError hides: nothing else would run it).

Which functions are the diagnosis is read from the check modules' source: whatever is passed as `variants=`,
`hint=`, `keys=` or `evidence=` (or as match_variant's variants): a lambda, a function named there, the functions
and lambdas defined inside a factory called there (localise_block(...), key_mistakes(...)), and every function of the
module that these call, transitively. A function ran when coverage saw its code object entered (its entry arc)."""

import ast
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.assignments import assignment_ids

HERE = Path(__file__).resolve().parent
CHECKS = HERE.parent / "autograder" / "checks"
DIAGNOSIS_ARGUMENTS = ("variants", "hint", "keys", "evidence")
ASSIGNMENTS = assignment_ids()


@dataclass(frozen=True)
class DiagnosisFunction:
    module: str
    name: str  # the function's name, or "<lambda>" with its enclosing function
    line: int  # the first line of its code object (the first decorator's, for a decorated def)

    def __str__(self):
        return f"{self.module}.py:{self.line} {self.name}"


def _first_line(node) -> int:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
        return node.decorator_list[0].lineno
    return node.lineno


def diagnosis_functions(path: Path) -> list[DiagnosisFunction]:
    """The variants, hints and recognisers of one check module, and what they call of the module (see the top)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module_functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def enclosing(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.Lambda)):
                return node
        return None

    def nested(function) -> list:
        return [n for n in ast.walk(function) if n is not function and isinstance(n, (ast.FunctionDef, ast.Lambda))]

    found: dict[int, tuple[str, ast.AST]] = {}  # id -> (name, node)
    todo: list[ast.AST] = []

    def add(node, name):
        if id(node) not in found:
            found[id(node)] = (name, node)
            todo.append(node)

    def roots(expression, where):
        """The diagnosis functions an argument expression stands for."""
        for node in ast.walk(expression):
            if isinstance(node, ast.Lambda):
                outer = enclosing(node)
                add(node, f"<lambda in {getattr(outer, 'name', 'module')}>")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in module_functions:
                factory = module_functions[node.func.id]
                for inner in nested(factory):  # what the factory returns runs only on a wrong answer
                    add(inner, getattr(inner, "name", f"<lambda in {factory.name}>"))
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in module_functions and not _is_call_target(node):
                    add(module_functions[node.id], node.id)
                elif where is not None:  # a local: a nested def of that name, or what it was assigned
                    for local in ast.walk(where):
                        if isinstance(local, ast.FunctionDef) and local.name == node.id and local is not where:
                            add(local, local.name)
                        elif isinstance(local, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                                                   for t in local.targets):
                            roots(local.value, None)

    def _is_call_target(name):
        parent = parents.get(name)
        return isinstance(parent, ast.Call) and parent.func is name

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        arguments = [k.value for k in node.keywords if k.arg in DIAGNOSIS_ARGUMENTS]
        if isinstance(node.func, ast.Name) and node.func.id == "match_variant" and len(node.args) >= 3:
            arguments.append(node.args[2])
        for argument in arguments:
            roots(argument, enclosing(node))

    while todo:  # what a diagnosis function calls of its module is diagnosis too
        function = todo.pop()
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in module_functions:
                add(module_functions[node.func.id], node.func.id)
            if node is not function and isinstance(node, (ast.FunctionDef, ast.Lambda)):
                outer = enclosing(node)
                add(node, getattr(node, "name", f"<lambda in {getattr(outer, 'name', 'module')}>"))
    return sorted({DiagnosisFunction(path.stem, name, _first_line(node)) for name, node in found.values()},
                  key=lambda f: f.line)


def never_ran(functions: list[DiagnosisFunction], arcs: list) -> list[DiagnosisFunction]:
    entered = {-a for a, _ in arcs if a < 0}
    return [f for f in functions if f.line not in entered]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Every example graded in-process under coverage (tests/inprocess_grading.py, in a fresh interpreter: the
    check modules are imported after coverage starts)."""
    report = tmp_path_factory.mktemp("coverage") / "report.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]),
               MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, str(HERE / "inprocess_grading.py"), str(report)], env=env,
                          capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-5000:]
    return json.loads(report.read_text(encoding="utf-8"))


def test_the_examples_graded_in_process_are_graded_as_the_selftest_expects(graded):
    wrong = [(v["assignment_id"], v["kind"], v["name"], v["why"]) for v in graded["verdicts"] if not v["ok"]]
    assert wrong == []
    kinds = {(v["assignment_id"], v["kind"]) for v in graded["verdicts"]}
    assert {(a, "reference") for a in ASSIGNMENTS} | {(a, "mistake") for a in ASSIGNMENTS} <= kinds


def test_every_variant_hint_and_recogniser_ran_on_some_example(graded, record_property):
    missing, counted = [], 0
    for assignment_id in ASSIGNMENTS:
        functions = diagnosis_functions(CHECKS / f"{assignment_id}.py")
        counted += len(functions)
        missing += never_ran(functions, graded["files"][f"{assignment_id}.py"]["arcs"])
    line = (f"coverage of autograder/checks/ by the examples (in-process): {graded['percent']:.1f}%; "
            f"diagnosis functions run: {counted - len(missing)}/{counted}")
    print(line)
    record_property("summary_line", line)  # printed at the end of the run (tests/conftest.py)
    assert counted > 50  # the reader finds them at all
    assert [str(f) for f in missing] == []


def test_the_reader_finds_the_diagnosis_and_the_arcs_tell_whether_it_ran(tmp_path):
    """The source reader on a module of its own, and the coverage arcs of running part of it."""
    import coverage

    source = tmp_path / "fake_checks.py"
    source.write_text(
        "def helper(x):\n    return x\n\n"
        "def make_hint(a):\n    def hint(actual, expected):\n        return helper(a)\n    return hint\n\n"
        "def unused_recogniser(k):\n    return True\n\n"
        "def plain(x):\n    return x\n\n"
        "def test_one(student):\n"
        "    keys = {'v': unused_recogniser}\n"
        "    expect_close(1, 2, None, variants=lambda: [], hint=make_hint(3), keys=keys)\n"
        "    plain(1)\n", encoding="utf-8")
    functions = diagnosis_functions(source)
    assert {f.name for f in functions} == {"helper", "hint", "unused_recogniser", "<lambda in test_one>"}
    cov = coverage.Coverage(branch=True, data_file=None, include=[str(source)])
    namespace = {}
    cov.start()
    try:
        exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)
        namespace["make_hint"](1)(None, None)
    finally:
        cov.stop()
    arcs = cov.get_data().arcs(str(source))
    assert {f.name for f in never_ran(functions, arcs)} == {"unused_recogniser", "<lambda in test_one>"}
