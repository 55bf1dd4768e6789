"""A small real class, as an instructor grades it: N students hand in the first K assignments with reference answers,
`autograde grade` (a fresh process: imports, workers, gradebook, reports, exports) grades them all, and `nbgrader
autograde` grades a subset of the same notebooks in a course of its own.

    python benchmarks/small_class.py [--students 50] [--assignments 6] [--workers 2 ...] [--nbgrader 60]

Prints, per worker count, the wall clock of the run and seconds per notebook; the scaling of the largest worker
count against one worker (when both are given); and nbgrader's seconds per notebook with the ratio (`--nbgrader 0`:
not run). What the fixed costs of a run weigh shows here: a class this size pays each worker's start (its warm
sandbox parent, torch, the checks' session) once for a few hundred notebooks.
"""

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.assignments import assignment_ids  # noqa: E402
from autograder.tools.bench import run_nbgrader_autograde  # noqa: E402
from autograder.tools.demo.build import build_demo_course  # noqa: E402
from autograder.tools.demo.students import DemoStudent  # noqa: E402


def grade(course: Path, out: Path, assignments: list[str], workers: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    gradebook = out.with_suffix(".db")
    gradebook.unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", *assignments, "--submissions",
                           str(course / "submitted"), "--out", str(out), "--gradebook", str(gradebook),
                           "--workers", str(workers), "--course", str(course)],
                          capture_output=True, text=True, cwd=course)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"autograde grade failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=50)
    parser.add_argument("--assignments", type=int, default=6, help="the first K assignments of the chapter")
    parser.add_argument("--workers", type=int, nargs="+", default=[2])
    parser.add_argument("--nbgrader", type=int, default=60, help="notebooks for nbgrader autograde (0: none)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per worker count (the median is printed)")
    args = parser.parse_args()
    assignments = list(assignment_ids())[: args.assignments]
    work = Path(tempfile.mkdtemp(prefix="autograde-class-"))
    try:
        students = tuple(DemoStudent(f"s{i:04d}", "测", f"试{i}", "reference answers", {a: "reference" for a in assignments})
                         for i in range(args.students))
        course = build_demo_course(work / "course", students)
        notebooks = len(course.notebooks)
        print(f"{args.students} students x {len(assignments)} assignments ({', '.join(assignments)}): "
              f"{notebooks} notebooks, reference answers")
        times = {}
        for workers in args.workers:
            runs = sorted(grade(course.root, work / f"out-{workers}", assignments, workers)
                          for _ in range(args.repeat))
            times[workers] = runs[len(runs) // 2]
            print(f"  autograde grade, {workers} worker(s): " + ", ".join(f"{s:.1f} s" for s in runs)
                  + f"; {times[workers] / notebooks * 1000:.0f} ms a notebook")
        if 1 in times and max(times) > 1:
            print(f"  scaling: {max(times)} workers are {times[1] / times[max(times)]:.2f}x one")
        if args.nbgrader:
            count, seconds = run_nbgrader_autograde(course.root, work, [(s.id, a) for a in assignments
                                                                        for s in students[: max(1, args.nbgrader
                                                                                                // len(assignments))]])
            per = seconds / count
            print(f"  nbgrader autograde: {count} of the same notebooks in {seconds:.1f} s, {per:.2f} s a notebook")
            for workers, s in times.items():
                print(f"  ratio, {workers} worker(s): autograde is {per / (s / notebooks):.1f}x nbgrader autograde")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
