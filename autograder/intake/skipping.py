"""Which cells of a submission need not run: the instructor's demo and plot cells, left exactly as handed out.

A code cell of the source notebook tagged `"autograde": {"not_for_grading": true}` in its metadata prints,
plots or demonstrates; it defines nothing that a later untagged cell or a check reads and leaves no trace in the
kernel (no draw from the global random generators, no seed, no default dtype, no change of an earlier object):
tests/test_cell_skipping.py runs every tagged cell of every reference notebook and checks that.

A skipped cell never costs points; two layers make sure of it:

1. This module's rule, conservative by construction: a submitted cell is a candidate only when its source is
   byte-identical to a tagged cell (the student cannot tag a cell), and it stays skipped only when no cell that
   runs *mentions* a name it assigns where the mention could run after it: any use of the name below it at the
   top level (a read, `del`, `x += 1`), any use inside a function or lambda of any cell (a check may call it
   later), and any identifier of a string literal of any cell that reads as an expression or a format field
   (`getattr(m, "x")`, a string annotation, "{x}"; prose, docstrings and string statements aside: reaching
   those needs `__doc__` or a computed string). Identifiers are compared after Python's own
   NFKC normalisation (`𝐠𝐥𝐨𝐛𝐚𝐥𝐬` is `globals`). A cell that mentions any name of DYNAMIC (how code reaches names
   without spelling them) anywhere keeps every cell; a cell that does not parse is read as all the identifiers
   in its text. The analysis is linear in the notebook's size and capped (MAX_ANALYSED_CHARS, MAX_ANALYSED_CELLS):
   past the cap every cell runs.
2. The engine (autograder/engine.py) keeps a result graded with skipped cells only when every cell that ran
   succeeded and every check passed; otherwise it grades the submission again with every cell, within what is
   left of the same budget, and that result stands. So a name reached through a computed string (which no static
   rule sees) costs time, never points.

What neither layer sees: a tagged cell calls the student's own functions (that is what a demo is for), and one that
keeps state from one call to the next (a cache keyed on too little, a counter, a global it sets) could make a check
fail after the demo's call that passes without it; the clean result with the demo skipped then stands. No example,
hostile case or bench notebook does so (tests/test_cell_skipping.py grades them both ways); `--run-all-cells` rules
it out.

`autograde grade --run-all-cells` runs every cell, as nbgrader does; the choice is part of the regrade key.
"""

import ast
import functools
import re
import symtable
import unicodedata
from collections import defaultdict, deque

# Identifiers through which code can read or write the notebook's names without naming them.
# (`hasattr(model, "layers")` reads no value; `getattr(f, "__glo" + "bals__")` would, hence getattr is here.)
DYNAMIC = frozenset({
    "globals", "locals", "vars", "dir", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr",
    "__getattribute__", "__globals__", "__builtins__", "builtins", "__dict__", "__main__", "get_ipython",
    "importlib", "inspect", "sys", "_getframe", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame",
    "cr_frame", "__traceback__", "operator", "attrgetter", "methodcaller", "runpy", "ctypes", "gc", "pickle", "dill",
    "shelve", "code", "get_type_hints", "__annotations__", "Formatter", "get_field", "vformat", "format_map",
    "__reduce__", "__reduce_ex__", "copyreg", "pydoc", "typing", "dataclasses", "attr", "ForwardRef", "__doc__",
})
_IDENTIFIER = re.compile(r"[^\W\d]\w*")
MAX_ANALYSED_CHARS = 2 * 1024**2  # code of the cells that run, all together; past it every cell runs
MAX_ANALYSED_CELLS = 2000


def identifiers(text: str) -> set[str]:
    """Every identifier-like word of `text`, as Python would spell the identifier (NFKC)."""
    return set(_IDENTIFIER.findall(unicodedata.normalize("NFKC", text)))


class CellNames:
    """The notebook-level names a cell's code assigns and reads, scope by scope (Python's own symbol tables): a
    name read inside a function counts when it is the notebook's (global), not when it is local or a parameter.
    `loads_now` are read while the cell runs (its top level, class bodies, comprehensions); `loads_later` inside
    functions, lambdas and generators, which may run at any later time (a check calls them after every cell).
    Used for the instructor's tagged cells (what a candidate assigns); the cells that run are read by CellUses."""

    _RUN_NOW = ("module", "class")
    _COMPREHENSIONS = ("listcomp", "dictcomp", "setcomp")

    def __init__(self, source: str):
        self.stores: set[str] = set()
        self.loads_now: set[str] = set()
        self.loads_later: set[str] = set()
        self._walk(symtable.symtable(source, "<cell>", "exec"), now=True)

    @property
    def loads(self) -> set[str]:
        return self.loads_now | self.loads_later

    def _walk(self, table, now: bool) -> None:
        top = table.get_type() == "module"
        for symbol in table.get_symbols():
            name = symbol.get_name()
            if not (top or symbol.is_global()):
                continue
            if symbol.is_referenced():
                (self.loads_now if now else self.loads_later).add(name)
            if symbol.is_assigned() or symbol.is_imported() or (top and symbol.is_namespace()) \
                    or symbol.is_declared_global():
                self.stores.add(name)
        for child in table.get_children():
            runs_now = child.get_type() in self._RUN_NOW or child.get_name() in self._COMPREHENSIONS
            self._walk(child, now and runs_now)


