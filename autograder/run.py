"""A grading run, as `autograde grade` does it: find, grade, record, report; resumable.

What recording a submission needs from the gradebook and its folder (manual grades, the hand-in) is read before
it is graded and sent with it: the worker finishes the result and renders its report and result file
(autograder.recording.rendered), and this process writes them. Each graded submission is recorded in this order:
the gradebook (in one transaction with the results that arrived about when it did: autograder.recording.batch),
then, once that transaction has committed, its report (and nbgrader feedback), and last its result file, which
marks it done, with its cache key (autograder.recording.cache).
A run killed at any point and started again grades exactly what has no result file under the same key
yet, and rewrites the other stored results into the gradebook (idempotent), so results and gradebook end
up as an uninterrupted run would leave them.
"""

import contextlib
import dataclasses
import functools
import statistics
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.assignments import load_assignment
from autograder.recording.batch import BatchRecorder, Pending
from autograder.recording.rendered import RecordingFacts, Rendered, checked
from autograder.recording.cache import grading_key, submission_key
from autograder.course import course_secret
from autograder.intake import lms
from autograder.intake.late import LatePolicy, LatePolicyError
from autograder.recording import run_settings
from autograder.assignments import assignment_ids as course_assignments, assignment_of_notebook
from autograder.recording.class_record import ClassRecord, ClassState, roster_of
from autograder.intake.discovery import Discovery, DiscoveryError, FoundSubmission, Skipped, course_root, discover
from autograder.running.executors import (WORKER_MEMORY_BYTES, Executor, ExecutorError, in_process, prestart,
                                          run_submissions)
from autograder.running.jobs import GradingOptions, Submission
from autograder.intake.handin import (HandInError, HandInOptions, HandInSettings, facts as handin_facts, load_settings,
                                     show_hand_answers_after_due, submission_timeout, with_penalty)
from autograder.recording.locking import LockedError, gradebook_lock, out_lock, run_locks
from autograder.progress import Progress
from autograder.recording.outputs import (ResultStore, atomic_write, nbgrader_folder_name, notebook_digest, write_grades_csv,
                                write_results_json)
from autograder.reporting.feedback import write_feedback, write_report
from autograder.recording.results import (FLAG_ID, FLAG_IDENTITY, FLAG_UNANSWERED, FLAG_UNMAPPED, FLAG_WRONG_ASSIGNMENT,
                                STATUS_ERROR, Flag, HandIn, SubmissionResult)
from autograder.intake.validate import safe_text, sanitize_record, student_id_from_name
from autograder.running.sandbox import environment, tiers
from autograder.running.sandbox.environment import SandboxEnvironmentError
from autograder.running.sandbox import memory
from autograder.running.sandbox.limits import Limits
from autograder.running.sandbox.tiers import SandboxUnavailable
from autograder.running.sandbox.zygote import Zygote

# The engine (torch), the gradebook (nbgrader) and the executors' workers are imported inside run_grading,
# after the sandbox's warm parent is launched: it warms up meanwhile (a one-submission run takes seconds less).
if TYPE_CHECKING:
    from autograder.engine import Grader


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
    # holds an nbgrader_config.py (autograder.run.settings_course)
    course: Path | None = None


