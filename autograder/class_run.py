"""The class run as its stages, over one state (`ClassRun`): find -> settings -> decide what to grade (the cache)
-> start the workers -> open the gradebook -> read the course's facts (manual grades, extensions, hand-in) -> grade,
each result finished, recorded and reported as it arrives -> keep (the stored results) -> close the gradebook ->
export. autograder.pipeline lists them in this order and `autograde grade` (autograder.run.run_grading) runs that
list, as nbgrader runs its preprocessors; `python -m autograder.pipeline` prints it.

What finishing a result needs from the gradebook and its folder (manual grades, the hand-in) is read once, before
it is graded (`facts_of`), and sent with it: the worker finishes the result (autograder.recording.rendered.finish)
and renders its report and result file, and this process writes them; a result that comes back without them is
finished here by the same `finish`, from the same facts. Each graded submission is recorded in this order: the
gradebook (in one transaction with the results that arrived about when it did: autograder.recording.batch), then,
once that transaction has committed, its report (and nbgrader feedback), and last its result file, which marks it
done, with its cache key (autograder.recording.cache). A run killed at any point and started again grades exactly
what has no result file under the same key yet, and rewrites the other stored results into the gradebook
(idempotent), so results and gradebook end up as an uninterrupted run would leave them.
"""

import contextlib
import dataclasses
import functools
import hashlib
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.assignments import assignment_of_notebook, load_assignment, source_cells
from autograder.course import course_secret
from autograder.intake import lms
from autograder.intake.discovery import Discovery, DiscoveryError, FoundSubmission, Skipped, discover
from autograder.intake.handin import (HandInError, HandInOptions, HandInSettings, facts as handin_facts,
                                      load_settings, submission_timeout)
from autograder.intake.late import LatePolicy, LatePolicyError
from autograder.intake.validate import safe_text, student_id_from_name
from autograder.progress import Progress
from autograder.recording import run_settings
from autograder.recording.autograded import autograded_missing, write_autograded
from autograder.recording.batch import BatchRecorder, Pending
from autograder.recording.cache import grading_key, submission_key
from autograder.recording.class_record import ClassRecord, ClassState, roster_of, student_entry
from autograder.recording.outputs import (ResultStore, atomic_write, nbgrader_folder_name,
                                          write_grades_csv, write_results_json)
from autograder.recording.rendered import RecordingFacts, Rendered, checked, final_handin, finish, warm_up_exports
from autograder.results import (FLAG_ID, FLAG_IDENTITY, FLAG_UNANSWERED, FLAG_UNMAPPED,
                                          FLAG_WRONG_ASSIGNMENT, Flag, HandIn, SubmissionResult)
from autograder.recording.feedback import write_feedback, write_report
from autograder.run_summary import RunSummary
from autograder.jobs.executors import (WORKER_MEMORY_BYTES, Executor, ExecutorError, in_process, prestart,
                                          run_submissions)
from autograder.running.jobs import GradingOptions, Submission
from autograder.running.sandbox import environment, memory, tiers
from autograder.running.sandbox.environment import SandboxEnvironmentError
from autograder.running.sandbox.limits import Limits
from autograder.running.sandbox.tiers import SandboxUnavailable
from autograder.running.sandbox.zygote import Zygote

# The engine (torch, pytest) is imported only where grading happens in this process (tests, the Python API); the
# gradebook (nbgrader's API) where it is opened, after the workers have started.
if TYPE_CHECKING:
    from autograder.engine import Grader
    from autograder.recording.gradebook import CourseGradebook


