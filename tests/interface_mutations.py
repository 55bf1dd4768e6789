"""Interface mutants of the references: each student-written definition of solutions/ with one argument ignored.

For every definition that a solution cell of assignments/ mirrors (the code students write), every parameter with a
default, and `num_kv_heads` and `mask` where present, a mutant binds the parameter to a fixed value on entry
(`eps = 1e-06` as the first statement of the body): the function or method ignores what it is passed. The values:

- the parameter's default (its literal in the signature);
- `eps`: also 1e-5 (another common default);
- `mask`: None (the mask ignored) and a causal mask of x's sequence length (the given mask replaced by a causal one);
- `num_kv_heads` (no default): `num_q_heads` where the signature has it (plain multi-head attention), else 1.

A value that a definition passes on to several calls (LlamaBlock gives `eps` to both norms and the attention) also
makes one mutant per call, that call alone given the default: "one sub-module forgot it".

The mutants are made from the source by an AST transformation (tests/test_interface_mutations.py grades them), so a
new parameter of a pinned interface gets its mutants without anything written here.
"""

import ast
import builtins
import copy
from dataclasses import dataclass

import nbformat

from autograder import REPO_ROOT
from autograder.tools.sync_solutions import definition_source

EXTRA_PARAMETERS = ("num_kv_heads", "mask")  # varied although they have no default (mask's is None)
OTHER_DEFAULT_EPS = 1e-5
# the causal mask that replaces a given one: additive, -inf above the diagonal, of x's sequence length ([B, S, D])
CAUSAL = ("_mutant_torch.triu(_mutant_torch.full((x.shape[-2], x.shape[-2]), float('-inf'), dtype=x.dtype, "
          "device=x.device), diagonal=1)")
CAUSAL_LABEL = "causal"


@dataclass(frozen=True)
class Mutant:
    assignment_id: str
    definition: str  # "LlamaBlock.__init__", "rms_norm"
    parameter: str
    value: str  # the source of what the parameter is replaced by
    where: str  # "everywhere", or the one call that gets the value ("RMSNorm(d_model, eps) at line 3")
    part: str  # grade id of the part the definition is graded in
    old: str  # the definition's source in the notebook
    new: str  # the mutant's source

    @property
    def label(self) -> str:
        return f"{self.assignment_id}:{self.definition}:{self.parameter}={self.value}" + (
            "" if self.where == "everywhere" else f" only in {self.where}")

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.assignment_id, self.definition, self.parameter, self.value)


