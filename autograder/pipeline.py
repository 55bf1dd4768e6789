"""The grading pipeline, in order: the stages of a class run (the code that runs them), and one submission's way.

`CLASS_STAGES` is what `autograde grade` runs (autograder.run.run_stages), in this order, over one state
(autograder.class_run.ClassRun), as nbgrader's autograde runs its list of preprocessors. `SUBMISSION_STEPS` is
one submission's way through the engine (autograder.engine.Grader.grade), in a worker process or on Dask, and
`RESULT_STEPS` what happens to each result as it arrives, in the run. The folders are the steps: `intake/`
(finding and reading), `running/` (the sandbox and the workers), `checks/` (checking and diagnosing),
`recording/` and `reporting/`; `tools/` and `examples/` stand beside the pipeline.

    python -m autograder.pipeline        # print what runs
"""

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    name: str
    where: str  # "module:qualified.name" of the code that does it
    what: str

    def function(self):
        """The code this step names (ImportError / AttributeError when the list has drifted from the code)."""
        return resolve(self)


CLASS_STAGES: tuple[Step, ...] = (
    Step("find", "autograder.class_run:find",
         "the submissions: nbgrader's submitted/, a flat folder, a Canvas or Moodle download; whose each one is"),
    Step("settings", "autograder.class_run:settings",
         "limits, late policy, convention credit (given, else OUT's), the memory guard and the sandbox tier"),
    Step("decide", "autograder.class_run:decide",
         "the regrade cache: an unchanged submission under unchanged checks and settings keeps its stored result"),
    Step("start workers", "autograder.class_run:start_workers",
         "the workers (or this process's warm sandbox parent) start now and warm up while the facts are read"),
    Step("open gradebook", "autograder.class_run:open_gradebook",
         "nbgrader's gradebook, written in transactions of many results (recording/batch.py); the progress bar"),
    Step("facts", "autograder.class_run:read_facts",
         "what finishing each result needs, read once for the class: manual grades, due dates, extensions, and "
         "the hand-in (who wrote it and when, by the OS and nbgrader's exchange, not the student's word)"),
    Step("grade", "autograder.class_run:grade",
         "every submission decided on, in the workers; each result finished, recorded and reported as it arrives "
         "(RESULT_STEPS)"),
    Step("keep", "autograder.class_run:keep",
         "the stored results: finished again where their facts changed, ours restored where something overwrote "
         "them, all into the gradebook again (idempotent)"),
    Step("close gradebook", "autograder.class_run:close_gradebook", "the last transaction committed"),
    Step("export", "autograder.class_run:export",
         "OUT/class.json, results.json, grades.csv and the class summary, from every stored result"),
)

SUBMISSION_STEPS: tuple[Step, ...] = (
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
)

RESULT_STEPS: tuple[Step, ...] = (
    Step("finish", "autograder.recording.rendered:finish",
         "sanitised, the instructor's grades, the hand-in with its penalty; the report and result file rendered "
         "(where it was graded, else in the run: the same function, the same facts)"),
    Step("record", "autograder.class_run:into_gradebook",
         "nbgrader's gradebook, in the open transaction (recording/batch.py)"),
    Step("report", "autograder.class_run:write_files",
         "after the commit: the student's page (Chinese), nbgrader's feedback and autograded notebook, and last "
         "the result file (the mark of done)"),
)

STEPS: tuple[Step, ...] = CLASS_STAGES + SUBMISSION_STEPS + RESULT_STEPS


def resolve(step: Step):
    """The object a step names (ImportError / AttributeError when the map has drifted from the code)."""
    module, _, qualname = step.where.partition(":")
    target = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


if __name__ == "__main__":
    for title, steps in (("the class run (autograde grade)", CLASS_STAGES),
                         ("one submission (autograder.engine, in a worker)", SUBMISSION_STEPS),
                         ("each result, as it arrives (in the run)", RESULT_STEPS)):
        print(title)
        for number, step in enumerate(steps, 1):
            print(f"  {number:>2}. {step.name:<15} {step.where:<48} {step.what}")
