"""Keep the solution cells of `assignments/` equal to the reference code in `solutions/`.

A code cell that mirrors reference code says so in its metadata::

    "autograde": {"mirror": ["import math", "solutions.rmsnorm:rms_norm", "solutions.rmsnorm:RMSNorm"]}

Entries that start with `import` or `from` are copied as they are; `module:name` entries are
replaced by the source of that top-level definition in the module. The cell's source is exactly
those pieces, imports first, definitions separated by two blank lines. `solutions/` is the truth:
`sync` rewrites the cells from it, `check` lists the cells that differ.
"""

import ast
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import REPO_ROOT

NB_VERSION = 4


@dataclass(frozen=True)
class MirrorMismatch:
    notebook: Path
    cell_index: int
    mirror: tuple[str, ...]


def definition_source(module_name: str, name: str) -> str:
    """The source of one top-level function, class or assignment of a module, decorators included."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ValueError(f"mirror entry {module_name}:{name}: no module {module_name!r}")
    text = Path(spec.origin).read_text(encoding="utf-8")
    lines = text.splitlines()
    for node in ast.parse(text).body:
        names = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        if name in names:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            return "\n".join(lines[first - 1 : _end_with_trailing_comments(lines, node)])
    raise ValueError(f"mirror entry {module_name}:{name}: {name!r} is not defined at the top of {spec.origin}")


def _end_with_trailing_comments(lines: list[str], node: ast.stmt) -> int:
    """The last line of a definition, counting the indented comments that close its body.

    ast ends a function at its last statement; a closing `### END SOLUTION` comment belongs to it.
    """
    end = node.end_lineno
    index = end  # 0-based index of the line after the definition
    while index < len(lines):
        line = lines[index]
        stripped = line.lstrip()
        if stripped and not (stripped.startswith("#") and len(line) - len(stripped) > node.col_offset):
            break
        index += 1
        if stripped:
            end = index
    return end


def mirrored_source(mirror: list[str]) -> str:
    """The cell source that a mirror list describes."""
    imports = [entry for entry in mirror if entry.startswith(("import ", "from "))]
    definitions = []
    for entry in mirror:
        if entry in imports:
            continue
        module_name, sep, name = entry.partition(":")
        if not sep:
            raise ValueError(f"mirror entry {entry!r}: expected 'module:name' or an import line")
        definitions.append(definition_source(module_name, name))
    parts = (["\n".join(imports)] if imports else []) + definitions
    return "\n\n\n".join(parts)


def source_notebooks(root: Path = REPO_ROOT) -> list[Path]:
    return sorted((root / "assignments").glob("*/*.ipynb"))


def _mirror_cells(nb):
    for index, cell in enumerate(nb.cells):
        mirror = cell.get("metadata", {}).get("autograde", {}).get("mirror")
        if mirror:
            yield index, cell, list(mirror)


def check(root: Path = REPO_ROOT) -> list[MirrorMismatch]:
    """Every mirrored cell whose source differs from the reference code."""
    mismatches = []
    for path in source_notebooks(root):
        nb = nbformat.read(path, as_version=NB_VERSION)
        for index, cell, mirror in _mirror_cells(nb):
            if cell.source != mirrored_source(mirror):
                mismatches.append(MirrorMismatch(path, index, tuple(mirror)))
    return mismatches


def sync(root: Path = REPO_ROOT) -> list[Path]:
    """Rewrite mirrored cells from `solutions/`; returns the notebooks that changed."""
    changed = []
    for path in source_notebooks(root):
        nb = nbformat.read(path, as_version=NB_VERSION)
        dirty = False
        for _, cell, mirror in _mirror_cells(nb):
            source = mirrored_source(mirror)
            if cell.source != source:
                cell.source = source
                dirty = True
        if dirty:
            nbformat.write(nb, path)
            changed.append(path)
    return changed


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--check"]:
        mismatches = check()
        for m in mismatches:
            print(f"{m.notebook.relative_to(REPO_ROOT)}: cell {m.cell_index} differs from {', '.join(m.mirror)}")
        if mismatches:
            print("run `python -m autograder.tools.sync_solutions` to rewrite them from solutions/")
        return 1 if mismatches else 0
    if argv:
        print("usage: python -m autograder.tools.sync_solutions [--check]", file=sys.stderr)
        return 2
    for path in sync():
        print(f"updated {path.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
