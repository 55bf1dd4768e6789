"""Run a notebook's self-check (grade) cells in-process, with other seeds and other orders of creating a module's parts.

A correct answer must pass its self-checks whatever numbers the cell draws: the cell's own `torch.manual_seed(N)`
calls are replaced by other seeds (a cell that seeds nothing gets one at its top, in place of whatever state the
cells before it left), and each module class of the solution cells is rebuilt with the statements of its `__init__`
that create its direct submodules and parameters in another order (the same code, its lines swapped, so its weights
are drawn in another order). No kernel: the cells run in one namespace, as "Run All" would run them.
"""

import ast
import contextlib
import functools
import io
import itertools
import os
import random
import re
from dataclasses import dataclass, field

import nbformat
import torch

SEED_CALL = re.compile(r"torch\.manual_seed\(\s*\d+\s*\)")


@functools.lru_cache(maxsize=8192)
def compiled(source: str, name: str):
    """A cell's code object, compiled once: the same seeds' cells run again for every example and creation order."""
    return compile(source, name, "exec")


def cpu_manual_seed(seed):
    """torch.manual_seed as it acts on a CPU-only build (what these runs have): the CPU generator seeded. torch's own
    also queues the seed for every device not initialised yet (CUDA, XPU, MTIA), formatting the caller's whole stack
    each time: under pytest that was most of this harness's time. Same state, same draws
    (tests/test_self_checks_sound.py checks it)."""
    return torch.default_generator.manual_seed(int(seed))


@contextlib.contextmanager
def cpu_seeding():
    """torch.manual_seed is cpu_manual_seed while the cells run (restored after)."""
    original = torch.manual_seed
    torch.manual_seed = cpu_manual_seed
    try:
        yield
    finally:
        torch.manual_seed = original


