"""The student's notebook running in a sandbox: every code cell once, in order, then the probes.

Each cell has its own time budget and a failing cell does not stop the rest, as in nbgrader. A
cell that hangs past its budget or kills the process costs only itself: the sandbox is started
again and the cells before it are replayed, without it. The same happens when a probe kills the
process. A submission gets a bounded number of restarts, and one wall-clock budget
(`Limits.submission_timeout`) for all of it: cells, restarts, replays and probes. Once that is spent,
no cell runs and every probe fails at once (`BudgetExhausted`). The same holds once its processes together pass
the memory budget (`Limits.submission_memory_bytes`): the sandbox is killed and never started again.
"""

import time
from dataclasses import dataclass

from autograder.intake.reading import CodeCell
from autograder.intake.validate import clipped
from autograder.results import MAX_CELL_ERRORS, MAX_CELL_MESSAGE, CellRun
from autograder.running.sandbox.environment import SandboxEnvironment
from autograder.running.sandbox.process import (GraderOutOfMemory, Limits, Reply, Sandbox, SandboxError,
                                                SandboxMemoryExceeded)
from autograder.running.sandbox.zygote import Zygote

MAX_RESTARTS = 8
BUDGET_MESSAGE = "超时：这份提交用完了 {seconds:g} 秒的总时间预算，这个单元格没有运行"
MEMORY_ERROR = "MemoryLimit"  # a cell's error type once the submission passed its memory budget
MEMORY_MESSAGE = ("内存超出限制：这份提交的所有进程加起来用了超过 {budget} 的内存，已被全部终止"
                  "（是否创建了太大的张量，或开了很多子进程？）")
MEMORY_NOT_RUN = "内存超出限制：这份提交之前已经超出了 {budget} 的内存预算，这个单元格没有运行"


def budget_text(limits: Limits) -> str:
    gib = limits.submission_memory_bytes / 1024**3
    return f"{gib:g} GiB" if gib >= 1 else f"{limits.submission_memory_bytes / 1024**2:g} MiB"


class SandboxGaveUp(SandboxError):
    kind = "gave_up"


class BudgetExhausted(SandboxGaveUp):
    """The submission's whole wall-clock budget is spent."""

    kind = "budget"