class GradingRunError(Exception):
    """The run could not start: a message naming the file and what to do, and the exit code."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class GradingInterrupted(GradingRunError):
    """Ctrl-C during a run: what was graded is kept; the message says how much, and how to go on."""

    def __init__(self, out: Path, graded_now: int | None = None):
        super().__init__(interrupted_message(out, graded_now), exit_code=130)


def interrupted_message(out: Path, graded_now: int | None = None) -> str:
    """One line: the results kept in OUT (`graded_now` of them by the interrupted run), and how to grade the rest."""
    stored = len(list((Path(out) / "results").glob("*/*.json")))
    now = f"{graded_now} graded by this run, " if graded_now is not None else ""
    return (f"interrupted: {now}{stored} result(s) kept in {Path(out) / 'results'}; run the same command again "
            "(with or without --resume) to grade the rest: what is kept is not graded again")


@dataclass
class RunOptions:
    assignments: list[str]
    submissions: Path
    out: Path
    students: set[str] = field(default_factory=set)
    resume: bool = False  # kept for scripts: unchanged submissions are never regraded anyway (see `force`)
    force: bool = False  # regrade even what the cache says is unchanged
    workers: int = 1  # local worker processes
    in_process: bool = False  # tests and the Python API only: one worker's grading done in this process instead
    worker_memory_bytes: int | None = WORKER_MEMORY_BYTES  # each local worker's memory limit (RLIMIT_DATA)
    executor: str = "local"  # or "dask"
    scheduler: str | None = None  # dask: an existing cluster's scheduler address
    gradebook: Path | None = None
    tier: str | None = None
    allow_weak_sandbox: bool = False
    # None: not given (the run reuses OUT/settings.json's, else the default: 30 s, 30 s, 300 s, 4 GiB, 0)
    cell_timeout: float | None = None
    probe_timeout: float | None = None
    submission_timeout: float | None = None  # None: c.Autograde.submission_timeout, else as the two above
    memory_budget: int | None = None  # bytes, for all of a submission's processes together
    memory_guard: str = "auto"  # auto, cgroup or watchdog (autograder.running.sandbox.memory)
    convention_credit: float | None = None
    run_all_cells: bool = False  # run the instructor's unchanged demo cells too, as nbgrader does
    handin: HandInOptions = field(default_factory=HandInOptions)  # late policy and exchange checks (CLI overrides)
    layout: str = "auto"  # nbgrader, flat, canvas, moodle (autograder.intake.discovery), or recognised
    lms_roster: Path | None = None  # the LMS's roster export (Canvas gradebook CSV, Moodle grading worksheet)
    dry_run: bool = False  # find and print what would be graded; grade nothing, write nothing but unpacked zips
    accept_new_settings: bool = False  # settings differing from OUT/settings.json replace them instead of stopping
    # the course whose nbgrader_config.py holds the settings (late policy, limits, display zone) when the submissions
    # are not its submitted/ (an LMS zip, a folder): None: the --gradebook's folder, else the current folder, if it
    # holds an nbgrader_config.py (autograder.class_run.settings_course)
    course: Path | None = None




@dataclass
class ClassRun:
    """The state a class run's stages share: what it was asked, what it found and decided, the course's facts, the
    results as they arrive. Each stage reads what the earlier ones set and sets its own part (autograder.pipeline
    lists them, in order)."""

    opts: RunOptions
    assignment_ids: list[str]
    out: Path
    course: Path | None  # the nbgrader course whose submitted/ is graded (None: an LMS download, a folder)
    gradebook_path: Path
    progress: bool = False
    progress_interval: float | None = None
    # find
    state: ClassState | None = None  # OUT/class.json: what earlier runs into OUT saw
    students: dict[str, dict] = field(default_factory=dict)  # the gradebook's students
    roster: list[str] = field(default_factory=list)
    on_roster: frozenset = frozenset()  # the roster, to look up
    discovery: Discovery | None = None
    found: list[FoundSubmission] = field(default_factory=list)
    id_flags: dict = field(default_factory=dict)  # (student, assignment) -> the `id` flag of an escaped id
    # settings
    store: ResultStore | None = None
    assignments: dict = field(default_factory=dict)  # id -> Assignment
    config_course: Path | None = None  # whose nbgrader_config.py holds the settings
    limits: Limits | None = None
    handin_settings: HandInSettings | None = None
    settings_changed: bool = False
    tier: str = ""
    secret: bytes = b""
    # decide
    found_by_key: dict = field(default_factory=dict)  # (student, assignment) -> FoundSubmission
    foreign: dict = field(default_factory=dict)  # key -> the other assignment a notebook belongs to
    unanswered: set = field(default_factory=set)  # keys of notebooks with nothing answered
    todo: list[FoundSubmission] = field(default_factory=list)  # what this run grades
    digests: dict = field(default_factory=dict)  # key -> the notebook's sha256 (the graded ones)
    cache_keys: dict = field(default_factory=dict)  # key -> what it is graded under
    skipped: int = 0  # unchanged since they were graded
    ours: dict = field(default_factory=dict)  # key -> the auto scores this grader last wrote
    # grade
    executor: Executor | None = None
    grading: GradingOptions | None = None
    grader: "Grader | None" = None  # grading in this process (tests, the Python API)
    # facts
    gb: "CourseGradebook | None" = None
    recorder: BatchRecorder | None = None
    advance: object = None  # the progress bar's step
    manual: dict = field(default_factory=dict)  # assignment -> student -> the instructor's grades (formgrader)
    extensions: dict = field(default_factory=dict)  # assignment -> student -> nbgrader's extension
    facts: dict = field(default_factory=dict)  # key -> RecordingFacts of a submission graded now (None: unknown)
    # record
    delivered: int = 0  # results of this run's grading handed to the recorder
    record_failures: list[str] = field(default_factory=list)
    unrecorded: set = field(default_factory=set)  # (student, assignment) of each of those
    restored: set = field(default_factory=set)  # keys whose auto scores something else had changed
    restored_feedback: set = field(default_factory=set)  # ... whose feedback page something else had replaced
    restored_autograded: set = field(default_factory=set)  # ... whose autograded notebook something else removed
    # export
    results: list[SubmissionResult] = field(default_factory=list)  # every stored result, after recording
    # what stays open from grading to recording (the gradebook, the progress bar, a warm sandbox parent here),
    # closed by `close_gradebook`, or by the run when a stage fails
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    summary: RunSummary | None = None  # set by the stage that ends the run (a dry run ends after the settings)

    @property
    def feedback_root(self) -> Path | None:
        return self.course / "feedback" if self.course else None

    def off_roster(self, student_id: str) -> bool:
        """A submitter the roster does not have (a gradebook without a roster has none: everyone counts). Graded,
        reported and listed as "not on the roster"; nowhere else (gradebook, feedback/, autograded/) until the
        instructor adds them (`nbgrader db student add`)."""
        return bool(self.on_roster) and student_id not in self.on_roster


# --- the stages, in order (autograder.pipeline.CLASS_STAGES) ----------------------------------------------------


def find(run: ClassRun) -> None:
    """The class's submissions: nbgrader's submitted/, a flat folder, a Canvas or Moodle download; whose each is
    (ids checked where they enter); nothing found stops the run, saying where it looked."""
    opts = run.opts
    run.state = ClassState.load(run.out)
    run.students = gradebook_students(run.gradebook_path)
    run.roster = roster_of(run.students, run.state.added_students)
    run.on_roster = frozenset(run.roster)
    run.discovery = _discover(opts, run.assignment_ids, run.out, run.students, run.roster)
    run.found, run.id_flags, blank = _validated_ids(run.discovery.found)
    run.discovery.found = run.found
    run.discovery.skipped.extend(blank)
    if not run.found and not run.discovery.conflicts and opts.students and not opts.dry_run:
        raise GradingRunError(_no_such_students(opts, run.assignment_ids, run.out, run.students, run.roster),
                              exit_code=1)
    if not run.found and not run.discovery.conflicts and not opts.dry_run:
        raise GradingRunError(
            f"no submissions of {', '.join(run.assignment_ids)} in {opts.submissions}: expected nbgrader's layout "
            "<student>/<assignment>/<assignment>.ipynb, .ipynb files named after the student (and assignment), "
            "or a Canvas or Moodle download (--layout)"
            + "".join(f"\n  {safe_text(line, 2000)}" for line in run.discovery.lines()), exit_code=1)


def _graded_limits(limits: Limits) -> dict:
    """The limits a grade depends on: how the memory budget is enforced changes no grade (not in the key)."""
    return {k: v for k, v in limits.to_dict().items() if k != "memory_guard"}


def settings(run: ClassRun) -> None:
    """How the class is graded: the limits, the late policy and the convention credit (given, else OUT's stored
    ones: a different value given stops the run unless accepted), the memory guard and the sandbox tier; all
    validated before anything is graded. A dry run ends here, having written nothing."""
    opts = run.opts
    run.store = ResultStore(run.out)
    run.assignments = {a: load_assignment(a) for a in run.assignment_ids}
    run.config_course = settings_course(run.course, opts.course, run.gradebook_path)
    try:
        budget = submission_timeout(run.config_course, opts.submission_timeout)
        handin_settings = load_settings(run.config_course, opts.handin)
        memory.resolve(opts.memory_guard)  # a guard that cannot work here stops the run before anything is graded
    except (HandInError, memory.MemoryGuardUnavailable) as exc:
        raise GradingRunError(str(exc)) from None
    defaults = Limits()
    limits = Limits(cell_timeout=defaults.cell_timeout if opts.cell_timeout is None else opts.cell_timeout,
                    probe_timeout=defaults.probe_timeout if opts.probe_timeout is None else opts.probe_timeout,
                    submission_timeout=budget,
                    submission_memory_bytes=(defaults.submission_memory_bytes if opts.memory_budget is None
                                             else opts.memory_budget),
                    memory_guard=opts.memory_guard)
    credit = 0.0 if opts.convention_credit is None else opts.convention_credit
    try:  # a run given other settings than OUT's stops here; what it is not given, it reuses
        stored, run.settings_changed = run_settings.reconcile(
            run.out, run_settings.grade_settings(handin_settings.policy, credit, _graded_limits(limits)),
            _given_settings(opts, run.config_course), opts.accept_new_settings, write=not opts.dry_run)
        stored_limits = stored["limits"]
        run.limits = replace(limits, **{k: float(stored_limits[k])
                                        for k in ("cell_timeout", "probe_timeout", "submission_timeout")},
                             submission_memory_bytes=int(stored_limits["submission_memory_bytes"]))
        credit = float(stored["convention_credit"])
        run.handin_settings = replace(handin_settings, policy=LatePolicy(**stored["late_policy"]),
                                      roster=frozenset(run.roster))
    except run_settings.SettingsChanged as exc:
        raise GradingRunError(str(exc)) from None
    except (LatePolicyError, TypeError, ValueError, KeyError) as exc:  # OUT/settings.json edited by hand
        raise GradingRunError(f"{run.out / run_settings.FILE}: {exc}; fix it, or pass the setting (and "
                              "--accept-new-settings)") from None
    run.opts = replace(opts, convention_credit=credit)
    run.secret = course_secret()
    try:
        run.tier = tiers.choose(opts.tier, opts.allow_weak_sandbox)
    except SandboxUnavailable as exc:
        raise GradingRunError(str(exc)) from None
    if opts.dry_run:  # validated as the real run validates (settings, memory guard, tier); nothing graded or written
        run.summary = RunSummary(run.out, [], 0, 0, run.gradebook_path, None, run.assignment_ids,
                                 discovery=run.discovery, settings_file=_settings_file(run),
                                 dry_run_settings=[f"late policy: {run.handin_settings.policy.describe()}",
                                                   f"hand-in times read in: {run.handin_settings.exchange_timezone} "
                                                   "(c.Exchange.timezone)", f"sandbox tier: {run.tier}"])


def decide(run: ClassRun) -> None:
    """What to grade: every found submission but those whose stored result is under the same key (the notebook's
    bytes, the checks, the settings: autograder.recording.cache); and what reading each notebook says before it is
    graded (another assignment's, nothing answered)."""
    from autograder.intake.reading import UnreadableNotebook, load_notebook_bytes

    opts = run.opts
    keys = {a: grading_key(a, run.tier, _graded_limits(run.limits), opts.convention_credit, run.secret,
                           run_all_cells=opts.run_all_cells) for a in run.assignment_ids}
    run.found_by_key = {(f.student_id, f.assignment_id): f for f in run.found}
    run.foreign, run.unanswered = {}, set()
    for f in run.found:
        key = (f.student_id, f.assignment_id)
        try:  # read once, as grading reads it (no link or special file followed; nothing past the 64 MiB it reads)
            data = load_notebook_bytes(f.notebook)
        except UnreadableNotebook:
            data = None  # graded anyway: reading it fails inside, as that submission's error status; never cached
        digest = hashlib.sha256(data).hexdigest() if data is not None else None
        if run.found_by_key[key] is f:  # the facts of the file graded under this key, of the bytes digested
            run.foreign[key], unanswered = _notebook_facts(f.assignment_id, data)
            if unanswered:
                run.unanswered.add(key)
        del data
        cache_key = submission_key(keys[f.assignment_id], f.student_id, digest)
        stored = run.store.load(f.student_id, f.assignment_id)
        if stored is not None:
            run.ours[key] = {p.grade_id: p.auto_score for p in stored.result.parts}
        if not opts.force and stored is not None and cache_key is not None and stored.cache_key == cache_key:
            run.skipped += 1
            continue
        run.todo.append(f)
        run.digests[key], run.cache_keys[key] = digest, cache_key


def start_workers(run: ClassRun) -> None:
    """Where the grading happens (autograder.jobs.executors), started ahead of its turn: the local workers
    import torch and warm their sandbox parents while this process reads the course's facts; grading in this
    process, its warm parent starts now."""
    opts = run.opts
    run.executor = Executor(opts.executor, opts.workers, opts.scheduler, in_process=opts.in_process,
                            memory_bytes=opts.worker_memory_bytes)
    run.grading = GradingOptions(limits=run.limits, tier=run.tier, allow_weak_sandbox=opts.allow_weak_sandbox,
                                 convention_credit=opts.convention_credit, run_all_cells=opts.run_all_cells,
                                 secret=run.secret)
    if not run.todo:
        return
    if not in_process(run.executor, len(run.todo)):
        try:
            prestart(run.executor, run.grading, {f.assignment_id for f in run.todo}, len(run.todo))
        except OSError as exc:
            raise GradingRunError(f"cannot start a grading worker: {exc}") from None
        return
    try:  # grading here: the warm parent starts before the engine's imports
        zygote = Zygote(environment.locate(), run.tier, run.limits.startup_timeout).launch()
        from autograder.engine import Grader

        run.grader = Grader(run.grading, zygote)
    except (SandboxUnavailable, SandboxEnvironmentError, OSError) as exc:
        raise GradingRunError(str(exc)) from None
    run.stack.callback(run.grader.close)


def open_gradebook(run: ClassRun) -> None:
    """nbgrader's gradebook, open until the results are recorded (`close_gradebook`), written in transactions of
    many results (autograder.recording.batch); and the progress bar."""
    from autograder.recording.gradebook import CourseGradebook

    run.gb = run.stack.enter_context(CourseGradebook(run.gradebook_path))
    run.stack.enter_context(run.gb.batch())
    run.advance = run.stack.enter_context(Progress(len(run.todo), "grading", run.progress_interval,
                                                   enabled=run.progress))
    run.recorder = BatchRecorder(run.gb.commit, run.gb.rollback, lambda what, exc: _pending(
        run, _recording_failed(what.key, run.assignments[what.key.assignment_id], exc)),
        lambda what, exc: _unrecorded(run, what.key, exc))


def _unrecorded(run: ClassRun, result: SubmissionResult, exc: Exception) -> None:
    """A result whose recording failed and whose failure could not be recorded either: reported."""
    run.unrecorded.add((result.student_id, result.assignment_id))
    run.record_failures.append(f"{result.student_id}/{result.assignment_id}: {type(exc).__name__}: "
                               f"{safe_text(exc, 300)}")


def read_facts(run: ClassRun) -> None:
    """What finishing each result to be graded needs, read once, before grading, for the whole class (one read per
    submission costs about 20 ms): the instructor's grades, the due date and extension, the hand-in (who, when,
    how late: autograder.intake.handin) and the flags of how it was found. They travel with the job; None where
    reading them failed (the result is then finished here, and what fails is its failure)."""
    for f in run.todo:
        key = (f.student_id, f.assignment_id)
        try:
            run.facts[key] = facts_of(run, f)
        except Exception:
            run.facts[key] = None


def grade(run: ClassRun) -> None:
    """Grade what was decided, where it was started; each result is finished (where it was graded), recorded and
    reported as it arrives (`take_result`). Ctrl-C keeps what was graded."""
    submissions = [Submission(f.notebook, f.assignment_id, f.student_id,
                              _as_dict(run.facts.get((f.student_id, f.assignment_id)))) for f in run.todo]
    try:
        run_submissions(submissions, run.grading, lambda result, rendered=None: take_result(run, result, rendered),
                        run.executor, run.grader, heartbeat=run.recorder.heartbeat,
                        on_started=functools.partial(warm_up_exports, list(run.assignments.values())))
    except (SandboxUnavailable, SandboxEnvironmentError, ExecutorError) as exc:
        run.recorder.flush()  # what was graded before stays graded
        raise GradingRunError(str(exc)) from None
    except KeyboardInterrupt:  # Ctrl-C: what was graded is kept (a second Ctrl-C waits until it is)
        previous = _ignore_sigint()
        try:
            run.recorder.interrupted()
        finally:
            _restore_sigint(previous)
        raise GradingInterrupted(run.out, run.delivered - len(run.record_failures)) from None


def keep(run: ClassRun) -> None:
    """The results kept from earlier runs: finished again where their facts changed (a due date, an extension, the
    policy, the instructor's grades, the roster) or where something else overwrote what we wrote (`nbgrader
    autograde`'s scores, `generate_feedback`'s page, a removed autograded notebook); every stored result of this
    run's assignments into the gradebook again (idempotent)."""
    kept = set()  # written into the gradebook by _keep_one, as finished there
    for key, f in run.found_by_key.items():
        if key not in run.digests:
            stored = run.store.load(*key)
            if stored is not None:
                _keep_one(run, stored, f)
                kept.add(key)
    run.recorder.flush()
    run.results = run.store.all()  # every stored result, whatever this run graded
    graded_now = {(f.student_id, f.assignment_id) for f in run.todo}
    for result in run.results:  # the rest of what this run's assignments had graded before: not found now (a
        # submission removed since), or kept but left in the gradebook as a failure its files could not record
        # (the stored result stands: the gradebook has it again); the other kept ones are there already (_keep_one)
        key = (result.student_id, result.assignment_id)
        if result.assignment_id in run.assignment_ids and key not in graded_now \
                and (key not in kept or key in run.unrecorded):
            run.recorder.stage_only(result, lambda result=result: into_gradebook(run, result))
    run.recorder.flush()


def _keep_one(run: ClassRun, stored, f: FoundSubmission) -> None:
    key = (f.student_id, f.assignment_id)
    result = stored.result
    release = run.handin_settings.release_flagged_feedback and any(flag.kind == FLAG_IDENTITY for flag in result.flags)
    facts = facts_of(run, f)
    graded_by_hand = result.apply_manual_grades(facts.manual_grades)  # since: in formgrader
    # scores something else wrote (nbgrader autograde): ours back, and our feedback (generate_feedback's went)
    run.recorder.stage_only(result, lambda: into_gradebook(run, result))
    overwritten = key in run.restored
    if run.feedback_root is not None and _foreign_feedback(run.feedback_root, result):
        run.restored_feedback.add(key)  # `nbgrader generate_feedback` wrote its own page there
        overwritten = True
    if run.course is not None and autograded_missing(run.course, result):
        run.restored_autograded.add(key)  # formgrader lists it as not autograded without it
        overwritten = True
    # on the roster since the last run (`nbgrader db student add`): its files of nbgrader's are written now
    joined = bool(run.state.roster) and key[0] not in run.state.roster and not run.off_roster(key[0])
    if release or graded_by_hand or overwritten or joined or final_handin(result, facts) != result.handin:
        record(run, result, RecordingFacts(facts.manual_grades, facts.handin, facts.policy,
                                           stored.notebook_sha256, stored.cache_key))


def _settings_file(run: ClassRun) -> Path | None:
    """The nbgrader_config.py the course's settings were read from."""
    return run.config_course / "nbgrader_config.py" if run.config_course else None


def close_gradebook(run: ClassRun) -> None:
    """The last transaction committed, the gradebook closed (and this process's warm sandbox parent, if it graded)."""
    run.stack.close()


def export(run: ClassRun) -> None:
    """OUT's view of the class (class.json), and the exports from every stored result: results.json, grades.csv,
    summary.html; the run's summary."""
    _update_state(run.state, run.discovery, run.results, run.assignment_ids, run.opts.students, run.gradebook_path,
                  run.roster)
    run.state.save(run.out)
    record_ = ClassRecord(run.results, run.roster, set(run.state.not_found), run.state.conflicts)
    write_exports(run.out, record_)
    settings_file = _settings_file(run)
    run.summary = RunSummary(run.out, run.results, len(run.todo), run.skipped, run.gradebook_path, run.feedback_root,
                             run.assignment_ids, run.executor.usage, run.record_failures, run.discovery, record_,
                             run.settings_changed, restored=len(run.restored),
                             restored_feedback=len(run.restored_feedback),
                             restored_autograded=len(run.restored_autograded), settings_file=settings_file,
                             release_flagged=run.handin_settings.release_flagged_feedback)


# --- one submission's facts, and its result's way into the records ---------------------------------------------


def facts_of(run: ClassRun, f: FoundSubmission) -> RecordingFacts:
    """Everything finishing `f`'s result needs that is known before it is graded, in one place: the instructor's
    grades, and the hand-in but its penalty (with the flags of how it was found), and the policy the penalty is
    computed by (autograder.recording.rendered.finish)."""
    key = (f.student_id, f.assignment_id)
    handin, penalized = _handin_facts(f.student_id, f.assignment_id, f, run.handin_settings,
                                      run.gb.due_date(f.assignment_id), _extension(run, f.assignment_id, f.student_id),
                                      run.foreign.get(key), key in run.unanswered)
    if key in run.id_flags:
        handin = _with_flag(handin, run.id_flags[key])
    return RecordingFacts(_manual_grades(run, f.assignment_id, f.student_id), handin,
                          run.handin_settings.policy if penalized else None, run.digests.get(key),
                          run.cache_keys.get(key))


def _manual_grades(run: ClassRun, assignment_id: str, student_id: str) -> dict:
    if assignment_id not in run.manual:  # the whole class's at once
        run.manual[assignment_id] = run.gb.class_manual_grades(run.assignments[assignment_id])
    return run.manual[assignment_id].get(student_id, {})


def _extension(run: ClassRun, assignment_id: str, student_id: str):
    if assignment_id not in run.extensions:
        run.extensions[assignment_id] = run.gb.class_extensions(assignment_id)
    return run.extensions[assignment_id].get(student_id)


def _as_dict(facts: RecordingFacts | None) -> dict | None:
    return facts.to_dict() if facts is not None else None


def take_result(run: ClassRun, result: SubmissionResult, rendered: dict | None = None) -> None:
    """A result as it comes from grading: finished and rendered where it was graded from its facts (then only its
    gradebook writes and its files are left), else finished here."""
    run.delivered += 1
    key = (result.student_id, result.assignment_id)
    files = checked(rendered, result, run.digests[key], run.cache_keys[key]) \
        if rendered is not None and key in run.digests else None
    if files is None:
        record(run, result)
    else:
        run.recorder.add(Pending(result, lambda: into_gradebook(run, result), lambda: write_files(run, result, files)))
    run.advance(safe_text(f"{result.student_id}/{result.assignment_id}", 200))


def record(run: ClassRun, result: SubmissionResult, facts: RecordingFacts | None = None) -> None:
    """Record one result finished here; whatever fails while recording it is that submission's error, not the
    run's."""
    run.recorder.add(_pending(run, result, facts))


def _pending(run: ClassRun, result: SubmissionResult, facts: RecordingFacts | None = None) -> Pending:
    """The result's recording: finished once (when it is first staged), its gradebook writes repeatable, its files
    written after the transaction commits."""
    key = (result.student_id, result.assignment_id)
    rendered = []

    def stage():
        if not rendered:
            known = facts or run.facts.get(key)
            if known is None:  # not read before grading (or that failed): read now; a failure is this result's
                found = run.found_by_key.get(key)
                known = facts_of(run, found) if found is not None else RecordingFacts(
                    handin=result.handin, digest=run.digests.get(key), cache_key=run.cache_keys.get(key))
            rendered.append(finish(result, known))
        into_gradebook(run, result)

    return Pending(result, stage, lambda: write_files(run, result, rendered[0]))


def into_gradebook(run: ClassRun, result: SubmissionResult) -> None:
    """Not an unmapped LMS id (no student of the course) nor a submitter not on the roster; a student the
    gradebook did not have (it has no roster) is remembered as added by autograde, so that it is never taken
    for the roster. Auto scores something else wrote there since (`nbgrader autograde`) are replaced by ours,
    and counted."""
    if any(f.kind == FLAG_UNMAPPED for f in result.flags) or run.off_roster(result.student_id):
        return
    if result.student_id not in run.students and result.student_id not in run.state.added_students:
        run.state.added_students.append(result.student_id)
        run.state.save(run.out)  # before the gradebook has it: a crash in between never makes it look imported
    key = (result.student_id, result.assignment_id)
    replaced = run.gb.record(result, run.assignments.get(result.assignment_id) or load_assignment(result.assignment_id))
    if _replaced_foreign(replaced, run.ours.get(key)):
        run.restored.add(key)


def write_files(run: ClassRun, result: SubmissionResult, rendered: Rendered) -> None:
    """The result's files, as rendered where it was finished: its report (and nbgrader's feedback page and
    autograded notebook, for a student on the roster), and last its result file, which marks it done."""
    key = (result.student_id, result.assignment_id)
    found = run.found_by_key.get(key)
    html = write_report(run.out, result, rendered.report)
    if not run.off_roster(result.student_id):  # in no file of nbgrader's until on the roster
        if run.course is not None:  # what formgrader and nbgrader's generate_feedback read
            write_autograded(run.course, result, found)
        if run.feedback_root is not None:
            write_feedback(run.feedback_root, result, found.folder if found is not None else None,
                           run.assignments[result.assignment_id].source.name, html,
                           release_flagged=run.handin_settings.release_flagged_feedback)
    run.store.save_encoded(result, rendered.result_file)  # last: this marks the submission done


# --- what the stages use ---------------------------------------------------------------------------------------


def gradebook_students(gradebook_path: Path) -> dict[str, dict]:
    """The gradebook's students (id -> email, named), without creating a gradebook that is not there.

    Read with sqlite3, read-only, as nbgrader's `Gradebook.students` lists them (the same query): importing and
    opening nbgrader's API for it cost about 0.5 s of every run on a course that has a gradebook, before its
    workers could start. A gradebook that this read cannot take (not one, or one it cannot read now) is opened with
    nbgrader's API, as before, which does what it does with it and says why it cannot."""
    path = Path(gradebook_path)
    if not path.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT id, first_name, last_name, email FROM student "
                              "ORDER BY last_name, first_name").fetchall()
        return {sid: student_entry(first, last, email) for sid, first, last, email in rows}
    except sqlite3.Error:
        pass
    from autograder.recording.gradebook import CourseGradebook

    with CourseGradebook(path) as gb:
        return gb.students()


