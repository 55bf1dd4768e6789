"""Grade submissions: read, run in the sandbox, check against the references, score per part.

    from autograder.engine import grade_submission
    result = grade_submission("submitted/alice/rmsnorm/rmsnorm.ipynb", "rmsnorm", "alice")
    result.score, result.max_score, [(p.grade_id, p.score) for p in result.parts]

A batch (`grade_batch`) collects the checks once and grades the submissions one after another;
one submission's failure, whatever it is, becomes that submission's status, never the batch's.
"""

import hashlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from autograder import __version__
from autograder.assignments import Assignment, has_hand, load_assignment
from autograder.checks.plugin import CheckContext, CheckOutcome, GradingPlugin, run_pytest
from autograder.course import course_secret, student_seed
from autograder.catalogue import variants_of
from autograder.running.notebook_run import NotebookRun, SandboxGaveUp, budget_text
from autograder.checks.probes import CheckFailed, StudentCode
from autograder.intake.reading import UnreadableNotebook, load_notebook_bytes, prepare
from autograder.results import (STATUS_ERROR, STATUS_GRADED, CellRun, CheckResult, PartResult,
                                          SubmissionResult, bound_size, bounded_cells)
from autograder.running import memory_pressure
from autograder.running.sandbox import environment, tiers
from autograder.running.jobs import GradingOptions, Submission  # noqa: F401 (the engine's API)
from autograder.running.sandbox.process import SandboxError
from autograder.running.sandbox.zygote import Zygote, ZygoteError
from autograder.intake.validate import CUT, clipped, safe_text, sanitize_record
from solutions.student_params import student_answers


BUDGET_SPENT = ("超时：这份提交用完了 {seconds:g} 秒的总时间预算（所有单元格、重启和检查一起计时）；"
                "之后的单元格没有运行，剩下的检查记为超时")
MEMORY_SPENT = "内存超出限制：这份提交的所有进程加起来用了超过 {budget} 的内存，已被终止；之后的单元格没有运行，剩下的检查记为未通过"
CHECK_BUG_MESSAGE = "这一项检查无法完成：评分程序本身出了问题（不是你的代码的问题），老师会处理，这一项暂记为未通过"


def grade_submission(notebook: str | Path, assignment_id: str, student_id: str,
                     options: GradingOptions = GradingOptions()) -> SubmissionResult:
    return grade_batch([Submission(Path(notebook), assignment_id, student_id)], options)[0]


def grade_batch(submissions: Iterable[Submission], options: GradingOptions = GradingOptions(),
                on_result: Callable[[SubmissionResult], None] | None = None,
                assignment_ids: Iterable[str] | None = None, grader: "Grader | None" = None) -> list[SubmissionResult]:
    """Grade `submissions` one after another with one pytest session (and one warm sandbox parent).

    `submissions` may be a lazy iterable (a worker's job queue); then name the `assignment_ids` it can hold.
    A `grader` passed in is kept open for the next batch (a worker process's); otherwise one is made and closed.
    """
    if assignment_ids is None:
        submissions = list(submissions)
        assignment_ids = {s.assignment_id for s in submissions}
    assignment_ids = sorted(set(assignment_ids))
    assignments = {a: load_assignment(a, options.root) for a in assignment_ids}
    own = grader is None
    grader = grader or Grader(options)
    results: list[SubmissionResult] = []

    def grade_job(submission: Submission, run_checks):
        result = grader.grade(submission, assignments[submission.assignment_id], run_checks)
        results.append(result)
        if on_result:
            on_result(result)

    expected = {a: {p.grade_id: p.points for p in spec.parts if not p.written} for a, spec in assignments.items()}
    try:
        run_pytest(GradingPlugin(submissions, grade_job, expected), assignment_ids)
    finally:
        if own:
            grader.close()
    return results


MAX_TYPED_ITEMS = 32  # a typed answer is a number, a letter or a few numbers: a longer list is no answer
TYPED_PREFIX = 8  # ... of which the first numbers are kept, then the cut is said
MAX_TYPED_CHARS = 200


def typed_answers(student: StudentCode, assignment_id: str) -> dict:
    """The values a student typed for the hand computations (numbers, lists of numbers, letters), else None.

    Bounded: a text is cut at MAX_TYPED_CHARS, a list longer than MAX_TYPED_ITEMS (no hand answer is: it is simply
    wrong, and the hand checks fail it) is kept as its first TYPED_PREFIX numbers and a last entry saying the cut
    and the length (…（已截断）), so a 4-million-number answer is neither stored nor rendered whole."""
    if not has_hand(assignment_id):
        return {}
    answers = {}
    for name in student_answers(assignment_id, student.student_id):
        try:
            value = student.variable(name)
        except CheckFailed:
            value = None
        answers[name] = typed_value(value)
    return answers


