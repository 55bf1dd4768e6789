"""One submission can never stop, stall or change anyone else's grading.

- A class of honest students and one attacker of each kind, graded in one `autograde grade` run with two
  workers: exit 0, every student has a result, the honest ones equal what they get alone, no attack scores
  above its control, and every export and the gradebook are written.
- A check that raises on the reference too (planted in a copy of the repository) is a bug of ours: exit 3,
  every other result written, the check listed.
- A submission that sleeps and crashes in every cell ends within its wall-clock budget.
- A worker process that dies under a submission: only the job it had started is suspected and retried alone;
  its neighbours are graded normally; an error of ours is never kept in the regrade cache.
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from autograder import REPO_ROOT

from autograder.jobs import executors
from autograder.engine import GradingOptions, grade_submission
from autograder.examples import notebook_with_edits
from autograder.run import RunOptions, run_grading
from autograder.recording.outputs import ResultStore
from autograder.running.sandbox.limits import Limits

pytestmark = pytest.mark.slow

LIMITS = Limits(cell_timeout=8.0, probe_timeout=8.0)
FAST = ["--cell-timeout", "8", "--probe-timeout", "8"]

GAMMA_LINE = "        self.gamma = nn.Parameter(torch.ones(d_model))"
MLA_FORWARD_START = "H, d_head = mla.num_heads, mla.d_head"
MLA_LATENTS_START = "    batch, seq_len, _ = x.shape\n    heads = mla.num_heads"

# student -> (assignment, edits, extra cells)
CLASS = {
    "honest-rms": ("rmsnorm", [], []),
    "honest-mla": ("mla", [], []),
    "honest-rope": ("rope", [], []),
    # the hand answer rms = 10**400: an OverflowError inside a number check used to stop the batch
    "huge-number": ("rmsnorm", [], [(-1, "rms = 10**400\noutput = [float('inf'), -10**400]")]),
    # a lone surrogate in an exception message used to fail the writing of the result
    "surrogate": ("rmsnorm", [], [(-1, "raise ValueError('bad ' + chr(0xDC80) + chr(0xD800))"),
                                  (-1, "print(chr(0xDCFF) * 5)\nNOTE = chr(0xDC80)")]),
    # gamma initialised to zeros, and a state_dict() that reports ones
    "gamma-control": ("rmsnorm", [(GAMMA_LINE, GAMMA_LINE.replace("ones", "zeros"))], []),
    "gamma-liar": ("rmsnorm", [(GAMMA_LINE, GAMMA_LINE.replace("ones", "zeros") + (
        "\n\n    def state_dict(self, *args, **kwargs):\n"
        "        return {'gamma': torch.ones_like(self.gamma).detach()}\n"))], []),
    # the bonus not done, and the bonus done by materialising K/V after clearing every forward hook
    "bonus-control": ("mla", [(MLA_FORWARD_START, "raise NotImplementedError()"),
                              (MLA_LATENTS_START, "    raise NotImplementedError()")], []),
    "bonus-hook-clearer": ("mla", [(MLA_FORWARD_START, "for _m in mla.modules():\n        _m._forward_hooks.clear()\n"
                                                       "        _m._forward_pre_hooks.clear()\n"
                                                       "    return mla(x, mask)[0]"),
                                   (MLA_LATENTS_START, "    raise NotImplementedError()")], []),
}
HONEST = ("honest-rms", "honest-mla", "honest-rope")


def write_class(root: Path, students: dict) -> Path:
    for student, (assignment, edits, cells) in students.items():
        folder = root / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(notebook_with_edits(assignment, edits, cells), folder / f"{assignment}.ipynb")
    return root


def cli(args: list[str], cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    env = dict(env or os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attack-class")
    submitted = write_class(tmp / "submitted", CLASS)
    out = tmp / "out"
    done = cli(["grade", "rmsnorm", "mla", "rope", "--submissions", str(submitted), "--out", str(out),
                "--workers", "2", *FAST])
    return done, out, submitted


def test_the_class_is_graded_in_one_run_with_exit_0(graded_class):
    done, out, _ = graded_class
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    store = ResultStore(out)
    for student, (assignment, _, _) in CLASS.items():
        stored = store.load(student, assignment)
        assert stored is not None and stored.result.status == "graded", student
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {(r["student"], r["assignment"]) for r in rows} == {(s, a) for s, (a, _, _) in CLASS.items()}
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        students = {row["student"] for row in csv.DictReader(f)}
    assert set(CLASS) <= students
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "Class summary" in summary and "bugs of the grader" not in summary
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{out / 'gradebook.db'}") as gb:
        for student, (assignment, _, _) in CLASS.items():
            assert gb.find_submission(assignment, student) is not None, student


def test_honest_students_get_what_they_get_alone(graded_class):
    _, out, submitted = graded_class
    store = ResultStore(out)
    for student in HONEST:
        assignment = CLASS[student][0]
        alone = grade_submission(submitted / student / assignment / f"{assignment}.ipynb", assignment, student,
                                 GradingOptions(limits=LIMITS))
        in_class = store.load(student, assignment).result
        assert in_class.identity() == alone.identity(), student
        assert in_class.score == in_class.max_score, student


def test_no_attack_scores_above_its_control(graded_class):
    _, out, _ = graded_class
    store = ResultStore(out)
    score = {s: store.load(s, a).result.score for s, (a, _, _) in CLASS.items()}
    assert score["huge-number"] <= score["honest-rms"] - 2  # the hand part is lost, nothing else
    assert score["surrogate"] == score["honest-rms"]
    assert score["gamma-liar"] <= score["gamma-control"] < score["honest-rms"]
    assert score["bonus-control"] == 10
    assert score["bonus-hook-clearer"] <= score["bonus-control"]
    huge = store.load("huge-number", "rmsnorm").result
    hand = next(p for p in huge.parts if p.grade_id == "rmsnorm_hand")
    assert hand.score == 0 and any("无法比较的数" in c.message for c in hand.checks), [c.message for c in hand.checks]
    surrogate = store.load("surrogate", "rmsnorm").result
    text = json.dumps(surrogate.to_dict(), ensure_ascii=False)
    text.encode("utf-8")  # what was stored is valid UTF-8
    assert any(not c.ok and c.error_type == "ValueError" for c in surrogate.cells)


# --- a check that raises on the reference too ----------------------------------------------------


def copy_of_the_repository(target: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if not name or not (REPO_ROOT / name).is_file():
            continue
        dest = target / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, dest)
    return target


def test_a_check_bug_gives_exit_3_with_every_other_result_written(tmp_path):
    repo = copy_of_the_repository(tmp_path / "repo")
    checks = repo / "autograder" / "checks" / "rmsnorm.py"
    text = checks.read_text(encoding="utf-8")
    marker = '    """rms_norm 也适用于没有 batch 维的单个向量 [d]"""\n'
    assert marker in text
    checks.write_text(text.replace(marker, marker + "    {}['planted bug']\n"), encoding="utf-8")
    students = {"right": ("rmsnorm", [], []),
                "wrong": ("rmsnorm", [("return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", "return x")], [])}
    submitted = write_class(tmp_path / "submitted", students)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(repo))
    done = cli(["grade", "rmsnorm", "--submissions", str(submitted), "--out", str(out), "--workers", "1", *FAST],
               cwd=repo, env=env)
    assert done.returncode == 3, done.stderr[-3000:] + done.stdout[-3000:]
    assert "test_function_single_vector" in done.stdout and "check bug" in done.stdout
    store = ResultStore(out)
    right, wrong = store.load("right", "rmsnorm").result, store.load("wrong", "rmsnorm").result
    for result in (right, wrong):
        bug = [c for p in result.parts for c in p.checks if c.name == "test_function_single_vector"]
        assert bug and bug[0].check_bug and not bug[0].passed and "KeyError" in (bug[0].crash or "")
        assert "评分程序本身出了问题" in bug[0].message
    assert right.score == 10 - 0.5  # only the buggy check is lost
    assert wrong.score < right.score
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "bugs of the grader" in summary and "test_function_single_vector" in summary
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))


# --- the per-submission budget --------------------------------------------------------------------

SLEEPY_CELLS = [(-1, "import time\ntime.sleep(1.8)")] * 10 + [(-1, "import os\nos._exit(3)")] * 2


def test_a_sleeping_crashing_submission_ends_within_its_budget(tmp_path):
    students = {"sleepy": ("rmsnorm", [], SLEEPY_CELLS), "control": ("rmsnorm", [], [])}
    submitted = write_class(tmp_path / "submitted", students)
    started = time.monotonic()
    summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=submitted, out=tmp_path / "out",
                                     cell_timeout=2.0, probe_timeout=2.0, submission_timeout=15.0))
    elapsed = time.monotonic() - started
    by_student = {r.student_id: r for r in summary.results}
    sleepy, control = by_student["sleepy"], by_student["control"]
    # the control (about 1 s alone) is graded in full, far inside the budget, next to the sleeper
    assert control.score == 10 and "总时间预算" not in control.message and control.seconds < 15.0, control.seconds
    assert sleepy.seconds <= 15.0 + 4.0, sleepy.seconds  # the budget, plus a grace period and the close
    assert "总时间预算" in sleepy.message
    assert sleepy.score < 10
    assert elapsed < 15.0 + 4.0 + 30.0  # the whole run: the sleeper, the control, start-up
    failed = [c for p in sleepy.parts for c in p.checks if not c.passed]
    assert failed and any("超时" in c.message for c in failed)


# --- a worker process that dies ---------------------------------------------------------------------

CRASHING_WORKER = textwrap.dedent("""
    # A grading worker that dies (os._exit) when it grades the students the test names: the real worker otherwise.
    import os, sys
    from pathlib import Path
    from autograder import engine
    from autograder.jobs import worker

    grade = engine.Grader.grade
    marker = Path(os.environ["CRASH_ONCE_MARKER"])

    def dying_grade(self, submission, assignment, run_checks):
        if submission.student_id == "crash-always":
            os._exit(9)
        if submission.student_id == "crash-once" and not marker.exists():
            marker.write_text("died once")
            os._exit(9)
        return grade(self, submission, assignment, run_checks)

    engine.Grader.grade = dying_grade
    sys.exit(worker.serve(int(sys.argv[1]), int(sys.argv[2])))
