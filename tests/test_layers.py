"""The layers of autograder/ point one way: a module imports only from its own layer or those below it, and no
modules import each other in a cycle. Every import counts, those inside functions too (a deferred import is still
a dependency; deferring is for speed, never to hide a cycle)."""

import ast
from collections import defaultdict

from autograder import REPO_ROOT

PACKAGE = REPO_ROOT / "autograder"

# lowest first; a module belongs to the layer of the longest entry that names it or a package above it
LAYERS = (
    # the data model and what everything shares: none of these imports a layer above
    ("autograder", "autograder.results", "autograder.intake.validate", "autograder.assignments", "autograder.course",
     "autograder.catalogue", "autograder.progress", "autograder.examples",
     "autograder.recording.nbgrader_guard"),  # loaded by nbgrader's own process: imports only nbconvert
    ("autograder.intake",),  # finding and reading submissions, the course's facts
    ("autograder.running",),  # the sandbox, one notebook run in it, what a grading job is
    ("autograder.checks",),  # checking and diagnosing
    ("autograder.engine",),  # one submission, end to end
    ("autograder.reporting",),  # the pages, from results
    ("autograder.recording",),  # finishing results and writing them: OUT, nbgrader's gradebook and files
    ("autograder.jobs",),  # where grading runs: worker processes, Dask
    ("autograder.class_run", "autograder.run_summary"),  # the class run's stages
    ("autograder.run", "autograder.pipeline"),  # `autograde grade`, the list of stages it runs
    ("autograder.commands",),  # the other commands
    # the command line, what stands beside the pipeline, and the students' practice-grading service (`autograde serve`)
    ("autograder.cli", "autograder.tools", "autograder.service"),
)


def module_names() -> dict[str, object]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names[name] = path
    return names


def imports_of(name: str, path, known) -> set[str]:
    """The autograder modules `name` imports, anywhere in it."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("autograder"):
                found.add(target)
    return found


def layer_of(name: str) -> int:
    best, layer = -1, None
    for index, entries in enumerate(LAYERS):
        for entry in entries:
            if (name == entry or name.startswith(entry + ".")) and len(entry) > best:
                best, layer = len(entry), index
    assert layer is not None, f"{name} is in no layer: add it to LAYERS"
    return layer


def graph() -> dict[str, set[str]]:
    known = module_names()
    edges = {name: imports_of(name, path, known) for name, path in known.items()}
    # a package's __init__ is what `import autograder.x.y` runs first: not a dependency of its own modules
    return {a: {b for b in bs if not a.startswith(b + ".")} for a, bs in edges.items()}


def test_every_import_points_down_the_layers():
    against = sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                     for a, bs in graph().items() for b in bs if layer_of(b) > layer_of(a))
    assert not against, "imports against the layers' order:\n" + "\n".join(against)


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other (Tarjan's strongly connected components of two or more)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_modules_import_each_other_in_a_cycle():
    found = cycles(graph())
    assert not found, f"modules that import each other: {found}"


def test_the_checks_find_what_they_are_for():
    """The checks above see a planted import against the order, and a planted cycle; and the graph they read is the
    source's (a deferred import inside a function is an edge)."""
    edges = defaultdict(set, {a: set(bs) for a, bs in graph().items()})
    assert "autograder.engine" in edges["autograder.jobs.worker"]  # `from autograder.engine import ...` in serve()
    assert layer_of("autograder.reporting.student_page") < layer_of("autograder.recording.outputs")
    edges["autograder.reporting.student_page"].add("autograder.recording.outputs")
    assert any(layer_of(b) > layer_of(a) for a, bs in edges.items() for b in bs)
    edges["autograder.engine"].add("autograder.jobs.worker")
    assert ["autograder.engine", "autograder.jobs.worker"] in cycles(edges)


MAX_FUNCTION_LINES = 80  # from the first statement of the body, the docstring left out (a signature never counts)


def long_functions(text: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                body = body[1:]
            if body and node.end_lineno - body[0].lineno + 1 > MAX_FUNCTION_LINES:
                found.append(f"{where}:{node.lineno} {node.name} ({node.end_lineno - body[0].lineno + 1} lines)")
    return found


def test_no_function_is_longer_than_80_lines():
    found = [line for path in sorted(PACKAGE.rglob("*.py"))
             for line in long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(REPO_ROOT)))]
    assert not found, "functions over 80 lines: " + "; ".join(found)
    # the measure: 80 statements after a docstring pass, 81 do not, however long the signature
    signature = "def f(\n" + "    a=1,\n" * 30 + "):\n    \"\"\"doc\n    more doc\"\"\"\n"
    assert long_functions(signature + "    x = 1\n" * 80, "t") == []
    assert long_functions(signature + "    x = 1\n" * 81, "t") == ["t:1 f (81 lines)"]
