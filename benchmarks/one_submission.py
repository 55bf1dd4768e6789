"""One submission, as an instructor grades it: `autograde grade <id>` from start to report, a new gradebook each time.

    python benchmarks/one_submission.py [REPEAT] [ASSIGNMENT]     # default: 5 runs of rmsnorm

Prints each run's wall clock (a fresh process: imports, the warm sandbox parent's start, the gradebook's creation,
grading, the report and the exports) and the median; the same for the submission graded again into the gradebook a
first run made (a course's later runs: the roster read, the gradebook opened, not made); and how long the imports
alone take in a fresh process.
"""

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def one_run(work: Path, assignment: str, n: int | None) -> float:
    """`n`: a new OUT and gradebook; None: the same ones again, the submission graded again (--force), as a course's
    next run finds its gradebook."""
    out, gradebook = (work / f"out{n}", work / f"gradebook{n}.db") if n is not None else (work / "out",
                                                                                          work / "gradebook.db")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", assignment, "--submissions",
                           str(work / "submitted"), "--out", str(out), "--gradebook", str(gradebook),
                           *(["--force"] if n is None else [])],
                          capture_output=True, text=True, cwd=REPO)
    seconds = time.perf_counter() - started
    if done.returncode != 0 or not (out / "reports").is_dir():
        raise SystemExit(f"autograde grade failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return seconds


def imports_alone() -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import autograder.run, autograder.engine, autograder.recording.gradebook, "
                    "autograder.reporting.student_page, autograder.reporting.class_summary"], check=True, cwd=REPO)
    return time.perf_counter() - started


def main(repeat: int = 5, assignment: str = "rmsnorm") -> None:
    work = Path(tempfile.mkdtemp(prefix="autograde-one-"))
    try:
        folder = work / "submitted" / "alice" / assignment
        folder.mkdir(parents=True)
        shutil.copy(REPO / "assignments" / assignment / f"{assignment}.ipynb", folder)
        runs = [one_run(work, assignment, n) for n in range(repeat)]
        print(f"one {assignment} submission, `autograde grade` start to report, a new gradebook each run:")
        print("  runs    " + "  ".join(f"{s:.2f} s" for s in runs))
        print(f"  median  {statistics.median(runs):.2f} s")
        one_run(work, assignment, None)  # the course's gradebook, made
        again = [one_run(work, assignment, None) for _ in range(repeat)]
        print("the same submission graded again (--force) into the gradebook made by a first run:")
        print("  runs    " + "  ".join(f"{s:.2f} s" for s in again))
        print(f"  median  {statistics.median(again):.2f} s")
        print(f"  imports alone in a fresh process: {statistics.median(imports_alone() for _ in range(3)):.2f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5, sys.argv[2] if len(sys.argv) > 2 else "rmsnorm")