def typed_value(value):
    """One typed answer as it is stored (see typed_answers)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        return clipped(value, MAX_TYPED_CHARS)  # a letter or a word; never a megabyte of text in every export
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value[:MAX_TYPED_ITEMS + 1]):
        if len(value) <= MAX_TYPED_ITEMS:
            return list(value)
        return list(value[:TYPED_PREFIX]) + [f"{CUT}共 {len(value)} 个数"]
    return None


# how the result of a submission whose grading raised in our own code begins (autograder.service.grading gives such a
# practice attempt back)
GRADER_ERROR = "这份提交无法评分：评分程序出错"


def failed_result(submission: Submission, assignment: Assignment, tier: str, seed: int,
                  message: str) -> SubmissionResult:
    """A submission that could not be graded (unreadable, or its grading worker died): status error, 0 points,
    every part unanswered with `message`."""
    return SubmissionResult(
        student_id=submission.student_id, assignment_id=assignment.id, status=STATUS_ERROR, score=0.0,
        max_score=assignment.max_score, tier=tier, seed=seed, grader_version=__version__,
        notebook=str(submission.notebook), message=message,
        parts=[PartResult(p.grade_id, 0.0, p.points, [], answered=False, message=message) for p in assignment.parts],
    )


class ReadingExhaustedMemory(MemoryError):
    """The grading process's memory limit was reached while reading the notebook's file (Grader.grade says so)."""


class Grader:
    """Grades one submission at a time; holds what is shared by the batch."""

    def __init__(self, options: GradingOptions, zygote: Zygote | None = None):
        self.options = options
        # the checks' own torch work (the references, the comparisons) on one thread, as in a worker process
        # (jobs.executors.WORKER_ENV), wherever the grading runs (`autograde selftest`, a test, a caller's
        # process): the same figures everywhere, and no idle OpenMP thread spinning for a core the sandboxes need
        # (on a busy machine that spinning cost 4x the grader's own CPU and doubled the time of a batch)
        torch.set_num_threads(1)
        self.secret = options.secret or course_secret(options.root)
        self.environment = environment.locate()
        self.tier = tiers.choose(options.tier, options.allow_weak_sandbox)
        # launched now (or earlier, by the caller: `zygote`), warm by the first submission: it imports torch
        # while the checks are collected
        if zygote is not None and (zygote.tier != self.tier or zygote.environment != self.environment):
            zygote.close()
            zygote = None
        self.zygote: Zygote | None = zygote or Zygote(self.environment, self.tier,
                                                      options.limits.startup_timeout).launch()
        self._reference_verdicts: dict[tuple[str, int, str], bool] = {}  # (assignment, seed, check): a check bug?

    def warm_parent(self) -> Zygote:
        if self.zygote is None:
            self.zygote = Zygote(self.environment, self.tier, self.options.limits.startup_timeout).launch()
        return self.zygote.wait_ready()

    def close(self) -> None:
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    def grade(self, submission: Submission, assignment: Assignment, run_checks) -> SubmissionResult:
        """One submission's result, whatever happens while grading it: a failure is its own outcome (status
        error with the reason), never an exception out of the batch."""
        started = time.monotonic()
        try:
            result = self._grade(submission, assignment, run_checks)
        except (ZygoteError, tiers.SandboxUnavailable, environment.SandboxEnvironmentError):
            raise  # the sandbox itself cannot run here: the run's failure, not this submission's
        except Exception as exc:  # a bug of ours, or data we did not foresee: this submission's error
            seed = student_seed(submission.secret or self.secret, assignment.id, submission.student_id)
            if isinstance(exc, MemoryError):  # the grading process's own memory limit (jobs.worker.limit_memory)
                memory_pressure.note()
                message = ("读取这个笔记本文件时，评分进程的内存超出了限制：请清除输出（Kernel → Restart & Clear Output）"
                           "后保存再提交；若仍如此，请联系老师 (grader error: MemoryError while reading the notebook)"
                           if isinstance(exc, ReadingExhaustedMemory) else  # its file parsed into more than that
                           "这份提交无法评分：评它时评分进程的内存超出了限制（你的代码返回的数据太大？），请联系老师 "
                           "(grader error: MemoryError: the grading process's memory limit was reached)")
            else:
                message = (f"{GRADER_ERROR}（{type(exc).__name__}），请联系老师 "
                           f"(grader error: {type(exc).__name__}: {safe_text(exc, 300)})")
            result = failed_result(submission, assignment, self.tier, seed, message)
            result.seconds = time.monotonic() - started
        return bound_size(sanitize_record(result))

    def _grade(self, submission: Submission, assignment: Assignment, run_checks) -> SubmissionResult:
        """Read (within the submission's budget, which starts here), run, check, score. A result graded with the
        unchanged demo cells skipped is kept only when every cell that ran succeeded and every check passed;
        otherwise the submission is graded again with every cell, within what is left of the same budget, and that
        result stands: a skipped cell costs time, never points (and what no layer sees: autograder.intake.skipping)."""
        started = time.monotonic()
        deadline = started + self.options.limits.submission_timeout
        seed = student_seed(submission.secret or self.secret, assignment.id, submission.student_id)
        graded = ""  # the digest of the bytes graded, which the result keeps ("": none could be read)
        try:
            data = load_notebook_bytes(Path(submission.notebook))
            graded = hashlib.sha256(data).hexdigest()
            prepared = prepare(submission.notebook, assignment, self.options.run_all_cells, data=data)
        except UnreadableNotebook as exc:
            result = failed_result(submission, assignment, self.tier, seed, exc.message)
            result.seconds = time.monotonic() - started
            result.graded_sha256 = graded
            return result
        except MemoryError:  # its parse (millions of tiny values fit in 64 MiB): said as such, and never cached
            raise ReadingExhaustedMemory() from None
        del data  # parsed: the grading needs `prepared` only (up to 64 MiB less held while the sandbox runs)
        timings = {"read": round(time.monotonic() - started, 4)}
        result, clean = self._attempt(submission, assignment, run_checks, prepared, prepared.cells, prepared.skipped,
                                      seed, deadline, timings)
        if clean == "stopped":
            timings["skipped_attempt"] = round(sum(v for k, v in timings.items() if k != "read"), 4)
            for key in [k for k in timings if k not in ("read", "skipped_attempt")]:
                timings["skipped_" + key] = timings.pop(key)
            result, _ = self._attempt(submission, assignment, run_checks, prepared, prepared.all_cells, [],
                                      seed, deadline, timings)
        result.seconds = time.monotonic() - started
        result.graded_sha256 = graded
        return result

    def _attempt(self, submission: Submission, assignment: Assignment, run_checks, prepared, cells: list,
                 skipped: list[int], seed: int, deadline: float, timings: dict) -> tuple[SubmissionResult, str]:
        """One run of `cells` and the checks: the result, and "clean" (every cell that ran succeeded, every check
        passed), "not clean", or "spent" (the submission's time or memory budget ran out).

        With `skipped` cells the result stands only if clean: at the first failing cell or check (its budget not
        spent) the attempt stops, undiagnosed and incomplete: "stopped", to be graded again with every cell."""
        result = SubmissionResult(
            student_id=submission.student_id, assignment_id=assignment.id, status=STATUS_GRADED, score=0.0,
            max_score=assignment.max_score, tier=self.tier, seed=seed, grader_version=__version__,
            notebook=str(submission.notebook), timings=timings,
        )
        clock = time.monotonic()

        def lap(name):
            nonlocal clock
            now = time.monotonic()
            result.timings[name] = round(result.timings.get(name, 0.0) + now - clock, 4)
            clock = now

        run = NotebookRun(self.environment, self.tier, self.options.limits, submission.student_id, cells,
                          self.warm_parent(), deadline=deadline)  # a warm parent that cannot start is ours to fix
        stopped = []

        def stop_here() -> bool:
            """Stop this attempt, not clean, unless its budget is spent (then graded again it would only spend it
            again: this result stands, and is completed)."""
            if run.exhausted or run.memory_exceeded:
                return False
            stopped.append(True)
            return True

        try:
            try:
                result.cells = run.start(on_started=lambda: lap("sandbox_start"))
            except (SandboxGaveUp, SandboxError) as exc:
                result.cells = run.cell_runs + [CellRun(c.index, c.grade_id, False, "NotRun", str(exc))
                                                for c in cells[len(run.cell_runs):]]
            result.cells, result.cell_errors_omitted = bounded_cells(result.cells)
            lap("cells")
            if skipped and not all(c.ok for c in result.cells) and stop_here():
                return result, "stopped"
            student = StudentCode(run, submission.student_id, assignment.id, seed, self.options.limits.probe_timeout)
            outcomes = run_checks(CheckContext(student, assignment.id, submission.student_id, seed),
                                  stop_at_failure=stop_here if skipped else None)
            lap("checks")
            if stopped:
                return result, "stopped"
            result.hand_answers = typed_answers(student, assignment.id)
            exhausted = run.exhausted
            if exhausted:
                result.message = BUDGET_SPENT.format(seconds=self.options.limits.submission_timeout)
            if run.memory_exceeded:  # issue 21: the submission's processes together passed its memory budget
                result.message = MEMORY_SPENT.format(budget=budget_text(self.options.limits))
        finally:
            run.close()
            lap("close")
        # a diagnosis that raised is a check bug whatever the reference does; any other crash asks the reference
        crashed = {o.spec.name for o in outcomes if o.crash is not None and not o.diagnosis_bug}
        bugs = self._check_bugs(assignment, submission.student_id, seed, crashed, run_checks) if crashed else set()
        bugs |= {o.spec.name for o in outcomes if o.diagnosis_bug}
        lap("check_bugs")
        result.parts = self._score(assignment, outcomes, prepared, bugs)
        result.written_answers = dict(prepared.written_answers)
        result.skipped_cells = list(skipped)
        result.score = sum(p.score for p in result.parts)
        if exhausted or run.memory_exceeded:
            return result, "spent"  # its time or memory budget is spent: graded again it would only spend it again
        clean = all(c.ok for c in result.cells) and all(o.passed for o in outcomes)
        return result, "clean" if clean else "not clean"

    def _check_bugs(self, assignment: Assignment, student_id: str, seed: int, names: set[str],
                    run_checks) -> set[str]:
        """Which of the checks that raised on this submission raise on the reference's output for the same inputs
        too (the source notebook, run as this student): those are bugs of the check. Cached for the batch."""
        todo = {n for n in names if (assignment.id, seed, n) not in self._reference_verdicts}
        if todo:
            try:
                prepared = prepare(assignment.source, assignment, self.options.run_all_cells)
                run = NotebookRun(self.environment, self.tier, self.options.limits, student_id, prepared.cells,
                                  self.warm_parent())
                try:
                    run.start()
                    reference = StudentCode(run, student_id, assignment.id, seed, self.options.limits.probe_timeout)
                    outcomes = run_checks(CheckContext(reference, assignment.id, student_id, seed), todo)
                finally:
                    run.close()
                crashed_there = {o.spec.name for o in outcomes if o.crash is not None}
            except Exception:  # the reference cannot even be run: count every such check as ours to fix
                crashed_there = set(todo)
            for name in todo:
                self._reference_verdicts[(assignment.id, seed, name)] = name in crashed_there
        return {n for n in names if self._reference_verdicts[(assignment.id, seed, n)]}

    def _points(self, assignment: Assignment, outcome: CheckOutcome) -> float:
        """A passed check's points; a failure explained by a convention keeps the instructor's share of them."""
        if outcome.passed:
            return outcome.spec.points
        variant = variants_of(assignment.id).get(outcome.diagnosis) if outcome.diagnosis else None
        if variant is not None and variant.convention:
            return round(outcome.spec.points * self.options.convention_credit, 6)
        return 0.0

    def _score(self, assignment: Assignment, outcomes: list[CheckOutcome], prepared,
               bugs: set[str] = frozenset()) -> list[PartResult]:
        parts = []
        for part in assignment.parts:
            if part.written:
                answer = prepared.written_answers.get(part.grade_id, "")
                parts.append(PartResult(part.grade_id, 0.0, part.points, [], answered=bool(answer.strip()),
                                        message="书面回答，由老师批改", by_hand=True))
                continue
            checks = [
                CheckResult(name=o.spec.name, grade_id=part.grade_id, passed=o.passed,
                            points=self._points(assignment, o), max_points=o.spec.points,
                            description=o.spec.description,
                            # a diagnosis bug keeps the comparison's own failure message
                            message=CHECK_BUG_MESSAGE if o.spec.name in bugs and not o.diagnosis_bug else o.message,
                            details=o.details,
                            diagnosis=o.diagnosis, seconds=o.seconds, crash=o.crash, check_bug=o.spec.name in bugs)
                for o in outcomes if o.spec.grade_id == part.grade_id
            ]
            found = any(cell_id in prepared.answer_cells_found for cell_id in part.answer_cells)
            message = "" if found else "未找到该题的答案单元格（可能被删除了）；评分时仍按函数名查找你的代码"
            parts.append(PartResult(part.grade_id, sum(c.points for c in checks), part.points, checks,
                                    answered=found, message=message))
        return parts
