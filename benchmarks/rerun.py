"""Running `autograde grade` again on a class it has graded, as an instructor does after each late hand-in or a
session in formgrader: every stored result is kept (nothing is graded again) and written into the gradebook again.

    python benchmarks/rerun.py [--students 40] [--repeat 3]

Builds the bench's synthetic class (every assignment; correct, wrong and broken work), grades it once, then times
`autograde grade all` run again (a fresh process each time): with nothing changed, and after the instructor's
changes in the gradebook (a due date, manual scores on some parts, some auto scores overwritten as `nbgrader
autograde` would). Prints each run's wall clock and the CPU time of the `autograde` process, and the median.
"""

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from autograder.assignments import assignment_ids, load_assignment  # noqa: E402
from autograder.tools.bench import synthetic_class  # noqa: E402
from autograder.tools.demo.build import build_demo_course  # noqa: E402


def grade(course: Path, workers: int) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds of the processes it ran, its output) of `autograde grade all` on the course."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", "all", "--submissions",
                           str(course / "submitted"), "--out", str(course / "out"), "--course", str(course),
                           "--workers", str(workers)], capture_output=True, text=True, cwd=course)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"autograde grade failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, cpu, done.stdout


def instructor_changes(course: Path, round_: int) -> None:
    """What an instructor does in formgrader and nbgrader between two runs (different values each round)."""
    from autograder.recording.gradebook import CourseGradebook

    with CourseGradebook(course / "gradebook.db") as gb:
        db = gb.gb
        db.update_or_create_assignment("rmsnorm", duedate=f"2026-11-{20 + round_:02d} 12:00:00")
        submissions = sorted((s.student.id, s.assignment.name) for a in db.assignments for s in a.submissions)
        for i, (student, assignment_id) in enumerate(submissions):
            assignment = load_assignment(assignment_id)
            if i % 7 == round_ % 7:
                part = next((p for p in assignment.parts if p.written), assignment.parts[-1])
                db.find_grade(part.grade_id, assignment.source.stem, assignment_id, student).manual_score = 0.5
            elif i % 11 == round_ % 11:
                db.find_grade(assignment.parts[0].grade_id, assignment.source.stem, assignment_id,
                              student).auto_score = 0.0
        db.db.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="for the first grading")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="autograde-rerun-"))
    try:
        course = build_demo_course(work / "course", synthetic_class(args.students, list(assignment_ids()))).root
        seconds, _, _ = grade(course, args.workers)
        results = len(list((course / "out" / "results").glob("*/*.json")))
        print(f"{results} results graded in {seconds:.1f} s ({args.students} students x {len(assignment_ids())} "
              f"assignments); each run below grades none of them again:")
        for label, change in (("nothing changed", None), ("after formgrader changes", instructor_changes)):
            runs = []
            for n in range(args.repeat):
                if change is not None:
                    change(course, n)
                wall, cpu, output = grade(course, args.workers)
                if "graded 0 submission(s)" not in output:
                    raise SystemExit(f"the run graded something again:\n{output[-2000:]}")
                runs.append((wall, cpu))
            print(f"  {label:<26} " + "  ".join(f"{w:.2f} s (cpu {c:.2f} s)" for w, c in runs)
                  + f"   median {statistics.median(w for w, _ in runs):.2f} s, "
                    f"{1000 * statistics.median(w for w, _ in runs) / results:.1f} ms a result")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