@dataclass
class RunSummary:
    out: Path
    results: list[SubmissionResult]
    graded_now: int
    skipped: int  # unchanged since they were graded (the regrade cache)
    gradebook: Path
    feedback: Path | None
    assignment_ids: list[str]
    usage: list[dict] = field(default_factory=list)  # per worker: peak memory (KiB)
    record_failures: list[str] = field(default_factory=list)  # results that could not be recorded at all
    discovery: Discovery | None = None
    record: ClassRecord | None = None  # what the exports were built from (every stored result in OUT)
    settings_changed: bool = False
    restored: int = 0  # submissions whose auto scores in the gradebook had been changed by something else
    restored_feedback: int = 0  # submissions whose feedback page something else had replaced
    restored_autograded: int = 0  # submissions whose autograded notebook something else had removed
    settings_file: Path | None = None  # the nbgrader_config.py the course's settings were read from
    release_flagged: bool = False  # --release-flagged-feedback: identity-flagged feedback written too

    def feedback_lines(self) -> list[str]:
        """Where the feedback is, only as paths that exist, and for whom it is withheld and why."""
        from autograder.reporting.feedback import feedback_page, withheld_because

        mine = [r for r in self.results if r.assignment_id in self.assignment_ids]
        lines = []
        if self.feedback is not None:
            written = [r for r in mine if feedback_page(self.feedback, r).is_file()]
            if written:
                lines.append(f"feedback: {len(written)} report(s) in {self.feedback}/<student>/<assignment>/  "
                             "(nbgrader release_feedback)")
            else:
                lines.append("feedback: none written into nbgrader's feedback/")
        else:
            lines.append("feedback: the reports above are the students' feedback (not a course's submitted/: no "
                         "nbgrader feedback/); for an LMS, `autograde lms-grades` also writes them for upload")
        withheld = [(r, why) for r in mine if (why := withheld_because(r, self.release_flagged))]
        for r, why in withheld[:10]:
            lines.append(f"feedback withheld: {r.student_id}/{r.assignment_id}: {why}")
        if len(withheld) > 10:
            lines.append(f"feedback withheld: ... {len(withheld)} in all (summary.html, grades.csv: feedback_withheld)")
        if withheld:
            lines.append("feedback withheld: check them, then grade again with --release-flagged-feedback to write it")
        return [safe_text(line, 2000) for line in lines]

    @property
    def check_bugs(self):
        """Checks that raised on the reference's output too, or whose diagnosis raised (bugs of ours), in this run's
        assignments: the run exits with EXIT_CHECK_BUG."""
        from autograder.reporting.class_summary import check_bugs

        return check_bugs([r for r in self.results if r.assignment_id in self.assignment_ids])

    def rows(self) -> list[tuple]:
        """Per assignment of the class (every stored result counted in grades.csv): the terminal's table, in the
        summary page's words (autograder.reporting.formatting.SUMMARY_COLUMNS)."""
        counted = self.record.counted() if self.record else self.results
        rows = []
        for a in course_assignments():
            rs = [r for r in counted if r.assignment_id == a]
            if not rs:
                continue
            scores = [r.final_score for r in rs]
            errors = sum(r.status == STATUS_ERROR for r in rs)
            rows.append((a, len(rs), statistics.mean(scores), statistics.median(scores), max(scores),
                         max(r.max_score for r in rs), errors))
        return rows

    def notes(self) -> list[str]:
        """What this run did not grade and why, and what the exports leave out."""
        lines = self.discovery.lines() if self.discovery else []
        if self.record:
            lines += self.record.lines(self.out)
        if self.settings_changed:
            lines.append(f"settings changed (--accept-new-settings): {self.out / run_settings.FILE} rewritten")
        return [safe_text(line, 2000) for line in lines]  # file and folder names: any bytes

    def print(self) -> None:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        from autograder.reporting.formatting import SUMMARY_COLUMNS

        console = Console()
        for line in self.notes():
            console.print(line, markup=False, highlight=False)
        table = Table(title="Grading summary (every stored result in OUT)")
        for column in SUMMARY_COLUMNS:
            table.add_column(column, justify="left" if column == "assignment" else "right")
        for a, n, mean, median, best, max_score, errors in self.rows():
            table.add_row(a, str(n), f"{mean:.2f}", f"{median:.2f}", f"{best:g}", f"{max_score:g}", str(errors))
        console.print(table)
        console.print(f"graded {self.graded_now} submission(s); {self.skipped} unchanged since they were graded "
                      "(cached; --force regrades them)")
        console.print(f"results:  {self.out / 'results.json'}  and  {self.out / 'grades.csv'}")
        console.print(f"reports:  {self.out / 'reports'}/<student>/<assignment>.html" if (self.out / "reports").is_dir()
                      else "reports:  none written")
        console.print(f"summary:  {self.out / 'summary.html'}")
        console.print(f"gradebook: {self.gradebook}  (nbgrader export)")
        if self.settings_file is not None:
            console.print(f"settings: {self.settings_file}  (late policy, limits, time zone)")
        if self.restored:
            console.print(f"gradebook: restored autograde's scores of {self.restored} submission(s) whose auto scores "
                          "had been changed since they were graded (e.g. by `nbgrader autograde`)")
        if self.restored_feedback:
            console.print(f"feedback: restored autograde's reports of {self.restored_feedback} submission(s) that had "
                          "been replaced (e.g. by `nbgrader generate_feedback`)")
        if self.restored_autograded:
            console.print(f"autograded: restored the autograded notebooks of {self.restored_autograded} submission(s) "
                          "that had been removed (e.g. by a refused `nbgrader autograde`); formgrader lists them again")
        pending = [r for r in self.results if r.pending_points]
        if pending:
            console.print(f"pending: {len(pending)} submission(s) have written answers to grade by hand "
                          f"({sum(r.pending_points for r in pending):g} points): formgrader (README)")
        for line in self.feedback_lines():
            console.print(line, markup=False, highlight=False)
        for bug in self.check_bugs:
            last = bug.crash.splitlines()[-1] if bug.crash else ""
            where = ("raised in its diagnosis (a variant, hint or key recogniser; the students got the comparison's "
                     f"own message) on {bug.count} submission(s)" if bug.in_diagnosis else
                     f"raised on the reference's output too ({bug.count} submission(s) lost its points)")
            console.print(f"[red]check bug:[/red] {escape(bug.assignment_id)}/{escape(bug.check)} {where}: "
                          f"{escape(last)}", highlight=False)
        for failure in self.record_failures:
            console.print(f"[red]not recorded:[/red] {escape(failure)}", highlight=False)


def resolve_assignments(names: list[str]) -> list[str]:
    if not names:
        raise GradingRunError("name at least one assignment, or `all`")
    if "all" in names:
        return list(course_assignments())
    unknown = [n for n in names if n not in course_assignments()]
    if unknown:
        raise GradingRunError(f"no such assignment: {', '.join(unknown)}; the assignments are: {', '.join(course_assignments())} "
                              "(or `all`)")
    return list(dict.fromkeys(names))


