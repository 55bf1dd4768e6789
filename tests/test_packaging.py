"""Every third-party module the grader imports at run time is a declared dependency; Dask is an extra."""

import ast
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement

from autograder import REPO_ROOT, __version__
from autograder.running.sandbox import environment

# top-level module -> the extra that provides it (imported only where it is chosen); jupyterhub, tornado: `autograde serve`
OPTIONAL = {"dask": "dask", "jupyterhub": "service", "tornado": "service"}


def declared() -> tuple[set[str], dict[str, set[str]]]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    names = lambda reqs: {Requirement(r).name.lower().replace("_", "-") for r in reqs}
    return names(project["dependencies"]), {k: names(v) for k, v in project["optional-dependencies"].items()}


def imported_modules() -> set[str]:
    """Top-level modules imported anywhere in autograder/ and solutions/ (also inside functions)."""
    modules = set()
    for path in [*(REPO_ROOT / "autograder").rglob("*.py"), *(REPO_ROOT / "solutions").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def test_every_run_time_import_is_a_dependency():
    required, extras = declared()
    distributions = packages_distributions()
    # ours; the modules the sandbox runs as siblings of runner.py (imported by name there); pytest's own
    local = {"autograder", "solutions", "_pytest", *(Path(name).stem for name in environment.RUNNER_FILES)}
    missing = []
    for module in sorted(imported_modules() - local - set(sys.stdlib_module_names)):
        dists = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert dists, f"{module} is imported but not installed"
        if module in OPTIONAL:
            assert dists & extras[OPTIONAL[module]], f"{module} should come with the [{OPTIONAL[module]}] extra"
            assert not dists & required, f"{module} is opt-in: not a hard dependency"
        elif not dists & required:
            missing.append(f"{module} ({', '.join(sorted(dists))})")
    assert not missing, f"imported at run time but not in [project] dependencies: {missing}"
    assert "pytest" in required and "rich" in required and "sqlalchemy" in required and "markupsafe" in required


def test_torch_stays_pinned_where_it_is_installed():
    required = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    torch = next(Requirement(r) for r in required if Requirement(r).name == "torch")
    assert torch.specifier.contains("2.13.0")
    assert "torch==2.13.0" in (REPO_ROOT / "environment" / "constraints.txt").read_text().split()
    dev = (REPO_ROOT / "scripts" / "dev.sh").read_text()
    assert "pip install --quiet --disable-pip-version-check torch==2.13.0" in dev
    assert '-c environment/constraints.txt \\\n        -e ".[test,dask,service]"' in dev


def test_version_option():
    autograde = Path(sys.executable).parent / "autograde"
    for args in (["--version"], ["version"]):
        done = subprocess.run([str(autograde), *args], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.strip() == __version__, done.stderr


LINTED = ("autograder", "solutions", "tests", "benchmarks", "scripts")


def test_lint_comes_with_the_test_extra_and_runs_before_the_tests():
    _, extras = declared()
    assert {"ruff", "coverage"} <= extras["test"]
    dev = (REPO_ROOT / "scripts" / "dev.sh").read_text()
    lint = f"python -m ruff check --select F --no-cache {' '.join(LINTED)}"
    assert lint in dev and dev.index(lint) < dev.index("python -m pytest -n")
    assert "set -euo pipefail" in dev  # a finding fails the run there


def test_pyflakes_rules_find_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--no-cache", *LINTED],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
