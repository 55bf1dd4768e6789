"""Runs the check modules with pytest: collected once per process, then run for every submission.

pytest.main is called once for a whole batch; this plugin takes over its run loop
(`pytest_runtestloop`) and, for each submission in turn, runs the collected checks of that
submission's assignment with the submission's fixtures. No pytest.main per submission.
"""

import dataclasses
import hashlib
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from autograder.checks import DIAGNOSIS_RAISED, PrecisionNamed, take_diagnosis_crashes, without_diagnosis
from autograder.checks.pytest_adapter import TestReport, runtestprotocol, teardown_all
from autograder.checks.probes import GRADER_OUT_OF_MEMORY, CheckFailed, StudentCode
from autograder.intake.validate import bounded_tree, clipped, safe_text
from autograder.running import memory_pressure

CHECKS_DIR = Path(__file__).parent


class CheckConfigError(Exception):
    """The check modules themselves are wrong (points, grade ids): the grader, not a student, is at fault."""


@dataclass
class CheckSpec:
    name: str
    grade_id: str
    points: float
    description: str


@dataclass
class CheckOutcome:
    spec: CheckSpec
    passed: bool
    message: str
    details: dict
    diagnosis: str | None
    seconds: float
    crash: str | None = None  # the check raised (not CheckFailed): what it raised, for the instructor
    # the check's diagnosis (a variant, hint or key recogniser) raised: a check bug whatever the reference does;
    # `message` is then the comparison's own failure, unchanged, and `crash` what the diagnosis raised
    diagnosis_bug: bool = False
    # a precision check that named the precision: what it reports instead where the part's other checks do not all
    # pass (precision_where_shown_right)
    unnamed: CheckFailed | None = None


CHECK_CRASHED = "这一项检查无法完成：评分程序在检查你的结果时出错（{kind}），这一项记为未通过"
CHECK_OUT_OF_MEMORY = f"这一项检查无法完成：{GRADER_OUT_OF_MEMORY}，这一项记为未通过"


@dataclass
class CheckContext:
    """What the fixtures hand to one submission's checks."""

    student: StudentCode
    assignment_id: str
    student_id: str
    seed: int


def check_module(assignment_id: str) -> Path:
    return CHECKS_DIR / f"{assignment_id}.py"