def run_grading(opts: RunOptions, progress: bool = False, progress_interval: float | None = None) -> RunSummary:
    """Find, grade, record and export, holding the locks of OUT and of the gradebook (a second run stops).
    `progress`: a bar on a terminal, else a line every `progress_interval` seconds (autograder.progress)."""
    assignment_ids = resolve_assignments(opts.assignments)
    if not Path(opts.submissions).exists():  # before OUT is made: a mistyped path leaves nothing behind
        raise GradingRunError(f"{opts.submissions}: no such file or directory; pass the folder that holds the "
                              "submissions (nbgrader's submitted/), a folder of .ipynb files, or a .zip")
    out = Path(opts.out)
    made = _first_missing(out)  # OUT (and the folders above it) this run makes: unmade if it ends with nothing there
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GradingRunError(f"cannot create the output folder {out}: {exc.strerror}") from None
    course = course_root(Path(opts.submissions)) if Path(opts.submissions).is_dir() else None
    gradebook_path = Path(opts.gradebook or (course / "gradebook.db" if course else out / "gradebook.db"))
    try:
        with run_locks(f"autograde grade {' '.join(assignment_ids)}", out, gradebook_path):
            return _run_grading(opts, assignment_ids, out, course, gradebook_path, progress, progress_interval)
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None
    finally:
        if made is not None:
            _unmake(out, made, gradebook_path)


def _first_missing(path: Path) -> Path | None:
    """The outermost folder of `path` (itself included) that does not exist yet; None if it exists."""
    missing = None
    while not path.exists() and path != path.parent:
        missing, path = path, path.parent
    return missing


def _unmake(out: Path, top: Path, gradebook: Path) -> None:
    """OUT made by a run that wrote nothing there (a dry run, nothing found, a setting refused): its lock files
    removed, and OUT and the folders made for it up to `top`, if they are empty then."""
    locks = {out_lock(out), gradebook_lock(gradebook)}
    try:
        if any(entry not in locks for entry in out.iterdir()):
            return
        for lock in locks:
            if lock.parent == out:
                lock.unlink(missing_ok=True)
        folder = out
        while True:
            folder.rmdir()  # only an empty one
            if folder == top:
                return
            folder = folder.parent
    except OSError:
        return


def _no_results(out: Path, what: str = "results") -> GradingRunError:
    return GradingRunError(f"no stored {what} in {out / 'results'}: run `autograde grade` first", exit_code=1)


def gradebook_students(gradebook_path: Path) -> dict[str, dict]:
    """The gradebook's students (id -> email, named), without creating a gradebook that is not there."""
    if not Path(gradebook_path).is_file():
        return {}
    from autograder.recording.gradebook import CourseGradebook

    with CourseGradebook(gradebook_path) as gb:
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