def _discover(opts: RunOptions, assignment_ids: list[str], out: Path, students: dict[str, dict],
              roster: list[str]) -> Discovery:
    try:
        export = lms.read_export(opts.lms_roster) if opts.lms_roster else None
        return discover(Path(opts.submissions), assignment_ids, opts.students or None, unpack_to=out / "unpacked",
                        layout=opts.layout, lms_export=export,
                        roster={s: students[s]["email"] for s in roster})
    except (DiscoveryError, lms.LmsError) as exc:
        raise GradingRunError(str(exc)) from None


def settings_course(course: Path | None, given: Path | None, gradebook: Path) -> Path | None:
    """Whose nbgrader_config.py a run reads (late policy, limits, display zone): the course whose submitted/ it grades;
    else `--course`; else, for an LMS download or a folder elsewhere, the folder of --gradebook or the current folder,
    whichever holds an nbgrader_config.py (as nbgrader itself reads the current folder's)."""
    if course is not None:
        return course
    if given is not None:
        if not (Path(given) / "nbgrader_config.py").is_file():
            raise GradingRunError(f"--course {given}: no nbgrader_config.py there")
        return Path(given).resolve()
    for folder in (Path(gradebook).resolve().parent, Path.cwd()):
        if (folder / "nbgrader_config.py").is_file():
            return folder
    return None


