import inspect
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from autograder import REPO_ROOT

from autograder.recording import gradebook
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

STUDENT_IDS = ("alice", "2024012345")

# A fixed course secret for the tests: the grader then writes no .autograde-secret into the checkout.
os.environ.setdefault("AUTOGRADE_SECRET", "test-course-secret")


def source_notebook(assignment_id: str) -> Path:
    return REPO_ROOT / "assignments" / assignment_id / f"{assignment_id}.ipynb"


def release_notebook(assignment_id: str) -> Path:
    return REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb"


def run_nbgrader(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """Run nbgrader from this environment, as the grader does (autograder.recording.gradebook.run_nbgrader), within 5 minutes."""
    return gradebook.run_nbgrader(args, cwd, timeout=300)


@pytest.fixture(scope="session")
def regenerated_release(tmp_path_factory) -> dict[str, Path]:
    """`nbgrader generate_assignment <id> --force` for all six, each in a fresh copy of the course directory."""

    def generate(assignment_id: str) -> Path:
        course = tmp_path_factory.mktemp(f"course-{assignment_id}")
        shutil.copy(REPO_ROOT / "nbgrader_config.py", course)
        shutil.copytree(REPO_ROOT / "assignments" / assignment_id, course / "assignments" / assignment_id)
        result = run_nbgrader(["generate_assignment", assignment_id, "--force"], cwd=course)
        out = course / "release" / assignment_id / f"{assignment_id}.ipynb"
        # nbgrader can exit 0 on failure: the written notebook is the evidence
        assert result.returncode == 0 and out.exists(), f"generate_assignment {assignment_id} failed:\n{result.stderr[-3000:]}"
        return out

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(ASSIGNMENTS, pool.map(generate, ASSIGNMENTS)))


def pytest_terminal_summary(terminalreporter):
    """Figures a test reports for the run's output (record_property("summary_line", ...)): e.g. the coverage of
    autograder/checks/ by the examples (tests/test_diagnosis_coverage.py); they reach here from xdist's workers too."""
    lines = [value for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
             for key, value in getattr(report, "user_properties", []) if key == "summary_line"]
    for line in dict.fromkeys(lines):
        terminalreporter.write_line(line)


# --- scheduling on xdist's workers (scripts/dev.sh test: --dist loadgroup --no-loadscope-reorder) -------------
# What runs where and in what order, never what a test checks. A test that shares no fixture wider than a function
# with others is a work unit of its own; tests that share a module- or session-scoped fixture of this suite go to one
# worker together (one unit per module, and per value of a parametrised wide fixture: test_hostile.py's tiers run on
# both workers at once). The units start longest first (about these seconds on a quiet 2-core machine, from
# `--durations`; a unit not listed counts 1 s a test), so that no long one starts last while the other worker idles.
SECONDS = {
    "tests/test_cell_skipping.py::test_selftest_is_at_100_percent_both_ways": 420,
    "tests/test_student_check.py::test_in_a_fresh_environment": 150,
    "tests/test_nbgrader_interop.py": 350,
    "tests/test_hostile.py": 390,
    "tests/test_cli.py": 120,
    "tests/test_cli.py::test_resume_after_kill_9": 110,
    "tests/test_cli.py::test_a_kill_9_between_a_commit": 80,
    "tests/test_exchange_roundtrip.py": 100,
    "tests/test_bounds.py::test_a_hostile_class": 75,
    "tests/test_assignment_record.py": 70,
    "tests/test_cell_skipping.py::test_the_demo_class_and_a_bench_class": 65,
    "tests/test_scale.py::test_worker_processes_and_dask": 40,
    "tests/test_scale.py::test_the_cache_skips": 35,
    "tests/test_scale.py::test_worker_processes_render": 30,
    "tests/test_diagnosis_coverage.py": 40,
    "tests/test_precision_named.py": 30,
    "tests/test_readme_workflow.py": 60,
    "tests/test_release.py": 30,
    "tests/test_bounds.py::test_one_worker": 25,
    "tests/test_class_workflow.py": 10,
    "tests/test_notebooks_execute.py": 6,
    "tests/test_self_checks_sound.py": 6,
}


def _wide_fixture_key(item) -> str | None:
    """The module (and the params of its parametrised wide fixtures) when the test uses a module-, class- or
    session-scoped fixture defined in this suite, else None (a unit of its own)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    wide = set()
    for name, defs in info.name2fixturedefs.items():
        d = defs[-1]
        source = inspect.getsourcefile(d.func) if callable(d.func) else None
        if d.scope != "function" and source and Path(source).parent == Path(__file__).parent:
            wide.add(name)
    if not wide:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    return "-".join([item.module.__name__] + [str(params[n]) for n in sorted(wide) if n in params])


def _seconds(nodeid: str, per_module: dict) -> float:
    """A test's share: its own figure (a key with "::"), else its module's figure over the module's tests."""
    tests = [k for k in SECONDS if "::" in k and nodeid.startswith(k)]
    if tests:
        return SECONDS[max(tests, key=len)]
    module = nodeid.split("::")[0]
    return SECONDS[module] / per_module[module] if module in SECONDS else 1.0


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if config.getoption("dist", "no") != "loadgroup":
        return
    per_module: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        per_module[module] = per_module.get(module, 0) + 1
    units: dict[str, list] = {}
    for item in items:
        key = _wide_fixture_key(item)
        if key is not None:
            item.add_marker(pytest.mark.xdist_group(key))
        units.setdefault(key or item.nodeid, []).append(item)
    weight = {key: sum(_seconds(i.nodeid, per_module) for i in members) for key, members in units.items()}
    order = sorted(units, key=lambda k: -weight[k])  # stable: equal units keep the collection's order
    items[:] = [item for key in order for item in units[key]]