def _run_grading(opts: RunOptions, assignment_ids: list[str], out: Path, course: Path | None, gradebook_path: Path,
                 progress: bool, progress_interval: float | None = None) -> RunSummary:
    state = ClassState.load(out)
    students = gradebook_students(gradebook_path)
    roster = roster_of(students, state.added_students)
    discovery = _discover(opts, assignment_ids, out, students, roster)
    found, id_flags, blank = _validated_ids(discovery.found)
    discovery.found = found
    discovery.skipped.extend(blank)
    record_failures: list[str] = []
    if not found and not discovery.conflicts and opts.students and not opts.dry_run:
        raise GradingRunError(_no_such_students(opts, assignment_ids, out, students, roster), exit_code=1)
    if not found and not discovery.conflicts and not opts.dry_run:
        raise GradingRunError(
            f"no submissions of {', '.join(assignment_ids)} in {opts.submissions}: expected nbgrader's layout "
            "<student>/<assignment>/<assignment>.ipynb, .ipynb files named after the student (and assignment), "
            "or a Canvas or Moodle download (--layout)" + "".join(f"\n  {safe_text(line, 2000)}" for line in discovery.lines()),
            exit_code=1)
    store = ResultStore(out)
    assignments = {a: load_assignment(a) for a in assignment_ids}
    config_course = settings_course(course, opts.course, gradebook_path)
    try:
        budget = submission_timeout(config_course, opts.submission_timeout)
        handin_settings = load_settings(config_course, opts.handin)
    except HandInError as exc:
        raise GradingRunError(str(exc)) from None
    try:
        memory.resolve(opts.memory_guard)  # a guard that cannot work here stops the run before anything is graded
    except memory.MemoryGuardUnavailable as exc:
        raise GradingRunError(str(exc)) from None
    defaults = Limits()
    limits = Limits(cell_timeout=defaults.cell_timeout if opts.cell_timeout is None else opts.cell_timeout,
                    probe_timeout=defaults.probe_timeout if opts.probe_timeout is None else opts.probe_timeout,
                    submission_timeout=budget,
                    submission_memory_bytes=(defaults.submission_memory_bytes if opts.memory_budget is None
                                             else opts.memory_budget),
                    memory_guard=opts.memory_guard)
    credit = 0.0 if opts.convention_credit is None else opts.convention_credit

    def graded(limits: Limits) -> dict:  # how the memory budget is enforced changes no grade: not in the key
        return {k: v for k, v in limits.to_dict().items() if k != "memory_guard"}

    try:  # before anything is graded: a run given other settings than OUT's stops here; what it is not given, it reuses
        settings, settings_changed = run_settings.reconcile(
            out, run_settings.grade_settings(handin_settings.policy, credit, graded(limits)),
            _given_settings(opts, config_course), opts.accept_new_settings, write=not opts.dry_run)
        stored_limits = settings["limits"]
        limits = replace(limits, **{k: float(stored_limits[k])
                                    for k in ("cell_timeout", "probe_timeout", "submission_timeout")},
                         submission_memory_bytes=int(stored_limits["submission_memory_bytes"]))
        credit = float(settings["convention_credit"])
        handin_settings = replace(handin_settings, policy=LatePolicy(**settings["late_policy"]),
                                  roster=frozenset(roster))
    except run_settings.SettingsChanged as exc:
        raise GradingRunError(str(exc)) from None
    except (LatePolicyError, TypeError, ValueError, KeyError) as exc:  # OUT/settings.json edited by hand
        raise GradingRunError(f"{out / run_settings.FILE}: {exc}; fix it, or pass the setting (and "
                              "--accept-new-settings)") from None
    opts = replace(opts, convention_credit=credit)
    graded_limits = graded(limits)
    secret = course_secret()
    try:
        tier = tiers.choose(opts.tier, opts.allow_weak_sandbox)
    except SandboxUnavailable as exc:
        raise GradingRunError(str(exc)) from None
    if opts.dry_run:  # validated as the real run validates (settings, memory guard, tier); nothing graded or written
        return RunSummary(out, [], 0, 0, gradebook_path, None, assignment_ids, discovery=discovery)
    keys = {a: grading_key(a, tier, graded_limits, opts.convention_credit, secret, run_all_cells=opts.run_all_cells)
            for a in assignment_ids}
    found_by_key = {(f.student_id, f.assignment_id): f for f in found}
    read = {key: _notebook_facts(f) for key, f in found_by_key.items()}  # (another assignment's, nothing answered)
    foreign = {key: facts[0] for key, facts in read.items()}
    unanswered = {key for key, facts in read.items() if facts[1]}

    todo: list[FoundSubmission] = []
    digests, cache_keys, skipped = {}, {}, 0
    ours: dict[tuple[str, str], dict] = {}  # the auto scores this grader last wrote, per submission
    for f in found:
        try:
            digest = notebook_digest(f.notebook)
        except OSError:
            digest = None  # graded anyway: reading it fails inside, as that submission's error status
        key = submission_key(keys[f.assignment_id], f.student_id, digest)
        stored = store.load(f.student_id, f.assignment_id)
        if stored is not None:
            ours[(f.student_id, f.assignment_id)] = {p.grade_id: p.auto_score for p in stored.result.parts}
        if not opts.force and stored is not None and key is not None and stored.cache_key == key:
            skipped += 1
            continue
        todo.append(f)
        digests[(f.student_id, f.assignment_id)], cache_keys[(f.student_id, f.assignment_id)] = digest, key

    feedback_root = course / "feedback" if course else None
    folders = {(f.student_id, f.assignment_id): f.folder for f in todo}
    executor = Executor(opts.executor, opts.workers, opts.scheduler, in_process=opts.in_process,
                        memory_bytes=opts.worker_memory_bytes)
    grading = GradingOptions(limits=limits, tier=tier, allow_weak_sandbox=opts.allow_weak_sandbox,
                             convention_credit=opts.convention_credit, run_all_cells=opts.run_all_cells, secret=secret)
    zygote = None
    if todo and in_process(executor, len(todo)):  # grading here: the warm parent starts before the heavy imports
        try:
            zygote = Zygote(environment.locate(), tier, limits.startup_timeout).launch()
        except (SandboxEnvironmentError, OSError) as exc:
            raise GradingRunError(str(exc)) from None
    elif todo:  # the workers start now: they import torch and warm up while this process does its own imports
        try:
            prestart(executor, grading, {f.assignment_id for f in todo}, len(todo))
        except OSError as exc:
            raise GradingRunError(f"cannot start a grading worker: {exc}") from None
        # the pages this process renders at the end import torch (the mistake catalogue): while the workers start
        threading.Thread(target=_import_reporting, daemon=True).start()
    from autograder.recording.autograded import autograded_missing, write_autograded
    from autograder.recording.gradebook import CourseGradebook

    try:
        grader = None
        if zygote is not None:
            from autograder.engine import Grader

            grader = Grader(grading, zygote)
    except (SandboxUnavailable, SandboxEnvironmentError) as exc:
        raise GradingRunError(str(exc)) from None

    restored: set[tuple[str, str]] = set()  # submissions whose auto scores something else had changed
    restored_feedback: set[tuple[str, str]] = set()  # ... and whose feedback page something else had replaced
    restored_autograded: set[tuple[str, str]] = set()  # ... and whose autograded notebook something else had removed

    on_roster = set(roster)
    was_on_roster = set(state.roster)  # what the last run into OUT took for the roster

    def off_roster(student_id: str) -> bool:
        """A submitter the roster does not have (a gradebook without a roster has none: everyone counts). Graded,
        reported and listed as "not on the roster"; nowhere else (gradebook, feedback/, autograded/) until the
        instructor adds them (`nbgrader db student add`)."""
        return bool(on_roster) and student_id not in on_roster

    def into_gradebook(gb: "CourseGradebook", result: SubmissionResult) -> None:
        """Not an unmapped LMS id (no student of the course) nor a submitter not on the roster; a student the
        gradebook did not have (it has no roster) is remembered as added by autograde, so that it is never taken
        for the roster. Auto scores something else wrote there since (`nbgrader autograde`) are replaced by ours,
        and counted."""
        if any(f.kind == FLAG_UNMAPPED for f in result.flags) or off_roster(result.student_id):
            return
        if result.student_id not in students and result.student_id not in state.added_students:
            state.added_students.append(result.student_id)
            state.save(out)  # before the gradebook has it: a crash in between never makes it look imported
        key = (result.student_id, result.assignment_id)
        replaced = gb.record(result, assignments.get(result.assignment_id) or load_assignment(result.assignment_id))
        if _replaced_foreign(replaced, ours.get(key)):
            restored.add(key)

    with _closing(grader), CourseGradebook(gradebook_path) as gb, gb.batch(), \
            Progress(len(todo), "grading", progress_interval, enabled=progress) as advance:
        # what recording a result needs from the gradebook, read for the whole class at once (one read per
        # submission costs about 20 ms), before grading: it travels with the jobs
        manual: dict[str, dict] = {}
        extensions: dict[str, dict] = {}

        def manual_grades(assignment_id: str, student_id: str) -> dict:
            if assignment_id not in manual:
                manual[assignment_id] = gb.class_manual_grades(assignments[assignment_id])
            return manual[assignment_id].get(student_id, {})

        def extension(assignment_id: str, student_id: str):
            if assignment_id not in extensions:
                extensions[assignment_id] = gb.class_extensions(assignment_id)
            return extensions[assignment_id].get(student_id)

        def assess_handin(result: SubmissionResult, found: FoundSubmission | None, foreign_: str | None):
            key = (result.student_id, result.assignment_id)
            return _assess_handin(result, found, handin_settings, gb.due_date(result.assignment_id),
                                  extension(result.assignment_id, result.student_id), foreign_, key in unanswered)

        def prepare(result: SubmissionResult) -> None:
            key = (result.student_id, result.assignment_id)
            sanitize_record(result)
            # the instructor's grades from formgrader first: they are part of the raw score the penalty is of
            result.apply_manual_grades(manual_grades(result.assignment_id, result.student_id))
            result.handin = assess_handin(result, found_by_key.get(key), foreign.get(key))
            if key in id_flags:
                result.handin = _with_flag(result.handin, id_flags[key])

        def write_files(result: SubmissionResult, digest: str | None, cache_key: str | None,
                        rendered: "Rendered | None" = None) -> None:
            """The result's files, as rendered where it was graded (`rendered`) or rendered here."""
            key = (result.student_id, result.assignment_id)
            html = write_report(out, result, rendered.report if rendered else None)
            listed_only = off_roster(result.student_id)  # in no file of nbgrader's until on the roster
            if course is not None and not listed_only:  # what formgrader and nbgrader's generate_feedback read
                write_autograded(course, result, found_by_key.get(key))
            if feedback_root is not None and not listed_only:
                write_feedback(feedback_root, result, folders.get(key) or _folder(found_by_key.get(key)),
                               assignments[result.assignment_id].source.name, html,
                               release_flagged=handin_settings.release_flagged_feedback)
            # last: this marks the submission done; an error of ours is never kept as "unchanged"
            if rendered is not None:
                store.save_encoded(result, rendered.result_file)
            else:
                store.save(result, digest or digests.get(key),
                           None if result.infrastructure_error else (cache_key or cache_keys.get(key)))

        def pending(result: SubmissionResult, digest: str | None = None, cache_key: str | None = None) -> Pending:
            """The result's recording: prepared once (when it is first staged), its gradebook writes repeatable."""
            done = [False]

            def stage():
                if not done[0]:
                    prepare(result)
                    done[0] = True
                into_gradebook(gb, result)

            return Pending(result, stage, lambda: write_files(result, digest, cache_key))

        def failed(what: Pending, exc: Exception) -> Pending:
            result = what.key
            return pending(_recording_failed(result, assignments[result.assignment_id], exc))

        def report(what: Pending, exc: Exception) -> None:
            result = what.key
            record_failures.append(f"{result.student_id}/{result.assignment_id}: {type(exc).__name__}: "
                                   f"{safe_text(exc, 300)}")

        # many results' gradebook writes in one transaction; their files after it commits (autograder.recording.batch)
        recorder = BatchRecorder(gb.commit, gb.rollback, failed, report)

        def record(result: SubmissionResult, digest: str | None = None, cache_key: str | None = None):
            """Record one result; whatever fails while recording it is that submission's error, not the run's."""
            recorder.add(pending(result, digest, cache_key))

        delivered = [0]  # results of this run's grading handed to the recorder

        def record_graded(result: SubmissionResult, rendered: dict | None = None) -> None:
            """A result as it comes from grading: finished and rendered there from its recording facts (then only
            its gradebook writes and its files are left), else recorded as any result."""
            delivered[0] += 1
            key = (result.student_id, result.assignment_id)
            files = checked(rendered, result, digests[key], cache_keys[key]) \
                if rendered is not None and key in digests else None
            if files is None:
                record(result)
            else:
                recorder.add(Pending(result, lambda: into_gradebook(gb, result),
                                     lambda: write_files(result, None, None, files)))
            advance(safe_text(f"{result.student_id}/{result.assignment_id}", 200))

        def recording_facts(f: FoundSubmission) -> dict | None:
            """What finishing `f`'s result needs, known before it is graded (autograder.recording.rendered); None:
            it is finished here after grading (and what goes wrong then is its failure)."""
            key = (f.student_id, f.assignment_id)
            try:
                handin, penalized = _handin_facts(f.student_id, f.assignment_id, f, handin_settings,
                                                  gb.due_date(f.assignment_id),
                                                  extension(f.assignment_id, f.student_id), foreign.get(key),
                                                  key in unanswered)
                if key in id_flags:
                    handin = _with_flag(handin, id_flags[key])
                return RecordingFacts(manual_grades(f.assignment_id, f.student_id), handin,
                                      handin_settings.policy if penalized else None, digests[key],
                                      cache_keys[key]).to_dict()
            except Exception:
                return None

        try:
            run_submissions([Submission(f.notebook, f.assignment_id, f.student_id, recording_facts(f)) for f in todo],
                            grading, record_graded, executor, grader, heartbeat=recorder.heartbeat)
        except (SandboxUnavailable, SandboxEnvironmentError, ExecutorError) as exc:
            recorder.flush()  # what was graded before stays graded
            raise GradingRunError(str(exc)) from None
        except KeyboardInterrupt:  # Ctrl-C: what was graded is kept (a second Ctrl-C waits until it is)
            previous = _ignore_sigint()
            try:
                recorder.interrupted()
            finally:
                _restore_sigint(previous)
            raise GradingInterrupted(out, delivered[0] - len(record_failures)) from None
        # results kept from an earlier run: their hand-in (a due date, an extension, the policy) may have changed
        for key, f in found_by_key.items():
            if key in digests:
                continue
            stored = store.load(*key)
            if stored is None:
                continue
            release = handin_settings.release_flagged_feedback and any(
                flag.kind == FLAG_IDENTITY for flag in stored.result.flags)
            graded_by_hand = stored.result.apply_manual_grades(
                manual_grades(f.assignment_id, f.student_id))  # since: in formgrader
            # scores something else wrote (nbgrader autograde): ours back, and our feedback (generate_feedback's went)
            recorder.stage_only(stored.result, lambda result=stored.result: into_gradebook(gb, result))
            overwritten = key in restored
            if feedback_root is not None and _foreign_feedback(feedback_root, stored.result):
                restored_feedback.add(key)  # `nbgrader generate_feedback` wrote its own page there
                overwritten = True
            if course is not None and autograded_missing(course, stored.result):
                restored_autograded.add(key)  # formgrader lists it as not autograded without it
                overwritten = True
            handin = assess_handin(stored.result, f, foreign.get(key))
            # on the roster since the last run (`nbgrader db student add`): its files of nbgrader's are written now
            joined = bool(was_on_roster) and key[0] not in was_on_roster and not off_roster(key[0])
            if release or graded_by_hand or overwritten or joined or handin != stored.result.handin:
                record(stored.result, stored.notebook_sha256, stored.cache_key)
        recorder.flush()
        results = store.all()  # every stored result, whatever this run graded
        graded_now = {(f.student_id, f.assignment_id) for f in todo}
        for result in results:  # what this run's assignments had graded before (cached, or before an
            key = (result.student_id, result.assignment_id)  # interruption): into the gradebook again, idempotent
            if result.assignment_id in assignment_ids and key not in graded_now:
                recorder.stage_only(result, lambda result=result: into_gradebook(gb, result))
        recorder.flush()
    _update_state(state, discovery, results, assignment_ids, opts.students, gradebook_path, roster)
    state.save(out)
    record_ = ClassRecord(results, roster, set(state.not_found), state.conflicts)
    write_exports(out, record_)
    return RunSummary(out, results, len(todo), skipped, gradebook_path, feedback_root, assignment_ids,
                      executor.usage, record_failures, discovery, record_, settings_changed,
                      restored=len(restored), restored_feedback=len(restored_feedback),
                      restored_autograded=len(restored_autograded),
                      settings_file=config_course / "nbgrader_config.py" if config_course else None,
                      release_flagged=handin_settings.release_flagged_feedback)


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