class GradingPlugin:
    def __init__(self, jobs: Iterable, grade_job: Callable, expected_points: dict[str, dict[str, float]]):
        """`grade_job(job, run_checks)` grades one job; `run_checks(context)` runs its assignment's checks."""
        self.jobs = jobs
        self.grade_job = grade_job
        self.expected_points = expected_points  # assignment -> grade_id -> points, from the source notebooks
        self.items: dict[str, list] = {}
        self.specs: dict[str, list[CheckSpec]] = {}
        self.variants: dict[str, dict] = {}
        self.context: CheckContext | None = None
        self._failure: BaseException | None = None
        self.error: BaseException | None = None

    # --- fixtures every check module can use ---------------------------------------------------------

    @pytest.fixture
    def student(self) -> StudentCode:
        return self.context.student

    @pytest.fixture
    def student_id(self) -> str:
        return self.context.student_id

    @pytest.fixture
    def rng(self, request) -> torch.Generator:
        """A generator seeded from the submission's seed and the check's name: same inputs on every regrade."""
        digest = hashlib.sha256(f"{self.context.seed}:{request.node.name}".encode()).digest()
        return torch.Generator().manual_seed(int.from_bytes(digest[:8], "big") >> 1)

    # --- collection ---------------------------------------------------------------------------------

    def pytest_configure(self, config):
        config.addinivalue_line("markers", "autograde_check(grade_id, points): a graded check of one part")

    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            assignment_id = Path(item.fspath).stem
            mark = item.get_closest_marker("autograde_check")
            if mark is None:
                raise CheckConfigError(f"{item.nodeid} has no @check(grade_id, points) mark")
            doc = (getattr(item.obj, "__doc__", None) or "").strip().splitlines()
            spec = CheckSpec(item.name, mark.kwargs["grade_id"], float(mark.kwargs["points"]), doc[0] if doc else item.name)
            self.items.setdefault(assignment_id, []).append(item)
            self.specs.setdefault(assignment_id, []).append(spec)
        for assignment_id, parts in self.expected_points.items():
            totals: dict[str, float] = {}
            for spec in self.specs.get(assignment_id, []):
                if spec.grade_id not in parts:
                    raise CheckConfigError(f"{assignment_id}: check {spec.name} scores unknown part {spec.grade_id!r}")
                totals[spec.grade_id] = totals.get(spec.grade_id, 0.0) + spec.points
            for grade_id, points in parts.items():
                if abs(totals.get(grade_id, 0.0) - points) > 1e-9:
                    raise CheckConfigError(
                        f"{assignment_id}: the checks of {grade_id} add up to {totals.get(grade_id, 0.0):g} points, "
                        f"the grade cell says {points:g}"
                    )

    def pytest_collection_finish(self, session):
        from autograder.catalogue import Variant, variants_of

        for assignment_id, items in self.items.items():
            variants = getattr(items[0].module, "VARIANTS", None)
            if not isinstance(variants, dict) or not all(isinstance(v, Variant) for v in variants.values()):
                raise CheckConfigError(f"{assignment_id}.py must declare VARIANTS, its catalogue of mistakes")
            try:  # the reports read the titles and explanations from the catalogue's own module (no torch there)
                listed = variants_of(assignment_id)
            except ModuleNotFoundError:
                listed = None
            if listed != variants:
                raise CheckConfigError(f"{assignment_id}.py's VARIANTS must be the catalogue of "
                                       f"autograder/catalogue/{assignment_id}.py (import it from there)")
            self.variants[assignment_id] = variants

    def pytest_collectreport(self, report):
        if report.failed:
            self.error = CheckConfigError(f"cannot collect {report.nodeid}: {report.longreprtext[-2000:]}")

    # --- the run loop -------------------------------------------------------------------------------

    def pytest_runtestloop(self, session):
        if self.error is not None:
            return True
        try:
            for job in self.jobs:
                self.grade_job(job, self.run_checks)
        except BaseException as exc:  # keep it for the caller: pytest would turn it into an exit code
            self.error = exc
        return True

    def run_checks(self, context: CheckContext, names: set[str] | None = None,
                   stop_at_failure: Callable[[], bool] | None = None) -> list[CheckOutcome]:
        """The checks of the context's assignment (only `names`, if given) on the context's student.

        `stop_at_failure`: for a result that is thrown away unless every check passes, the checks run without
        diagnosis, and at the first that fails the rest are left out if `stop_at_failure()` says so (the list
        is then shorter); if it says no (the result stands after all), the rest run as always."""
        self.context = context
        outcomes = []
        items = self.items.get(context.assignment_id, [])
        # between two checks of the module only the check's own node is torn down (its fixtures, all of function
        # scope, end with it); the module and package stay set up until the end of this submission's checks
        sibling = items[1] if len(items) > 1 else None
        try:
            for item, spec in zip(items, self.specs.get(context.assignment_id, [])):
                if names is None or spec.name in names:
                    nextitem = sibling if item is not sibling else items[0]
                    if stop_at_failure is None:
                        outcomes.append(self._run_item(item, spec, nextitem))
                        continue
                    with without_diagnosis():
                        outcomes.append(self._run_item(item, spec, nextitem))
                    if not outcomes[-1].passed:
                        if stop_at_failure():
                            break
                        stop_at_failure = None
        finally:
            self.context = None
            if items:
                teardown_all(items[0].session)
        parts = {}
        for spec in self.specs.get(context.assignment_id, []):
            parts.setdefault(spec.grade_id, set()).add(spec.name)
        return precision_where_shown_right(outcomes, parts)

    def _run_item(self, item, spec: CheckSpec, nextitem=None) -> CheckOutcome:
        """One check on the current context. `nextitem`: another check of the same module (its module stays set
        up) or None (everything torn down)."""
        self._failure = None
        item._initrequest()  # fresh fixtures, as for a rerun
        take_diagnosis_crashes()  # only this check's own
        started = time.perf_counter()
        try:
            reports = runtestprotocol(item, log=False, nextitem=nextitem)
            seconds = time.perf_counter() - started
            diagnosis_crashes = take_diagnosis_crashes()
            if all(r.passed for r in reports):
                return CheckOutcome(spec, True, "通过", {}, None, seconds)
            failure = self._failure
            if diagnosis_crashes:
                outcome = self._outcome(item, spec, failure, seconds)
                text = "\n".join(safe_text(t)[-2500:] for t in diagnosis_crashes[-2:])
                crash = f"{DIAGNOSIS_RAISED}\n{text}" if outcome.crash is None else \
                    f"{DIAGNOSIS_RAISED}\n{text}\nthen the check raised:\n{outcome.crash[-1500:]}"
                outcome.crash, outcome.diagnosis_bug = crash, True
                return outcome
            return self._outcome(item, spec, failure, seconds)
        finally:
            self._forget_failure()

    def _forget_failure(self) -> None:
        """The check's failure is read (its outcome holds text and bounded details): nothing keeps its exception.
        Its traceback holds every frame's locals, this submission's values among them (up to the reply cap), and
        pytest also keeps the last failure of a test in sys.last_type/last_value/last_traceback for a debugger:
        kept, they would outlive the submission and take the next one's memory (a worker grades many)."""
        self._failure = None
        for name in ("last_type", "last_value", "last_traceback", "last_exc"):
            if hasattr(sys, name):
                delattr(sys, name)

    def _outcome(self, item, spec: CheckSpec, failure: BaseException | None, seconds: float) -> CheckOutcome:
        if isinstance(failure, CheckFailed):
            catalogue = self.variants.get(Path(item.fspath).stem, {})
            if failure.diagnosis is not None and failure.diagnosis not in catalogue:
                return self._crashed(spec, seconds, CheckConfigError(
                    f"check {item.nodeid} named {failure.diagnosis!r}, which is not in VARIANTS"))
            return CheckOutcome(spec, False, clipped(failure.message, 2000), bounded_tree(failure.details),
                                failure.diagnosis, seconds,
                                unnamed=failure.unnamed if isinstance(failure, PrecisionNamed) else None)
        if isinstance(failure, AssertionError):  # a plain assert in a check: its message is for the student
            return CheckOutcome(spec, False, safe_text(failure, 300).split("\n")[0] or "未通过", {}, None, seconds)
        # anything else: the check could not finish on this submission's values (the engine asks the reference
        # whether it is the check's own bug)
        return self._crashed(spec, seconds, failure)

    @staticmethod
    def _crashed(spec: CheckSpec, seconds: float, failure: BaseException | None) -> CheckOutcome:
        kind = type(failure).__name__ if failure is not None else "unknown"
        message = CHECK_CRASHED.format(kind=kind)
        if isinstance(failure, MemoryError):  # the grading process's own limit (jobs.worker.limit_memory)
            memory_pressure.note()
            message = CHECK_OUT_OF_MEMORY
        try:
            text = "".join(traceback.format_exception(failure)) if failure is not None else "no exception recorded"
        except Exception:  # an exception whose text cannot be formatted
            text = kind
        return CheckOutcome(spec, False, message, {}, None, seconds, crash=safe_text(text)[-3000:])

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item, call):
        """A plain report, without the failure's formatted traceback: pytest's costs ~30 ms a failed check,
        and the grader reads the exception itself (kept here)."""
        outcome, longrepr = "passed", None
        if call.excinfo is not None:
            if call.when in ("setup", "call") and self._failure is None:
                self._failure = call.excinfo.value
            if isinstance(call.excinfo.value, pytest.skip.Exception):
                outcome, longrepr = "skipped", (str(item.path), item.location[1] or 0, str(call.excinfo.value))
            else:
                outcome, longrepr = "failed", f"{call.excinfo.typename}: {str(call.excinfo.value)[:500]}"
        return TestReport(item.nodeid, item.location, {}, outcome, longrepr, call.when, [], call.duration,
                          call.start, call.stop)