def _update_state(state: ClassState, discovery: Discovery, results: list[SubmissionResult], assignment_ids: list[str],
                  students: set[str], gradebook: Path, roster: list[str]) -> None:
    """This run's view of what exists: stored results of its assignments (and --student) that it did not find are
    no longer found; its conflicts replace the earlier ones of its assignments."""
    found = {(f.student_id, f.assignment_id) for f in discovery.found}
    conflicted = {(c.student_id, c.assignment_id) for c in discovery.conflicts}
    looked = {(r.student_id, r.assignment_id) for r in results
              if r.assignment_id in assignment_ids and (not students or r.student_id in students)}
    state.not_found = sorted({k for k in state.not_found if k not in looked}
                             | {k for k in looked if k not in found and k not in conflicted})
    state.conflicts = sorted([c for c in state.conflicts if c[1] not in assignment_ids
                              or (students and c[0] not in students)]
                             + [(student_id_from_name(c.student_id)[0], c.assignment_id, safe_text(c.reason, 2000))
                                for c in discovery.conflicts])
    state.gradebook, state.roster = str(Path(gradebook).resolve()), list(roster)


def _notebook_facts(assignment_id: str, data: bytes | None) -> tuple[str | None, bool]:
    """What reading a found notebook (its bytes `data`, None if unreadable) says before it is graded: the other
    assignment it belongs to (its grade cells, else None), and whether nothing is answered in it: every code cell is
    one of the released notebook's (`release/`: answer stubs, demo and self-check cells; none added or changed) and
    every written answer is as released (or gone). Unreadable, too deep or too many values to parse here: (None,
    False): the grading says why, in its worker, under its memory limit (this process has none)."""
    import json

    from autograder.intake.validate import nesting_within, values_within

    if data is None or not nesting_within(data) or not values_within(data):
        return None, False
    try:
        nb = json.loads(data.decode("utf-8"))  # as the grading reads it (json.loads would guess UTF-16 or -32 too)
        cells = nb.get("cells") if isinstance(nb, dict) and "nbformat" in nb else None
        if not isinstance(cells, list):
            return None, False  # not a notebook: the grading says so
        ids, code, written = set(), set(), {}
        for c in cells:
            if not isinstance(c, dict):
                continue
            meta = c.get("metadata")
            nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
            grade_id = nbgrader.get("grade_id") if isinstance(nbgrader, dict) else None
            source = c.get("source", "")
            source = ("".join(map(str, source)) if isinstance(source, list) else str(source)).strip()
            if isinstance(grade_id, str):
                ids.add(grade_id)
            if c.get("cell_type") == "code":
                code.add(source)
            elif isinstance(grade_id, str):
                written.setdefault(grade_id, source)
    except (ValueError, RecursionError, UnicodeDecodeError, TypeError):
        return None, False
    foreign = assignment_of_notebook(ids, assignment_id)
    if foreign is not None:
        return foreign, False
    released = _released(assignment_id)
    if released is None:
        return None, False
    released_code, released_written = released
    return None, code <= released_code and all(written.get(cell, stub) == stub
                                               for cell, stub in released_written.items())


