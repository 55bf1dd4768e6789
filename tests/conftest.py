import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

# One OpenMP thread for torch in the test processes and everything they start (kernels, nbgrader, the grader's
# processes), as the grading workers have (autograder.jobs.executors.WORKER_ENV): three test workers on two cores
# with two spinning OpenMP threads each spent most of their CPU waiting for a thread the other processes had
# descheduled. Set before anything imports torch (it reads these once).
for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

from autograder import REPO_ROOT  # noqa: E402

from autograder.recording import gradebook  # noqa: E402
from autograder.assignments import assignment_ids  # noqa: E402

ASSIGNMENTS = assignment_ids()

STUDENT_IDS = ("alice", "2024012345")

# A fixed course secret for the tests: the grader then writes no .autograde-secret into the checkout.
os.environ.setdefault("AUTOGRADE_SECRET", "test-course-secret")
# One grading worker per run unless a test passes --workers (or workers=): the test workers already fill the
# machine's cores, and each extra grading worker only adds its start-up (torch, pytest, a warm sandbox parent).
os.environ.setdefault("AUTOGRADE_WORKERS", "1")


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


# --- scheduling on xdist's workers (scripts/dev.sh test: --dist loadfile --no-loadscope-reorder) --------------
# What runs where and in what order, never what a test checks. A test file stays on one worker (its fixtures are
# shared); the files start longest first (about these seconds each, measured in a whole run of the suite on the
# 2-core machine; a file not listed counts 1 s a test), so that no long file starts last while the others idle
# (xdist's own order is by number of tests, which put the heaviest single-test files last). pytest-xdist 3.8's `loadgroup` does not
# group under pytest 9 (its "@group" suffix on the node id is lost), so the unit is the file.
SECONDS = {
    "tests/test_cell_skipping.py": 415,
    "tests/test_hostile.py": 315,
    "tests/test_nbgrader_interop.py": 235,
    "tests/test_precision_named.py": 170,
    "tests/test_bounds.py": 155,
    "tests/test_self_checks_sound.py": 150,
    "tests/test_cli.py": 150,
    "tests/test_service.py": 145,
    "tests/test_readme_workflow.py": 100,
    "tests/test_scale.py": 85,
    "tests/test_class_workflow.py": 85,
    "tests/test_hostile_cli.py": 75,
    "tests/test_exchange_roundtrip.py": 75,
    "tests/test_notebooks_execute.py": 70,
    "tests/test_isolation.py": 60,
    "tests/test_student_check.py": 55,
    "tests/test_diagnosis_coverage.py": 55,
    "tests/test_release.py": 35,
    "tests/test_worker_stall.py": 30,
    "tests/test_grading.py": 30,
    "tests/test_fuzz.py": 30,
    "tests/test_assignment_record.py": 30,
    "tests/test_warm_workers.py": 20,
    "tests/test_sandbox_channels.py": 20,
    "tests/test_memory_budget.py": 20,
    "tests/test_localisation.py": 15,
    "tests/test_hub_harness.py": 15,
    "tests/test_diagnosis.py": 15,
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Files longest first; a file's tests in their own order."""
    count: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        count[module] = count.get(module, 0) + 1
    weight = {module: SECONDS.get(module, float(n)) for module, n in count.items()}
    rank = {module: i for i, module in enumerate(sorted(weight, key=lambda m: -weight[m]))}
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])  # stable within a file