def _import_reporting() -> None:
    try:
        import autograder.reporting.class_summary  # noqa: F401
        import autograder.reporting.student_page  # noqa: F401
    except Exception:  # imported again where it is used, and fails there with its reason
        pass


def _notebook_facts(found: FoundSubmission) -> tuple[str | None, bool]:
    """What reading a found notebook says before it is graded: the other assignment it belongs to (its grade cells,
    else None), and whether nothing is answered in it: every code cell is one of the released notebook's
    (`release/`: answer stubs, demo and self-check cells; none added or changed) and every written answer is as
    released (or gone). Unreadable: (None, False): the grading says why."""
    import json

    from autograder.intake.reading import UnreadableNotebook, load_notebook_bytes

    try:
        nb = json.loads(load_notebook_bytes(found.notebook))
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
    except (UnreadableNotebook, ValueError, RecursionError, UnicodeDecodeError, TypeError):
        return None, False
    foreign = assignment_of_notebook(ids, found.assignment_id)
    if foreign is not None:
        return foreign, False
    released = _released(found.assignment_id)
    if released is None:
        return None, False
    released_code, released_written = released
    return None, code <= released_code and all(written.get(cell, stub) == stub
                                               for cell, stub in released_written.items())


@functools.lru_cache(maxsize=None)
def _released(assignment_id: str) -> tuple[frozenset[str], dict[str, str]] | None:
    """The assignment's notebook as students get it (release/<id>/<id>.ipynb): its code cells' sources, and its
    written answer cells (grade id -> source), stripped; None when there is no release."""
    import nbformat

    assignment = load_assignment(assignment_id)
    release = assignment.source.parent.parent.parent / "release" / assignment_id / assignment.source.name
    answers = {cell for part in assignment.parts for cell in part.answer_cells}
    try:
        nb = nbformat.read(release, as_version=4)
    except (OSError, ValueError):
        return None
    return (frozenset(c.source.strip() for c in nb.cells if c.cell_type == "code"),
            {c.metadata["nbgrader"]["grade_id"]: c.source.strip() for c in nb.cells
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


def _folder(found: FoundSubmission | None) -> Path | None:
    return found.folder if found is not None else None


def _assess_handin(result: SubmissionResult, found: FoundSubmission | None, settings: HandInSettings,
                   due, extension, foreign: str | None = None, unanswered: bool = False):
    """The submission's hand-in record (autograder.intake.handin): identity, time, lateness, penalty; and the flags of
    how it was found (an unmapped LMS id, another assignment's notebook, nothing answered). `due`, `extension`: the
    gradebook's."""
    if found is None:
        return result.handin  # not among this run's submissions: keep what was recorded
    handin, penalized = _handin_facts(result.student_id, result.assignment_id, found, settings, due, extension,
                                      foreign, unanswered)
    return with_penalty(handin, settings.policy, result.score, result.max_score) if penalized else handin


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


def rerender(out: Path, course: Path | None = None, notes: list[str] | None = None) -> int:
    """Reports, summary and exports again from OUT/results/, without grading; the roster from the course's
    gradebook (--course), else the gradebook the last `grade` used, else the roster it saw. With --course, the
    reports show the right hand answers after the due date as the course's c.Autograde.show_hand_answers_after_due
    says now; without it, as it said when each result was graded."""
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to re-render: OUT is not made (nor a lock file in it)
        raise _no_results(out)
    if course is not None and not Path(course).is_dir():
        raise GradingRunError(f"--course {course}: no such folder")
    try:
        with run_locks("autograde report", out, (course / "gradebook.db") if course else None):
            return _rerender(out, course, notes if notes is not None else [])
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None


def _rerender(out: Path, course: Path | None, notes: list[str]) -> int:
    store = ResultStore(out)
    results = store.all()
    if not results:
        raise _no_results(out)
    state = ClassState.load(out)
    gradebook = (course / "gradebook.db") if course else Path(state.gradebook) if state.gradebook else out / "gradebook.db"
    students = gradebook_students(gradebook)
    roster = roster_of(students, state.added_students) if students else list(state.roster)
    show_answers = None
    if course is not None:  # the course's setting now, not the one its results were graded under
        try:
            show_answers = show_hand_answers_after_due(course)
        except HandInError as exc:
            raise GradingRunError(str(exc)) from None
    for result in results:
        if show_answers is not None and result.handin is not None:
            result.handin.show_answers_after_due = show_answers
        html = write_report(out, result)
        if course is not None and (not roster or result.student_id in roster):  # not on the roster: no feedback
            folder = course / "submitted" / nbgrader_folder_name(result.student_id) / result.assignment_id
            write_feedback(course / "feedback", result, folder, f"{result.assignment_id}.ipynb", html)
    record = ClassRecord(results, roster, set(state.not_found), state.conflicts)
    write_exports(out, record)
    notes += record.lines(out)  # what grades.csv leaves out and what it keeps unseen, as `grade` prints it
    return len(results)


def forget(out: Path, student_id: str, assignment: str, dry_run: bool = False) -> list[str]:
    """The instructor's explicit removal of one stored result (the only way a result leaves the exports): its
    results file, its report, its place in OUT/class.json and its submission in the gradebook the last `grade`
    used; the exports rebuilt. Returns what was (or with `dry_run`, would be) removed."""
    (assignment_id,) = resolve_assignments([assignment])
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to forget: OUT is not made
        raise GradingRunError(f"no stored result of {student_id}/{assignment_id} in {out / 'results'}", exit_code=1)
    try:
        with run_locks("autograde forget", out):
            store = ResultStore(out)
            if store.load(student_id, assignment_id) is None:
                raise GradingRunError(f"no stored result of {student_id}/{assignment_id} in {out / 'results'}",
                                      exit_code=1)
            state = ClassState.load(out)
            from autograder.recording.outputs import safe_name

            files = [p for p in (store.path(student_id, assignment_id),
                                 out / "reports" / safe_name(student_id) / f"{assignment_id}.html") if p.exists()]
            gradebook = Path(state.gradebook) if state.gradebook else None
            done = [f"removed {p}" for p in files]
            if gradebook is not None and gradebook.exists():
                done.append(f"removed {student_id}'s {assignment_id} submission from {gradebook}")
            if dry_run:
                return [line.replace("removed", "would remove", 1) for line in done]
            if gradebook is not None and gradebook.exists():
                from autograder.recording.gradebook import CourseGradebook

                book = CourseGradebook(gradebook)
                try:
                    book.gb.remove_submission(assignment_id, student_id)
                except Exception:  # nbgrader's MissingEntry: nothing of it in the gradebook
                    done.pop()
                finally:
                    book.close()
            for path in files:
                path.unlink()
            state.not_found = [k for k in state.not_found if tuple(k) != (student_id, assignment_id)]
            state.conflicts = [c for c in state.conflicts if (c[0], c[1]) != (student_id, assignment_id)]
            state.save(out)
            results = store.all()
            students = gradebook_students(gradebook) if gradebook is not None and gradebook.exists() else {}
            roster = roster_of(students, state.added_students) if students else list(state.roster)
            write_exports(out, ClassRecord(results, roster, set(state.not_found), state.conflicts))
            return done
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None


def fill_lms_gradebook(out: Path, assignment: str, lms_gradebook: Path, column: str | None = None) -> "lms.FillReport":
    """The LMS's exported gradebook with the assignment's final scores (what grades.csv counts), written to
    OUT/lms/<its name>; its students mapped to the roster as `--lms-roster` maps them."""
    (assignment_id,) = resolve_assignments([assignment])
    out = Path(out)
    if not (out / "results").is_dir():  # nothing to fill in: OUT is not made
        raise GradingRunError(f"no stored results of {assignment_id} in {out / 'results'}: grade it first", exit_code=1)
    try:
        with run_locks("autograde lms-grades", out):
            results = ResultStore(out).all()
            if not any(r.assignment_id == assignment_id for r in results):
                raise GradingRunError(f"no stored results of {assignment_id} in {out / 'results'}: grade it first",
                                      exit_code=1)
            state = ClassState.load(out)
            students = gradebook_students(Path(state.gradebook)) if state.gradebook else {}
            roster = roster_of(students, state.added_students) if students else list(state.roster)
            record = ClassRecord(results, roster, set(state.not_found), state.conflicts)
            scores = {r.student_id: r.final_score for r in record.counted() if r.assignment_id == assignment_id}
            export = lms.read_export(lms_gradebook)
            emails = {s: students.get(s, {}).get("email", "") for s in roster}
            filled = lms.fill_gradebook(export, assignment_id, scores, emails,
                                        out / "lms" / Path(lms_gradebook).name, column)
            from autograder.recording.outputs import safe_name

            reports = {r.student_id: out / "reports" / safe_name(r.student_id) / f"{assignment_id}.html"
                       for r in results if r.assignment_id == assignment_id}
            filled.feedback = lms.lms_feedback(export, assignment_id, reports, emails, out / "lms")
            return filled
    except LockedError as exc:
        raise GradingRunError(str(exc)) from None
    except lms.LmsError as exc:
        raise GradingRunError(str(exc)) from None


def import_roster(course: Path, roster_csv: Path) -> None:
    """`nbgrader db student import` into the course's gradebook (the roster is nbgrader's)."""
    from autograder.recording.gradebook import run_nbgrader

    done = run_nbgrader(["db", "student", "import", str(roster_csv)], course)
    if done.returncode != 0:
        raise GradingRunError(f"nbgrader db student import failed: {done.stderr[-500:]}")


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


@contextlib.contextmanager
def _closing(grader: "Grader | None"):
    try:
        yield grader
    finally:
        if grader is not None:
            grader.close()