@functools.lru_cache(maxsize=None)
def _released(assignment_id: str) -> tuple[frozenset[str], dict[str, str]] | None:
    """The assignment's notebook as students get it (release/<id>/<id>.ipynb): its code cells' sources, and its
    written answer cells (grade id -> source), stripped; None when there is no release."""
    assignment = load_assignment(assignment_id)
    release = assignment.release
    answers = {cell for part in assignment.parts for cell in part.answer_cells}
    try:
        _, cells = source_cells(release)  # as nbformat.read gives them
    except (OSError, ValueError):
        return None
    return (frozenset(c.source.strip() for c in cells if c.cell_type == "code"),
            {c.metadata["nbgrader"]["grade_id"]: c.source.strip() for c in cells
             if c.cell_type != "code" and c.metadata.get("nbgrader", {}).get("grade_id") in answers})


def _no_such_students(opts: RunOptions, assignment_ids: list[str], out: Path, students: dict[str, dict],
                      roster: list[str]) -> str:
    """Why `--student` found nothing: those students have no submission there; a few that have one."""
    asked = ", ".join(sorted(opts.students))
    try:
        everyone = _discover(replace(opts, students=set()), assignment_ids, out, students, roster).found
    except GradingRunError:
        everyone = []
    present = sorted({f.student_id for f in everyone if f.student_id.strip()})
    said = f"--student {asked}: no submission of {', '.join(assignment_ids)} by that student in {opts.submissions}"
    if not present:
        return said + ", nor by anyone else"
    shown = ", ".join(safe_text(p, 100) for p in present[:5]) + (f", ... ({len(present)} in all)"
                                                                if len(present) > 5 else "")
    return f"{said}; students with one there: {shown}"


