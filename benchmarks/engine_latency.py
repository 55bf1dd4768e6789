"""Per-submission grading time of the engine, once the batch is warm.

Grades every reference notebook REPEAT times in one batch (checks collected once, as in a real
batch) and prints, per assignment, the median seconds per submission and where it goes.

    python benchmarks/engine_latency.py [REPEAT]
"""

import statistics
import sys
import time

from autograder.engine import GradingOptions, Submission, grade_batch
from autograder import REPO_ROOT
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

PHASES = ("read", "sandbox_start", "cells", "checks", "close")


def main(repeat: int = 4) -> None:
    subs = [Submission(REPO_ROOT / "assignments" / a / f"{a}.ipynb", a, f"bench{i}")
            for i in range(repeat) for a in ASSIGNMENTS]
    started = time.perf_counter()
    results = grade_batch(subs, GradingOptions())
    wall = time.perf_counter() - started
    warm = [r for r in results if not r.student_id.endswith("0")] or results  # the first round warms up
    print(f"{len(results)} submissions in {wall:.1f} s ({len(results) / wall:.2f} notebooks/s), tier {results[0].tier}")
    print(f"{'assignment':<14} {'median s':>8}  " + "  ".join(f"{p:>13}" for p in PHASES))
    for a in ASSIGNMENTS + ("all",):
        rs = [r for r in warm if a in ("all", r.assignment_id)]
        line = f"{a:<14} {statistics.median(r.seconds for r in rs):>8.2f}  "
        line += "  ".join(f"{statistics.median(r.timings.get(p, 0.0) for r in rs):>13.3f}" for p in PHASES)
        print(line)
    # the written parts (by hand) wait for the instructor: every other part of a reference notebook is full marks
    lost = [f"{r.student_id}/{r.assignment_id}: {p.grade_id} {p.score:g}/{p.max_score:g}" for r in results
            for p in r.parts if not p.by_hand and p.score != p.max_score]
    lost += [f"{r.student_id}/{r.assignment_id}: {r.status}" for r in results if r.status != "graded"]
    assert not lost, "a reference notebook lost points: " + "; ".join(lost)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