@dataclass
class NotebookRun:
    environment: SandboxEnvironment
    tier: str
    limits: Limits
    student_id: str
    cells: list[CodeCell]
    zygote: Zygote | None = None  # the worker's warm parent (None: each sandbox starts its own)
    deadline: float | None = None  # time.monotonic() when the submission's budget ends (None: its full budget from now)

    def __post_init__(self):
        self.sandbox: Sandbox | None = None
        self.skipped: set[int] = set()  # cells that hung or crashed the process
        self.restarts = 0
        self.cell_runs: list[CellRun] = []  # every cell that ran (the replays need them); messages only for the
        self.failed = 0  # first MAX_CELL_ERRORS failing ones (autograder.results.bounded_cells)
        if self.deadline is None:
            self.deadline = time.monotonic() + self.limits.submission_timeout
        self.memory_exceeded = False  # its processes passed the memory budget: it ends here, nothing runs again
        # the grader ran out of its own memory restarting the sandbox (GraderOutOfMemory): the next probe starts one
        # again (the check that held the data may be over by then); when that fails too, nothing starts again (each
        # try costs threads.ThreadStartFailed's wait) and the later probes fail at once
        self.relaunch = False
        self.out_of_memory = False

    @property
    def exhausted(self) -> bool:
        return time.monotonic() >= self.deadline

    def budget(self, timeout: float) -> float:
        """`timeout`, cut to what is left of the submission's budget; BudgetExhausted when nothing is."""
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise BudgetExhausted(f"the submission's budget of {self.limits.submission_timeout:g} s is spent")
        return min(timeout, remaining)

    def start(self, on_started=None) -> list[CellRun]:
        self._launch()
        if on_started:
            on_started()
        for cell in self.cells:
            if self.memory_exceeded:
                self.cell_runs.append(CellRun(cell.index, cell.grade_id, False, MEMORY_ERROR,
                                              MEMORY_NOT_RUN.format(budget=budget_text(self.limits))))
                continue
            if self.exhausted:
                self.cell_runs.append(CellRun(cell.index, cell.grade_id, False, "Timeout", BUDGET_MESSAGE.format(
                    seconds=self.limits.submission_timeout)))
                continue
            self.cell_runs.append(self._bounded(self._run_first_time(cell)))
        return self.cell_runs

    def _bounded(self, run: CellRun) -> CellRun:
        if not run.ok:
            self.failed += 1
            run.error_message = clipped(run.error_message, MAX_CELL_MESSAGE) if self.failed <= MAX_CELL_ERRORS else ""
        return run

    def _launch(self):
        self.sandbox = Sandbox(self.environment, self.tier, self.limits, env={"JUPYTERHUB_USER": self.student_id},
                               zygote=self.zygote)
        self.sandbox.start()

    def _exec(self, cell: CodeCell) -> Reply:
        return self.sandbox.request({"op": "exec_cell", "source": cell.source, "cell": cell.index}, None,
                                    self.budget(self.limits.cell_timeout))

    def _run_first_time(self, cell: CodeCell) -> CellRun:
        started = time.monotonic()
        try:
            reply = self._exec(cell)
        except BudgetExhausted:
            self.skipped.add(cell.index)
            return CellRun(cell.index, cell.grade_id, False, "Timeout",
                           BUDGET_MESSAGE.format(seconds=self.limits.submission_timeout), time.monotonic() - started)
        except SandboxMemoryExceeded:
            self._over_memory()
            return CellRun(cell.index, cell.grade_id, False, MEMORY_ERROR,
                           MEMORY_MESSAGE.format(budget=budget_text(self.limits)), time.monotonic() - started)
        except SandboxError as exc:
            self.skipped.add(cell.index)
            # a reply the grader refused (too large, not of the protocol) is no crash: nothing exited
            kind = {"timeout": "Timeout", "protocol": "Refused"}.get(exc.kind, "Crash")
            run = CellRun(cell.index, cell.grade_id, False, kind, str(exc), time.monotonic() - started)
            try:
                self.restart()
            except SandboxMemoryExceeded:  # the replay passed the memory budget
                self._over_memory()
            except BudgetExhausted:
                self.close()  # nothing more runs: the later cells are reported as not run, the probes fail at once
            return run
        error = reply.error or {}
        return CellRun(cell.index, cell.grade_id, reply.ok, error.get("type"), error.get("message", ""), reply.seconds)

    def _over_memory(self):
        """The submission passed its memory budget: it is killed and stays so (no restart, no replay)."""
        self.memory_exceeded = True
        self.close()

    def restart(self):
        """A fresh sandbox with the cells run so far, minus those that hung or crashed."""
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        self.budget(1.0)
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise SandboxGaveUp(f"the sandbox was restarted {MAX_RESTARTS} times")
        self._launch()
        done = {run.index for run in self.cell_runs}
        for cell in self.cells:
            if cell.index in done and cell.index not in self.skipped:
                try:
                    self._exec(cell)
                except (BudgetExhausted, SandboxMemoryExceeded, GraderOutOfMemory):
                    raise
                except SandboxError:
                    # it ran before; if it fails now, it is nondeterministic: skip it too
                    self.skipped.add(cell.index)
                    return self.restart()

    def request(self, header: dict, values: dict | None, timeout: float) -> Reply:
        """A probe. If it kills or hangs the sandbox, the sandbox is restarted for the next one."""
        if self.memory_exceeded:
            raise SandboxMemoryExceeded(f"the submission passed its memory budget of {budget_text(self.limits)}")
        if self.exhausted:
            raise BudgetExhausted(f"the submission's budget of {self.limits.submission_timeout:g} s is spent")
        if self.out_of_memory:
            raise GraderOutOfMemory("the grading process ran out of memory twice starting this submission's sandbox")
        if self.sandbox is None and self.relaunch:
            self.relaunch = False
            self._restart_after(None)  # raises what stops it: GraderOutOfMemory again, the memory budget, ...
        if self.sandbox is None:
            raise SandboxGaveUp("the sandbox is not running")
        try:
            return self.sandbox.request(header, values, self.budget(timeout))
        except SandboxMemoryExceeded:
            self._over_memory()
            raise
        except SandboxError as exc:
            self._restart_after(exc)
            raise

    def _restart_after(self, failure: SandboxError | None) -> None:
        """A fresh sandbox after `failure` (None: after an earlier restart that ran out of the grader's memory).
        When that restart fails, `failure` (or, without one, why the restart failed) is raised by the caller."""
        try:
            self.restart()
        except SandboxMemoryExceeded:
            self._over_memory()
            if failure is None:
                raise
        except SandboxGaveUp:
            self.close()
            if failure is None:
                raise
        except GraderOutOfMemory:
            self.close()
            self.relaunch = failure is not None
            self.out_of_memory = failure is None
            if failure is None:
                raise

    def close(self):
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