def _validated_ids(found: list[FoundSubmission]) -> tuple[list[FoundSubmission], dict[tuple[str, str], Flag],
                                                          list[Skipped]]:
    """Student ids as found on disk, checked where they enter: one that is not printable UTF-8 is graded under its
    escaped form and flagged `id`; a blank one (spaces only) names no student: that submission is not graded, and
    said so."""
    checked, flags, blank = [], {}, []
    for f in found:
        if f.student_id and not f.student_id.strip():
            blank.append(Skipped(f.notebook, f"the student id found for it ({f.how or 'its name'}) is blank: "
                                             "not graded; rename it after the student"))
            continue
        student_id, escaped = student_id_from_name(f.student_id)
        if escaped:
            f = dataclasses.replace(f, student_id=student_id)
            flags[(student_id, f.assignment_id)] = Flag(
                FLAG_ID, f"the student id found for this submission is not printable UTF-8; graded as {student_id!r}",
                f"这份提交的学号不是可打印的 UTF-8 文本，按转义后的学号 {student_id} 评分")
        checked.append(f)
    return checked, flags, blank


def _given_settings(opts: RunOptions, course: Path | None) -> set[str]:
    """The settings (autograder.recording.run_settings.SETTABLE) this run is given, by an option or the course's
    nbgrader_config.py; the others are OUT/settings.json's."""
    from autograder.intake.handin import CONFIG_SECTION, load_course_config

    config = load_course_config(course)
    section = config[CONFIG_SECTION] if CONFIG_SECTION in config else {}
    h = opts.handin
    given = set()
    if any(v is not None for v in (h.late_policy, h.late_points, h.late_percent, h.late_cap_percent)) or \
            any(key.startswith("late_") for key in section):
        given.add("late_policy")
    if opts.convention_credit is not None:
        given.add("convention_credit")
    if opts.cell_timeout is not None:
        given.add("limits.cell_timeout")
    if opts.probe_timeout is not None:
        given.add("limits.probe_timeout")
    if opts.submission_timeout is not None or "submission_timeout" in section:
        given.add("limits.submission_timeout")
    if opts.memory_budget is not None:
        given.add("limits.submission_memory_bytes")
    return given