class CellUses:
    """Every way the code of a cell that runs may use a notebook-level name, split by when it may happen.

    `now`: names used at the cell's top level (class bodies, comprehensions, decorators and defaults included) in
    any way but a plain assignment: loaded, deleted, augmented (`x += 1` reads x), annotated. They are used while
    the cell runs, so they matter only for a demo cell above it. `later`: the global names of every function,
    lambda and generator scope (any use), and every identifier spelled in a string literal or f-string anywhere in
    the cell: these may be used at any later time. `all`: every identifier of the text, for the DYNAMIC test. A
    cell that does not parse has every identifier of its text in `later` (it does not run, but the sandbox's
    parser is not ours)."""

    def __init__(self, source: str):
        self.all = frozenset(identifiers(source))
        self.now: set[str] = set()
        self.later: set[str] = set()
        try:
            tree = ast.parse(source)
            tables = symtable.symtable(source, "<cell>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            self.later = set(self.all)
            return
        stack = list(ast.iter_child_nodes(tree))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                # the decorators, defaults and annotations run now; the body later (its globals: symbol tables)
                args = node.args
                stack.extend([*args.defaults, *(d for d in args.kw_defaults if d is not None)])
                if not isinstance(node, ast.Lambda):
                    stack.extend(node.decorator_list)
                    stack.extend(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs,
                                                        args.vararg, args.kwarg) if a is not None and a.annotation)
                    if node.returns is not None:
                        stack.append(node.returns)
                self._strings(node)
                continue
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                self.now.add(node.id)
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
                self.now.add(node.target.id)  # read, then written
            elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                self.later |= _words(node.value)
            elif _bare_string(node):
                continue  # a docstring or a string as a comment: its words are nobody's names (`__doc__` is DYNAMIC)
            stack.extend(ast.iter_child_nodes(node))
        tables_left = list(tables.get_children())
        while tables_left:
            table = tables_left.pop()
            if table.get_type() == "function":
                self.later |= {s.get_name() for s in table.get_symbols() if s.is_global() or s.is_declared_global()}
            tables_left.extend(table.get_children())

    def _strings(self, function) -> None:
        stack = [function]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                self.later |= _words(node.value)
            elif not _bare_string(node):
                stack.extend(ast.iter_child_nodes(node))


def _bare_string(node) -> bool:
    """A statement that is only a string (a docstring, or a string used as a comment)."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
        and isinstance(node.value.value, (str, bytes))


_FIELD = re.compile(r"\{([^{}]*)\}")


def _words(value: str | bytes) -> set[str]:
    """The names a string literal may stand for: all its identifiers when it reads as a Python expression (a
    name for getattr, a string annotation, "torch.Tensor | demo"), and those of its {format fields}; the words of
    prose ("model must have layers") are nobody's names. A long string counts every word."""
    text = value if isinstance(value, str) else value.decode("latin-1")
    if len(text) > 4096:
        return identifiers(text)
    words = set().union(*(identifiers(field) for field in _FIELD.findall(text)))
    try:
        ast.parse(unicodedata.normalize("NFKC", text).strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return words
    return words | identifiers(text)


@functools.lru_cache(maxsize=64)
def _tagged(source: str) -> tuple[frozenset, CellUses]:
    """What an instructor's tagged cell assigns, and how it uses names if it runs after all (cached: a submission
    may hold many copies of one demo cell; only byte-identical copies of the instructor's cells come here)."""
    return frozenset(CellNames(source).stores), CellUses(source)


@functools.lru_cache(maxsize=1024)
def _instructors(source: str) -> CellUses:
    """How a cell that is byte-identical to one of the instructor's code cells uses names (cached: such cells, the
    set-up and import cells, are most of every submission, and their analysis most of its reading time). Only the
    instructor's text is a key here: nothing a student wrote is kept from one submission to the next."""
    return CellUses(source)


def reaches_names_dynamically(source: str) -> bool:
    """Any identifier of DYNAMIC in the code (as a name, an attribute, an import or inside a string, NFKC)."""
    return bool(DYNAMIC & identifiers(source))


def cells_to_skip(sources: list[str], identical: list[bool], instructors: list[bool] | None = None) -> set[int]:
    """The positions (in `sources`, the code that would run, cell by cell in order) of the cells that need not run;
    `identical[i]`: cell i as submitted is byte-identical to a tagged cell of the source notebook; `instructors[i]`
    (optional): to any code cell of it (its analysis is then cached: the same answer, computed once).

    Linear in the size of the code: a candidate is dropped (it runs) the first time a name it assigns is used
    later or below it; each candidate is dropped at most once, each running cell read once."""
    candidates = {i for i, same in enumerate(identical) if same}
    if not candidates or len(sources) > MAX_ANALYSED_CELLS or sum(map(len, sources)) > MAX_ANALYSED_CHARS:
        return set()
    stores = {}
    for i in sorted(candidates):
        try:
            stores[i] = _tagged(sources[i])[0]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            candidates.discard(i)
    by_name: dict[str, deque] = defaultdict(deque)  # the candidates that assign a name, in notebook order
    for i in sorted(candidates):
        for name in stores[i]:
            by_name[name].append(i)
    used_later: set[str] = set()
    last_used_now: dict[str, int] = {}
    pending = [i for i in range(len(sources)) if i not in candidates]  # cells that run, not yet taken in
    while pending:
        i = pending.pop()
        if identical[i]:
            uses = _tagged(sources[i])[1]
        elif instructors is not None and instructors[i]:
            uses = _instructors(sources[i])
        else:
            uses = CellUses(sources[i])
        if uses.all & DYNAMIC:
            return set()
        dropped = []
        for name in uses.later - used_later:
            used_later.add(name)
            dropped.extend(by_name.pop(name, ()))
        for name in uses.now:
            if i > last_used_now.get(name, -1):
                last_used_now[name] = i
                queue = by_name.get(name)
                while queue and queue[0] < i:
                    dropped.append(queue.popleft())
        for c in dropped:
            if c in candidates:
                candidates.discard(c)
                pending.append(c)
    return candidates