""")


def test_a_dying_worker_costs_only_the_job_it_started(tmp_path, monkeypatch):
    script = tmp_path / "crashing_worker.py"
    script.write_text(CRASHING_WORKER)
    monkeypatch.setenv("CRASH_ONCE_MARKER", str(tmp_path / "crashed-once"))
    monkeypatch.setattr(executors, "WORKER_COMMAND", [sys.executable, str(script)])
    monkeypatch.setattr(executors, "WORKER_ENV", dict(executors.WORKER_ENV,
                                                      CRASH_ONCE_MARKER=str(tmp_path / "crashed-once"),
                                                      PYTHONPATH=str(REPO_ROOT)))
    students = {name: ("rmsnorm", [], []) for name in ("a-honest", "b-honest", "crash-always", "crash-once",
                                                       "d-honest", "e-honest")}
    submitted = write_class(tmp_path / "submitted", students)
    out = tmp_path / "out"
    options = RunOptions(assignments=["rmsnorm"], submissions=submitted, out=out, workers=2, cell_timeout=8.0,
                         probe_timeout=8.0)
    summary = run_grading(options)
    by_student = {r.student_id: r for r in summary.results}
    assert set(by_student) == set(students)
    for name in ("a-honest", "b-honest", "crash-once", "d-honest", "e-honest"):
        assert by_student[name].status == "graded" and by_student[name].score == 10, name
    dead = by_student["crash-always"]
    assert dead.status == "error" and dead.infrastructure_error and "died twice" in dead.message
    store = ResultStore(out)
    assert store.load("crash-always", "rmsnorm").cache_key is None  # never "unchanged"
    assert all(store.load(n, "rmsnorm").cache_key for n in students if n != "crash-always")
    # the next run regrades only the error of ours (it dies again: still not cached)
    again = run_grading(options)
    assert again.graded_now == 1 and again.skipped == len(students) - 1