def _with_flag(handin: HandIn | None, flag: Flag) -> HandIn:
    handin = handin or HandIn()
    if all(existing.kind != flag.kind for existing in handin.flags):
        handin.flags = [*handin.flags, flag]
    return handin


def _recording_failed(result: SubmissionResult, assignment, exc: Exception) -> SubmissionResult:
    """What is recorded for a submission whose own result could not be recorded (its report, its gradebook row)."""
    from autograder.engine import Submission, failed_result

    failure = failed_result(Submission(Path(safe_text(result.notebook)), assignment.id, safe_text(result.student_id)),
                            assignment, safe_text(result.tier), result.seed,
                            f"这份提交的结果无法保存：评分程序出错（{type(exc).__name__}），请联系老师 "
                            f"(recording failed: {type(exc).__name__}: {safe_text(exc, 300)})")
    failure.infrastructure_error = True
    return failure


FEEDBACK_MARK = b'<meta name="generator" content="autograde">'  # in every report (templates/base.html.j2)


def _foreign_feedback(feedback_root: Path, result: SubmissionResult) -> bool:
    """Is the submission's feedback page there but not ours (`nbgrader generate_feedback` writes its own)?"""
    page = feedback_root / nbgrader_folder_name(result.student_id) / result.assignment_id / f"{result.assignment_id}.html"
    try:
        with open(page, "rb") as f:
            return FEEDBACK_MARK not in f.read(4096)
    except OSError:
        return False  # none (withheld, or not written yet): nothing replaced