def precision_where_shown_right(outcomes: list[CheckOutcome], parts: dict[str, set[str]]) -> list[CheckOutcome]:
    """The outcomes, where a precision check names the precision only if every other check of its part (`parts`:
    grade id -> the names of its checks) ran and passed: the algorithm is then shown right (the part's checks
    separate every plausible slip from the reference by far more than float32 rounding). Where one of them failed,
    crashed or did not run, the precision check reports its plain mismatch, naming nothing."""
    passed = {o.spec.name for o in outcomes if o.passed}
    out = []
    for o in outcomes:
        others = parts.get(o.spec.grade_id, set()) - {o.spec.name}
        if o.unnamed is not None and not others <= passed:
            o = dataclasses.replace(o, message=clipped(o.unnamed.message, 2000),
                                    details=bounded_tree(o.unnamed.details), diagnosis=None, unnamed=None)
        out.append(o)
    return out


def run_pytest(plugin: GradingPlugin, assignment_ids: list[str]) -> None:
    """Collect the check modules of `assignment_ids` and hand the run loop to `plugin`."""
    paths = [str(check_module(a)) for a in assignment_ids]
    args = [
        *paths, "-s", "-p", "no:terminal", "-p", "no:cacheprovider", "-p", "no:logging",
        "--rootdir", str(CHECKS_DIR), "-c", os.devnull, "-o", "addopts=",
        "-W", "ignore::pytest.PytestAssertRewriteWarning",
    ]
    # the checks need no installed pytest plugin (anyio's alone costs ~0.7 s to load): none is loaded
    autoload = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        code = pytest.main(args, plugins=[plugin])
    finally:
        if autoload is None:
            del os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"]
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = autoload
    if plugin.error is not None:
        raise plugin.error
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED, pytest.ExitCode.TESTS_FAILED):
        raise CheckConfigError(f"pytest could not run the checks (exit code {int(code)})")
