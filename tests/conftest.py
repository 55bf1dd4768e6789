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
