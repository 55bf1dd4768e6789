"""The regrade cache's key covers every file that decides a score (autograder/recording/cache.py).

A stored result is reused while its key is unchanged; a file that decides a score but is missing from the key
would keep an old grade after the instructor edits it (a mistake's name in the catalogue, a hand computation,
the sandbox's runner). Nothing is skipped by hand: the modules a grading imports are read off a fresh interpreter,
and the files the sandbox runs off environment.RUNNER_FILES."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import REPO_ROOT
from autograder.recording import cache
from autograder.running.sandbox import environment

SANDBOX = Path("autograder/running/sandbox")

# In a fresh interpreter: what the grading of every assignment imports (the engine, each assignment's checks with
# their catalogue and references); the repository's own files among them.
IMPORTED = """
import importlib, json, sys
from pathlib import Path
import autograder.engine
from autograder import REPO_ROOT
from autograder.assignments import assignment_ids
for a in assignment_ids():
    importlib.import_module(f"autograder.checks.{a}")
files = set()
for module in list(sys.modules.values()):
    path = Path(getattr(module, "__file__", None) or "/").resolve()
    if path.is_relative_to(REPO_ROOT / "autograder") or path.is_relative_to(REPO_ROOT / "solutions"):
        files.add(str(path.relative_to(REPO_ROOT)))
print(json.dumps(sorted(files)))
"""


def _covered(root: Path = REPO_ROOT) -> set[str]:
    return {str(p.relative_to(root)) for pattern in cache.GRADING_CODE for p in root.glob(pattern)}


@pytest.fixture(scope="module")
def imported() -> set[str]:
    out = subprocess.run([sys.executable, "-c", IMPORTED], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_every_module_the_grading_imports_is_in_the_key_or_said_to_decide_no_score(imported):
    runs_in_sandbox = {str(SANDBOX / name) for name in environment.RUNNER_FILES}
    missing = sorted((imported | runs_in_sandbox) - _covered() - set(cache.NOT_GRADING_CODE))
    assert not missing, f"decide a score but are not in cache.GRADING_CODE (nor NOT_GRADING_CODE): {missing}"
    stale = sorted(set(cache.NOT_GRADING_CODE) - imported)
    assert not stale, f"NOT_GRADING_CODE names files the grading does not import: {stale}"
    assert not set(cache.NOT_GRADING_CODE) & _covered(), "a file is both in the key and said to decide no score"
    empty = [pattern for pattern in cache.GRADING_CODE if not list(REPO_ROOT.glob(pattern))]
    assert not empty, f"GRADING_CODE patterns that match nothing: {empty}"
    # the catalogue (mistake names), the hand computations and the sandbox's runner: files the key once missed
    for needed in ("autograder/catalogue/rmsnorm.py", "solutions/hand/rmsnorm.py", str(SANDBOX / "runner.py")):
        assert needed in imported | runs_in_sandbox and needed in _covered(), needed


def test_the_runner_files_are_the_runner_and_every_sibling_it_imports():
    """The sandbox runs runner.py by path, not as a module of the package: its imports of its own folder's
    modules are read from its source, and each is copied into the sandbox and in the key."""
    folder = REPO_ROOT / SANDBOX
    siblings = {p.stem for p in folder.glob("*.py")}
    seen, todo = set(), ["runner"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse((folder / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name in siblings]
            elif isinstance(node, ast.ImportFrom):
                todo += [a.name for a in node.names if node.level and a.name in siblings]
                if node.module in siblings:
                    todo.append(node.module)
    assert set(environment.RUNNER_FILES) == {f"{name}.py" for name in seen}


def test_editing_any_file_in_the_key_changes_the_key(tmp_path):
    root = tmp_path / "checkout"
    files = sorted(_covered()) + ["assignments/rmsnorm/rmsnorm.ipynb"]
    for rel in files:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO_ROOT / rel, root / rel)
    digest = cache._code_digest.__wrapped__
    before = digest(root, "rmsnorm")
    assert before == digest(REPO_ROOT, "rmsnorm"), "the copy is not the checkout"
    for rel in files:
        original = (root / rel).read_bytes()
        (root / rel).write_bytes(original + b"\n# edited\n")
        assert digest(root, "rmsnorm") != before, f"editing {rel} leaves the key unchanged"
        (root / rel).write_bytes(original)
    assert digest(root, "rmsnorm") == before
    # and a file that only reports (the reports' template code) is not in it: `autograde report` re-renders those
    assert not any(rel.startswith("autograder/reporting/") for rel in files)
