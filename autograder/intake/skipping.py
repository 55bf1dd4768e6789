"""Which cells of a submission need not run: the instructor's demo and plot cells, left exactly as handed out.

A code cell of the source notebook tagged `"autograde": {"not_for_grading": true}` in its metadata prints,
plots or demonstrates; it defines nothing that a later untagged cell or a check reads and leaves no trace in the
kernel (no draw from the global random generators, no seed, no default dtype, no change of an earlier object):
tests/test_cell_skipping.py runs every tagged cell of every reference notebook and checks that. A submitted cell
is skipped only when all of these hold, decided from the submission alone (nothing the student says about it):

- its source is byte-identical to a tagged cell of the source notebook (the student cannot tag a cell);
- no cell that runs reads a name it assigns after it has run (a cell below it, or a function of any cell, which a
  check may call): a student cell that uses the demo's variables keeps the demo;
- no cell that runs reaches names dynamically (`globals`, `exec`, `eval`, `getattr`, `__dict__`, `__main__`,
  ... see DYNAMIC), and every cell that runs parses: then nothing is skipped.

A demo cell calls the student's functions; what those do besides returning (a counter, a draw) is the student's
own affair, as under any other input. `autograde grade --run-all-cells` runs every cell, as nbgrader does; the
choice is part of the regrade key.
"""

import re
import symtable

# Identifiers through which code can read or write the notebook's names without naming them.
# (`hasattr(model, "layers")` reads no value; `getattr(f, "__glo" + "bals__")` would, hence getattr is here.)
DYNAMIC = frozenset({
    "globals", "locals", "vars", "dir", "exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr",
    "__getattribute__", "__globals__", "__builtins__", "builtins", "__dict__", "__main__", "get_ipython",
    "importlib", "inspect", "sys", "_getframe", "f_globals", "f_locals", "f_back", "tb_frame", "gi_frame",
    "cr_frame", "__traceback__", "operator", "attrgetter", "methodcaller", "runpy", "ctypes", "gc", "pickle", "dill",
    "shelve", "code",
})
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class CellNames:
    """The notebook-level names a cell's code assigns and reads, scope by scope (Python's own symbol tables): a
    name read inside a function counts when it is the notebook's (global), not when it is local or a parameter.
    `loads_now` are read while the cell runs (its top level, class bodies, comprehensions); `loads_later` inside
    functions, lambdas and generators, which may run at any later time (a check calls them after every cell)."""

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


def reaches_names_dynamically(source: str) -> bool:
    """Any identifier of DYNAMIC in the code (as a name, an attribute or an import): a conservative test."""
    return bool(DYNAMIC & set(_IDENTIFIER.findall(source)))


def cells_to_skip(sources: list[str], identical: list[bool]) -> set[int]:
    """The positions (in `sources`, the code that would run, cell by cell in order) of the cells that need not run;
    `identical[i]`: cell i as submitted is byte-identical to a tagged cell of the source notebook."""
    candidates = {i for i, same in enumerate(identical) if same}
    if not candidates:
        return set()
    names = {}
    for i, source in enumerate(sources):
        try:
            names[i] = CellNames(source)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            if i not in candidates:
                return set()  # a cell that runs and cannot be read: nothing is skipped
            candidates.discard(i)
    if any(reaches_names_dynamically(sources[i]) for i in range(len(sources)) if i not in candidates):
        return set()
    while True:  # drop the candidates whose names a running cell reads, until none does
        later = set().union(*(names[i].loads_later for i in names if i not in candidates))
        keep = set()
        for i in candidates:  # read after it: by a cell below it, or by a function of any cell
            read = later.union(*(names[j].loads_now for j in names if j > i and j not in candidates))
            if not names[i].stores & read:
                keep.add(i)
        if keep == candidates:
            return candidates
        candidates = keep
