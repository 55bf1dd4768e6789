"""Per check module: lines, checks, private helpers (top-level functions not starting with test_) and their
lines, and `except CheckFailed` blocks: how much of a module is the exercise's specification and how much is
machinery around it.

    python benchmarks/check_modules.py            # this checkout
    python benchmarks/check_modules.py OTHER_DIR  # another checkout (e.g. an older commit, git worktree add)

It reads autograder/checks/<id>.py (before the rename: test_<id>.py) for each assignments/<id>/.
"""

import ast
import sys
from pathlib import Path


def count(path: Path) -> dict:
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    checks = [f for f in functions if f.name.startswith("test_")]
    helpers = [f for f in functions if not f.name.startswith("test_")]
    excepts = sum(1 for node in ast.walk(tree) if isinstance(node, ast.ExceptHandler) and node.type is not None
                  and "CheckFailed" in ast.unparse(node.type))
    span = lambda fs: sum(f.end_lineno - f.lineno + 1 for f in fs)  # noqa: E731
    return {"lines": len(source.splitlines()), "checks": len(checks), "check_lines": span(checks),
            "helpers": len(helpers), "helper_lines": span(helpers), "except_checkfailed": excepts}


def main(root: Path) -> None:
    folder = root / "autograder" / "checks"
    # the assignments' own modules (checks/ also holds the kit, the plugin, probes and diagnosis)
    ids = {d.name for d in (root / "assignments").iterdir() if (d / f"{d.name}.ipynb").is_file()}
    modules = sorted(p for p in folder.glob("*.py") if p.stem in ids or p.stem.removeprefix("test_") in ids)
    print(f"{'module':<26} {'lines':>6} {'checks':>7} {'check lines':>12} {'helpers':>8} {'helper lines':>13} "
          f"{'except CheckFailed':>19}")
    totals = dict.fromkeys(("lines", "checks", "check_lines", "helpers", "helper_lines", "except_checkfailed"), 0)
    for path in modules:
        row = count(path)
        for key in totals:
            totals[key] += row[key]
        print(f"{path.name:<26} {row['lines']:>6} {row['checks']:>7} {row['check_lines']:>12} {row['helpers']:>8} "
              f"{row['helper_lines']:>13} {row['except_checkfailed']:>19}")
    print(f"{'total':<26} {totals['lines']:>6} {totals['checks']:>7} {totals['check_lines']:>12} "
          f"{totals['helpers']:>8} {totals['helper_lines']:>13} {totals['except_checkfailed']:>19}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