def student_definitions(assignment_id: str) -> list[tuple[str, str, str]]:
    """(module, name, part) for each definition mirrored into a solution cell (the code students write)."""
    from autograder.assignments import load_assignment

    assignment = load_assignment(assignment_id)
    part_of = {cell: part.grade_id for part in assignment.parts for cell in part.answer_cells}
    nb = nbformat.read(REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb", as_version=4)
    found = []
    for cell in nb.cells:
        meta = cell.get("metadata", {})
        mirror = meta.get("autograde", {}).get("mirror") or []
        nbgrader = meta.get("nbgrader", {})
        if cell.cell_type != "code" or not nbgrader.get("solution"):
            continue
        for entry in mirror:
            if entry.startswith(("import ", "from ")):
                continue
            module, _, name = entry.partition(":")
            found.append((module, name, part_of[nbgrader["grade_id"]]))
    return found


def _parameters(function: ast.FunctionDef) -> list[tuple[str, ast.expr | None]]:
    """(name, default or None) of the function's parameters, self and cls left out."""
    args = function.args
    positional = args.posonlyargs + args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    pairs = list(zip([a.arg for a in positional], defaults)) + [(a.arg, d) for a, d in
                                                                  zip(args.kwonlyargs, args.kw_defaults)]
    return [(name, default) for name, default in pairs if name not in ("self", "cls")]


def _values(function: ast.FunctionDef, name: str, default: ast.expr | None) -> list[ast.expr]:
    """What the parameter is replaced by (see the module's docstring)."""
    names = [n for n, _ in _parameters(function)]
    values = []
    if default is not None:
        values.append(copy.deepcopy(default))
    if name == "eps" and not (isinstance(default, ast.Constant) and default.value == OTHER_DEFAULT_EPS):
        values.append(ast.Constant(OTHER_DEFAULT_EPS))
    if name == "mask":
        if default is None:
            values.append(ast.Constant(None))
        if "x" not in names:
            raise ValueError(f"{function.name}: a mask without an x to take its sequence length from")
        values.append(ast.parse(CAUSAL, mode="eval").body)
    if name == "num_kv_heads":
        values.append(ast.Name("num_q_heads", ast.Load()) if "num_q_heads" in names else ast.Constant(1))
    return values


def _bind_on_entry(function: ast.FunctionDef, name: str, value: ast.expr) -> None:
    body = function.body
    at = 1 if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        and isinstance(body[0].value.value, str) else 0  # after the docstring
    statements = ast.parse("import torch as _mutant_torch").body if "_mutant_torch" in ast.unparse(value) else []
    statements.append(ast.Assign([ast.Name(name, ast.Store())], copy.deepcopy(value), lineno=0))
    function.body = body[:at] + statements + body[at:]


def _passed_on(function: ast.FunctionDef, name: str) -> list[tuple[ast.Call, ast.Name]]:
    """The calls that get the parameter itself as an argument (positional or keyword), builtins (isinstance's
    validation) left out; none when the name is assigned in the function (then a use may not be the parameter)."""
    if any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load) for n in ast.walk(function)):
        return []
    uses = []
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and hasattr(builtins, node.func.id)):
            for argument in list(node.args) + [k.value for k in node.keywords]:
                if isinstance(argument, ast.Name) and argument.id == name and isinstance(argument.ctx, ast.Load):
                    uses.append((node, argument))
    return uses


class _Replace(ast.NodeTransformer):
    def __init__(self, target: ast.Name, value: ast.expr):
        self.target, self.value = (target.lineno, target.col_offset), value

    def visit_Name(self, node):
        if (node.lineno, node.col_offset) == self.target:
            return copy.deepcopy(self.value)
        return node


def _functions(tree: ast.stmt) -> list[tuple[str, ast.FunctionDef]]:
    if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return [(tree.name, tree)]
    if isinstance(tree, ast.ClassDef):
        return [(f"{tree.name}.{f.name}", f) for f in tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return []


def definition_mutants(assignment_id: str, module: str, name: str, part: str) -> list[Mutant]:
    """The mutants of one definition (its source as the notebook holds it)."""
    source = definition_source(module, name)
    original = ast.parse(source).body[0]
    mutants = []
    for index, (qualified, function) in enumerate(_functions(original)):
        for parameter, default in _parameters(function):
            if default is None and parameter not in EXTRA_PARAMETERS:
                continue
            for value in _values(function, parameter, default):
                shown = ast.unparse(value)
                shown = CAUSAL_LABEL if shown == ast.unparse(ast.parse(CAUSAL, mode="eval")) else shown
                tree = copy.deepcopy(original)
                _bind_on_entry(_functions(tree)[index][1], parameter, value)
                mutants.append(Mutant(assignment_id, qualified, parameter, shown, "everywhere", part, source,
                                      ast.unparse(tree)))
                uses = _passed_on(function, parameter)
                if len(uses) < 2:
                    continue
                for call, use in uses:
                    tree = copy.deepcopy(original)
                    _Replace(use, value).visit(_functions(tree)[index][1])
                    where = f"{ast.unparse(call)} at line {call.lineno}"
                    mutants.append(Mutant(assignment_id, qualified, parameter, shown, where, part, source,
                                          ast.unparse(tree)))
    return mutants


def interface_mutants(assignment_id: str) -> list[Mutant]:
    return [m for module, name, part in student_definitions(assignment_id)
            for m in definition_mutants(assignment_id, module, name, part)]