def _replaced_foreign(replaced: dict[str, float | None], ours: dict | None) -> bool:
    """Did the gradebook hold auto scores this grader had not written (`nbgrader autograde` writes its own)?
    `replaced`: grade_id -> the value it held before; `ours`: what this grader last wrote (None: never)."""
    return any(old is not None and old != (ours or {}).get(grade_id) for grade_id, old in replaced.items())


def _handin_facts(student_id: str, assignment_id: str, found: FoundSubmission, settings: HandInSettings,
                  due, extension, foreign: str | None, unanswered: bool = False) -> tuple[HandIn | None, bool]:
    """What `_assess_handin` finds before grading: the hand-in but its penalty, and whether it has a penalty to
    compute from the score (autograder.intake.handin.with_penalty)."""
    handin = handin_facts(student_id, assignment_id, found.folder, found.notebook, settings, due, extension,
                          lms_late=found.lms_late)
    penalized = handin is not None
    extra = []
    if found.unmapped:
        extra.append(Flag(FLAG_UNMAPPED, f"{found.how}: graded under the LMS id, kept out of grades.csv",
                          "这份提交的 LMS 账号没有对应到课程名单，成绩待老师核实"))
    if foreign:
        extra.append(Flag(FLAG_WRONG_ASSIGNMENT, f"this is a notebook of {foreign}, not of {assignment_id}",
                          f"这是 {foreign} 的笔记本，不是 {assignment_id} 的：请提交本次作业的笔记本"))
    if unanswered:
        extra.append(Flag(FLAG_UNANSWERED, "nothing answered: its code and written answers are as released (or deleted)",
                          "这份提交没有作答：笔记本里的代码和书面回答都和发下的版本一样（或被删除了）"))
    if extra:
        handin = handin or HandIn()
        handin.flags = list(handin.flags) + extra
    return handin, penalized


def write_exports(out: Path, record: ClassRecord) -> None:
    """results.json (every stored result, each saying whether grades.csv counts it), grades.csv (the roster's rows;
    what is left out, out) and summary.html (with what is left out, and why), all from `record`."""
    from autograder.reporting.class_summary import render_summary

    shown = record.assignment_ids()
    left_out = {(x.result.student_id, x.result.assignment_id): x.reason for x in record.left_out()}
    flags = record.flags()
    have = {(r.student_id, r.assignment_id) for r in record.results}
    absent = {key: _max_score(key[1]) for key in flags if key not in have}
    write_results_json(record.results, out / "results.json", left_out, flags, absent)
    write_grades_csv(record.counted(), record.roster, shown, out / "grades.csv", flags)
    atomic_write(out / "summary.html", render_summary(record.counted(), record.roster, left_out=record.left_out(),
                                                      conflicts=record.conflicts, actions=record.actions()))


def _max_score(assignment_id: str) -> float:
    try:
        return load_assignment(assignment_id).max_score
    except ValueError:  # not an assignment of the course (any more)
        return 0.0


def _ignore_sigint():
    import signal

    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to hold back
        return None


def _restore_sigint(previous) -> None:
    import signal

    if previous is not None:
        signal.signal(signal.SIGINT, previous)