def nbgrader(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def is_grade_cell(cell) -> bool:
    return cell.cell_type == "code" and bool(nbgrader(cell).get("grade"))


def is_demo_cell(cell) -> bool:
    return bool((cell.metadata.get("autograde") or {}).get("not_for_grading"))


def with_seeds(source: str, seeds: list[int]) -> str:
    """The cell with its k-th `torch.manual_seed(N)` call replaced by `torch.manual_seed(seeds[k])`; a cell without
    one is seeded with seeds[0] at its top."""
    count = len(SEED_CALL.findall(source))
    if count == 0:
        return f"torch.manual_seed({seeds[0]})\n" + source
    it = iter(seeds)
    return SEED_CALL.sub(lambda _m: f"torch.manual_seed({next(it)})", source)


@dataclass
class ModuleClass:
    """A class of the solution cells whose __init__ creates two or more direct submodules or parameters."""

    name: str
    cell_index: int
    units: list[int]  # indices in the __init__ body of the statements that create submodules or parameters
    after: dict[int, set[int]]  # unit k reads what the units after[k] create (self.W_q.out_features): they come first

    def orders(self, limit: int = 120, samples: int = 50, seed: int = 0) -> list[tuple[int, ...]]:
        """Every order of the units that the code can be written in (a unit after those it reads), but the notebook's
        own; `samples` random ones of them when there are more than `limit`. An order p writes unit p[0] first."""
        n = len(self.units)
        rng = random.Random(seed)
        if n <= 8:
            valid = [p for p in itertools.permutations(range(n)) if self._valid(p)]
        else:  # too many to list: draw
            valid, seen = [], set()
            while len(valid) < samples + 1 and len(seen) < 10 * samples * samples:
                p = tuple(rng.sample(range(n), n))
                if p not in seen and self._valid(p):
                    valid.append(p)
                seen.add(p)
        valid = [p for p in valid if p != tuple(range(n))]
        if len(valid) + 1 > limit:
            valid = rng.sample(valid, samples)
        return valid

    def _valid(self, order) -> bool:
        place = {unit: position for position, unit in enumerate(order)}
        return all(place[before] < place[k] for k, befores in self.after.items() for before in befores)


@dataclass(frozen=True)
class Unvaried:
    """A class whose creation order this test cannot vary by swapping statements, and why."""

    name: str
    reason: str


@dataclass
class NotebookRun:
    """A notebook's non-grade cells run once; its grade cells can then be run again and again."""

    nb: nbformat.NotebookNode
    namespace: dict = field(default_factory=dict)

    def __post_init__(self):
        self.namespace = {"__name__": "__main__"}
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code" or is_grade_cell(cell) or is_demo_cell(cell):
                continue
            self._exec(cell.source, f"cell {index}", self.namespace)

    @staticmethod
    def _exec(source: str, name: str, namespace: dict):
        with contextlib.redirect_stdout(io.StringIO()), cpu_seeding():
            exec(compiled(source, name), namespace)

    def grade_cells(self) -> list[tuple[str, str]]:
        return [(nbgrader(c)["grade_id"], c.source) for c in self.nb.cells if is_grade_cell(c)]

    def run_check(self, source: str, name: str = "self-check") -> str | None:
        """None if the self-check passes, else what it raised. The cell runs in a copy of the namespace (what it
        defines does not leak into the next run); the students' code it calls sees the notebook's namespace."""
        namespace = dict(self.namespace)
        try:
            with contextlib.redirect_stdout(io.StringIO()) as out, cpu_seeding():
                exec(compiled(source, name), namespace)
        except Exception as error:  # noqa: BLE001 -- a self-check that raises anything rejects the answer
            return f"{type(error).__name__}: {error}"
        if "✅" not in out.getvalue():
            return "the self-check ran to its end without printing ✅"
        return None

    # ---------------------------------------------------------------- module classes and their creation orders

    def module_classes(self) -> tuple[list[ModuleClass], list[Unvaried]]:
        """The classes of the solution cells whose instances (as the grade cells build them) have two or more direct
        submodules or parameters. A statement of __init__ creates one when it assigns `self.<name>` and <name> is such
        a part, or is an `if` whose body is only such statements. A class with a part that no such statement
        creates (a loop filling ModuleLists, setattr) is returned as unvaried, with the parts it could not place."""
        found, unvaried = [], []
        for index, cell in enumerate(self.nb.cells):
            if cell.cell_type != "code" or not nbgrader(cell).get("solution"):
                continue
            for node in ast.parse(cell.source).body:
                if not isinstance(node, ast.ClassDef):
                    continue
                cls = self.namespace.get(node.name)
                if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
                    continue
                children = self._children(cls)
                init = _init_of(node)
                if init is None or len(children) < 2:
                    continue
                units, created, covered = [], {}, set()
                for i, statement in enumerate(init.body):
                    names = _created(statement, children)
                    if names:
                        created[len(units)] = names
                        units.append(i)
                        covered |= names
                missing = children - covered
                if missing:
                    unvaried.append(Unvaried(node.name, f"creates {sorted(missing)} otherwise than by `self.<name> = ...`"))
                    continue
                after = {}
                for k, i in enumerate(units):
                    reads = {n.attr for n in ast.walk(init.body[i]) if isinstance(n, ast.Attribute)
                             and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) and n.value.id == "self"}
                    after[k] = {j for j, names in created.items() if j != k and names & reads}
                found.append(ModuleClass(node.name, index, units, after))
        return found, unvaried

    def _children(self, cls) -> set[str]:
        """Names of the direct submodules and parameters of the instances of `cls` that the grade cells build (so
        that optional parts, e.g. those made only with qk_norm=True, are seen too)."""
        with self.counting(cls.__name__) as made:
            for grade_id, source in self.grade_cells():
                self.run_check(source, grade_id)
        names: set[str] = set()
        for module in made:
            names |= set(module._modules) | set(module._parameters)
        return names

    @contextlib.contextmanager
    def reordered(self, module_class: ModuleClass, order: tuple[int, ...]):
        """The notebook with `module_class`'s cell run again, the statements of its __init__ that create parts
        written in `order` (in the places they take, the order[0]-th of them first); the cell's own code restored
        after."""
        cell = self.nb.cells[module_class.cell_index]
        tree = ast.parse(cell.source)
        node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == module_class.name)
        init = _init_of(node)
        statements = [init.body[i] for i in module_class.units]
        for place, k in zip(module_class.units, order):
            init.body[place] = statements[k]
        self._exec(ast.unparse(tree), f"cell {module_class.cell_index} reordered", self.namespace)
        try:
            yield
        finally:
            self._exec(cell.source, f"cell {module_class.cell_index}", self.namespace)

    @contextlib.contextmanager
    def counting(self, class_name: str):
        """The instances of a class made inside the block: which self-checks build it, and with which parts."""
        cls = self.namespace[class_name]
        original = cls.__init__
        made = []

        def init(obj, *args, **kwargs):
            original(obj, *args, **kwargs)
            if type(obj) is cls:
                made.append(obj)

        cls.__init__ = init
        try:
            yield made
        finally:
            cls.__init__ = original


def _init_of(node: ast.ClassDef):
    return next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _created(statement, children: set[str]) -> set[str]:
    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
        targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
        names = {t.attr for t in targets if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                 and t.value.id == "self" and t.attr in children}
        return names
    if isinstance(statement, ast.If) and not statement.orelse and statement.body:
        parts = [_created(s, children) for s in statement.body]
        if all(parts):
            return set().union(*parts)
    return set()


@contextlib.contextmanager
def student_env(student_id: str):
    """The kernel's view of the student id (JUPYTERHUB_USER), as on a JupyterHub; plots drawn off-screen."""
    saved = {k: os.environ.get(k) for k in ("JUPYTERHUB_USER", "MPLBACKEND")}
    os.environ["JUPYTERHUB_USER"] = student_id
    os.environ["MPLBACKEND"] = "Agg"
    rng_state = torch.random.get_rng_state()
    try:
        yield
    finally:
        torch.random.set_rng_state(rng_state)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
