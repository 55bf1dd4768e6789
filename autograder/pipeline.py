"""The grading pipeline, in order: what happens to the class and to each submission, and where each step lives.

This list is the map of `autograder/` (as nbgrader's list of preprocessors is the map of nbgrader's
autograde). The folders are the steps: `intake/` (finding and reading), `running/` (the sandbox), `checks/`
(checking and diagnosing), `recording/` and `reporting/`; `engine.py` drives one submission from "read" to
"score", `run.py` drives the class through all of them; `tools/` and `examples/` stand beside the pipeline.
`tests/test_layout.py` resolves every entry below, so the list cannot drift from the code.

    python -m autograder.pipeline        # print the steps
"""

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    name: str
    where: str  # "module:qualified.name" of the code that does it
    what: str


STEPS: tuple[Step, ...] = (
    # the class (autograder.run.run_grading)
    Step("find", "autograder.intake.discovery:discover",
         "the submissions: nbgrader's submitted/, a flat folder, a Canvas or Moodle download; whose each one is"),
    Step("skip", "autograder.recording.cache:submission_key",
         "the regrade cache: an unchanged submission under unchanged checks and settings keeps its stored result"),
    # one submission (autograder.engine.Grader.grade), in a worker process or on Dask
    Step("read", "autograder.intake.reading:prepare",
         "the notebook's bytes into the code cells to run and the written answers, nothing in it trusted"),
    Step("run", "autograder.running.notebook_run:NotebookRun.start",
         "every code cell once, in order, in a sandbox forked from a warm parent, under limits and a budget"),
    Step("check", "autograder.checks.plugin:run_pytest",
         "the assignment's checks (autograder/checks/<id>.py) probe the student's code with hidden inputs"),
    Step("diagnose", "autograder.checks.diagnosis:named",
         "a failed check names the catalogued mistake its output matches, else localises the fault"),
    Step("check bugs", "autograder.engine:Grader._check_bugs",
         "a check that raised is run on the reference notebook: a bug of ours is told apart from the student's"),
    Step("score", "autograder.engine:Grader._score", "points per check, per part; the written parts left to the instructor"),
    # back in the run, as each result arrives
    Step("hand-in", "autograder.intake.handin:assess",
         "who wrote it and when (the OS and nbgrader's exchange, not the student's word), how late, what that costs"),
    Step("record", "autograder.recording.gradebook:CourseGradebook.record",
         "nbgrader's gradebook (one transaction for many results: recording/batch.py), the autograded notebook, "
         "and last the result file (the mark of done)"),
    Step("report", "autograder.reporting.feedback:write_report",
         "the student's page (Chinese), also where nbgrader expects feedback"),
    Step("export", "autograder.run:write_exports", "results.json, grades.csv and the class summary, from every stored result"),
)


def resolve(step: Step):
    """The object a step names (ImportError / AttributeError when the map has drifted from the code)."""
    module, _, qualname = step.where.partition(":")
    target = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


if __name__ == "__main__":
    for number, step in enumerate(STEPS, 1):
        print(f"{number:>2}. {step.name:<11} {step.where:<58} {step.what}")
