"""A grading run, as `autograde grade` does it: find, grade, record, report; resumable.

Each graded submission is recorded in this order: the gradebook (one transaction), its report (and
nbgrader feedback), and last its result file, which marks it done, with its cache key (autograder.cache).
A run killed at any point and started again grades exactly what has no result file under the same key
yet, and rewrites the other stored results into the gradebook (idempotent), so results and gradebook end
up as an uninterrupted run would leave them.
"""

import contextlib
import os
import shutil
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.assignments import load_assignment
from autograder.cache import grading_key, submission_key
from autograder.course import course_secret
from autograder.discovery import DiscoveryError, FoundSubmission, course_root, find_submissions
from autograder.executors import Executor, ExecutorError, in_process, run_submissions
from autograder.handin import HandInError, HandInOptions, HandInSettings, assess, load_settings
from autograder.outputs import (ResultStore, atomic_write, notebook_digest, safe_name, write_grades_csv,
                                write_results_json)
from autograder.results import FLAG_IDENTITY, STATUS_ERROR, SubmissionResult
from autograder.sandbox import environment, tiers
from autograder.sandbox.environment import SandboxEnvironmentError
from autograder.sandbox.limits import Limits
from autograder.sandbox.tiers import SandboxUnavailable
from autograder.sandbox.zygote import Zygote

# The engine (torch), the gradebook (nbgrader) and the executors' workers are imported inside run_grading,
# after the sandbox's warm parent is launched: it warms up meanwhile (a one-submission run takes seconds less).
if TYPE_CHECKING:
    from autograder.engine import Grader
    from autograder.gradebook import CourseGradebook
from solutions import ASSIGNMENTS


class GradingRunError(Exception):
    """The run could not start: a message naming the file and what to do, and the exit code."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class RunOptions:
    assignments: list[str]
    submissions: Path
    out: Path
    students: set[str] = field(default_factory=set)
    resume: bool = False  # kept for scripts: unchanged submissions are never regraded anyway (see `force`)
    force: bool = False  # regrade even what the cache says is unchanged
    workers: int = 1  # local worker processes (1: grade in this process)
    executor: str = "local"  # or "dask"
    scheduler: str | None = None  # dask: an existing cluster's scheduler address
    gradebook: Path | None = None
    tier: str | None = None
    allow_weak_sandbox: bool = False
    cell_timeout: float = 30.0
    probe_timeout: float = 30.0
    convention_credit: float = 0.0
    handin: HandInOptions = field(default_factory=HandInOptions)  # late policy and exchange checks (CLI overrides)


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
    restored: int = 0  # submissions whose auto scores in the gradebook had been changed by something else
    restored_feedback: int = 0  # submissions whose feedback page something else had replaced

    def rows(self) -> list[tuple]:
        rows = []
        for a in self.assignment_ids:
            rs = [r for r in self.results if r.assignment_id == a]
            if not rs:
                continue
            scores = [r.final_score for r in rs]
            failures = sum(r.status == STATUS_ERROR for r in rs)
            rows.append((a, len(rs), statistics.mean(scores), statistics.median(scores), rs[0].max_score, failures))
        return rows

    def print(self) -> None:
        from rich.console import Console
        from rich.table import Table

        console = Console()
        table = Table(title="Grading summary")
        for column in ("assignment", "students", "mean", "median", "max", "failures"):
            table.add_column(column, justify="left" if column == "assignment" else "right")
        for a, n, mean, median, max_score, failures in self.rows():
            table.add_row(a, str(n), f"{mean:.2f}", f"{median:.2f}", f"{max_score:g}", str(failures))
        console.print(table)
        console.print(f"graded {self.graded_now} submission(s); {self.skipped} unchanged since they were graded "
                      "(cached; --force regrades them)")
        console.print(f"results:  {self.out / 'results.json'}  and  {self.out / 'grades.csv'}")
        console.print(f"reports:  {self.out / 'reports'}/<student>/<assignment>.html")
        console.print(f"summary:  {self.out / 'summary.html'}")
        console.print(f"gradebook: {self.gradebook}  (nbgrader export)")
        if self.restored:
            console.print(f"gradebook: restored autograde's scores of {self.restored} submission(s) whose auto scores "
                          "had been changed since they were graded (e.g. by `nbgrader autograde`)")
        if self.restored_feedback:
            console.print(f"feedback: restored autograde's reports of {self.restored_feedback} submission(s) that had "
                          "been replaced (e.g. by `nbgrader generate_feedback`)")
        pending = [r for r in self.results if r.pending_points]
        if pending:
            console.print(f"pending: {len(pending)} submission(s) have written answers to grade by hand "
                          f"({sum(r.pending_points for r in pending):g} points): formgrader (README)")
        if self.feedback:
            console.print(f"feedback: {self.feedback}/<student>/<assignment>/  (nbgrader release_feedback)")


def resolve_assignments(names: list[str]) -> list[str]:
    if not names:
        raise GradingRunError("name at least one assignment, or `all`")
    if "all" in names:
        return list(ASSIGNMENTS)
    unknown = [n for n in names if n not in ASSIGNMENTS]
    if unknown:
        raise GradingRunError(f"no such assignment: {', '.join(unknown)}; the assignments are: {', '.join(ASSIGNMENTS)} "
                              "(or `all`)")
    return list(dict.fromkeys(names))


def run_grading(opts: RunOptions, progress: bool = False) -> RunSummary:
    assignment_ids = resolve_assignments(opts.assignments)
    out = Path(opts.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise GradingRunError(f"cannot create the output folder {out}: {exc.strerror}") from None
    try:
        found = find_submissions(Path(opts.submissions), assignment_ids, opts.students or None,
                                 unpack_to=out / "unpacked")
    except DiscoveryError as exc:
        raise GradingRunError(str(exc)) from None
    if not found:
        raise GradingRunError(
            f"no submissions of {', '.join(assignment_ids)} in {opts.submissions}: expected nbgrader's layout "
            "<student>/<assignment>/<assignment>.ipynb, or .ipynb files named after the student (and assignment)",
            exit_code=1)
    course = course_root(Path(opts.submissions)) if Path(opts.submissions).is_dir() else None
    gradebook_path = opts.gradebook or (course / "gradebook.db" if course else out / "gradebook.db")
    store = ResultStore(out)
    assignments = {a: load_assignment(a) for a in assignment_ids}
    limits = Limits(cell_timeout=opts.cell_timeout, probe_timeout=opts.probe_timeout)
    secret = course_secret()
    try:
        tier = tiers.choose(opts.tier, opts.allow_weak_sandbox)
    except SandboxUnavailable as exc:
        raise GradingRunError(str(exc)) from None
    keys = {a: grading_key(a, tier, limits.to_dict(), opts.convention_credit, secret) for a in assignment_ids}
    try:
        handin_settings = load_settings(course, opts.handin)
    except HandInError as exc:
        raise GradingRunError(str(exc)) from None
    found_by_key = {(f.student_id, f.assignment_id): f for f in found}

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
    executor = Executor(opts.executor, opts.workers, opts.scheduler)
    zygote = None
    if todo and in_process(executor, len(todo)):  # grading here: the warm parent starts before the heavy imports
        try:
            zygote = Zygote(environment.locate(), tier, limits.startup_timeout).launch()
        except (SandboxEnvironmentError, OSError) as exc:
            raise GradingRunError(str(exc)) from None
    from autograder.autograded import write_autograded
    from autograder.engine import Grader, GradingOptions, Submission
    from autograder.gradebook import CourseGradebook

    grading = GradingOptions(limits=limits, tier=tier, allow_weak_sandbox=opts.allow_weak_sandbox,
                             convention_credit=opts.convention_credit, secret=secret)
    try:
        grader = Grader(grading, zygote) if zygote is not None else None
    except (SandboxUnavailable, SandboxEnvironmentError) as exc:
        raise GradingRunError(str(exc)) from None

    restored: set[tuple[str, str]] = set()  # submissions whose auto scores something else had changed
    restored_feedback: set[tuple[str, str]] = set()  # ... and whose feedback page something else had replaced

    with _closing(grader), CourseGradebook(gradebook_path) as gb, _progress(progress, len(todo)) as advance:
        def into_gradebook(result: SubmissionResult) -> None:
            key = (result.student_id, result.assignment_id)
            if _replaced_foreign(gb.record(result, assignments[result.assignment_id]), ours.get(key)):
                restored.add(key)

        def record(result: SubmissionResult, digest: str | None = None, cache_key: str | None = None):
            key = (result.student_id, result.assignment_id)
            # the instructor's grades from formgrader first: they are part of the raw score the penalty is of
            result.apply_manual_grades(gb.manual_grades(assignments[result.assignment_id], result.student_id))
            result.handin = _assess_handin(result, found_by_key.get(key), handin_settings, gb)
            into_gradebook(result)
            html = write_report(out, result)
            if course is not None:  # what formgrader and nbgrader's generate_feedback read
                write_autograded(course, result, found_by_key.get(key))
            if feedback_root is not None:
                write_feedback(feedback_root, result, folders.get(key) or _folder(found_by_key.get(key)),
                               assignments[result.assignment_id].source.name, html,
                               release_flagged=handin_settings.release_flagged_feedback)
            # last: this marks the submission done
            store.save(result, digest or digests.get(key), cache_key or cache_keys.get(key))

        try:
            run_submissions([Submission(f.notebook, f.assignment_id, f.student_id) for f in todo], grading,
                            lambda result: (record(result), advance(result)), executor, grader)
        except (SandboxUnavailable, SandboxEnvironmentError, ExecutorError) as exc:
            raise GradingRunError(str(exc)) from None
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
                gb.manual_grades(assignments[f.assignment_id], f.student_id))  # since: in formgrader
            # scores something else wrote (nbgrader autograde): ours back, and our feedback (generate_feedback's went)
            into_gradebook(stored.result)
            overwritten = key in restored
            if feedback_root is not None and _foreign_feedback(feedback_root, stored.result):
                restored_feedback.add(key)  # `nbgrader generate_feedback` wrote its own page there
                overwritten = True
            if (release or graded_by_hand or overwritten
                    or _assess_handin(stored.result, f, handin_settings, gb) != stored.result.handin):
                record(stored.result, stored.notebook_sha256, stored.cache_key)
        results = store.all(assignment_ids)
        graded_now = {(f.student_id, f.assignment_id) for f in todo}
        for result in results:  # what was graded before (cached, or before an interruption): into the gradebook
            if (result.student_id, result.assignment_id) not in graded_now:  # again, idempotent
                into_gradebook(result)
        roster = gb.roster()
    write_exports(out, results, roster, assignment_ids)
    return RunSummary(out, results, len(todo), skipped, gradebook_path, feedback_root, assignment_ids,
                      executor.usage, restored=len(restored), restored_feedback=len(restored_feedback))


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
                   gb: "CourseGradebook"):
    """The submission's hand-in record (autograder.handin): identity, time, lateness, penalty."""
    if found is None:
        return result.handin  # not among this run's submissions: keep what was recorded
    return assess(result, found.folder, found.notebook, settings, gb.due_date(result.assignment_id),
                  gb.extension(result.assignment_id, result.student_id))


def write_report(out: Path, result: SubmissionResult) -> str:
    """The student's report under OUT/reports/; returns its HTML (the feedback is the same page)."""
    from autograder.report import render_report

    html = render_report(result)
    atomic_write(out / "reports" / safe_name(result.student_id) / f"{result.assignment_id}.html", html, durable=False)
    return html


def nbgrader_folder_name(student_id: str) -> str:
    """The student's folder name in nbgrader's feedback/ and submitted/: the id itself, as nbgrader has it, unless
    the id is no single folder name (`/`, `..`: possible only through the API), which gets its escaped form."""
    plain = student_id not in ("", ".", "..") and "/" not in student_id and "\0" not in student_id
    return student_id if plain else safe_name(student_id)


def write_feedback(feedback_root: Path, result: SubmissionResult, submission_folder: Path | None,
                   notebook_name: str, html: str, release_flagged: bool = False) -> None:
    """The report where nbgrader expects feedback, with the files `nbgrader release_feedback` reads beside it.

    A submission the OS says someone else wrote gets no feedback here (its report would go to whoever
    made it): the instructor decides, then grades again with --release-flagged-feedback.
    """
    folder = feedback_root / nbgrader_folder_name(result.student_id) / result.assignment_id
    page = folder / (Path(notebook_name).stem + ".html")
    if not release_flagged and any(f.kind == FLAG_IDENTITY for f in result.flags):
        page.unlink(missing_ok=True)
        return
    atomic_write(page, html, durable=False)
    os.chmod(page, 0o644)  # release_feedback copies the mode into the exchange: students must read it
    for name in ("timestamp.txt", "submission_secret.txt"):
        source = submission_folder / name if submission_folder else None
        if source is not None and source.is_file() and not source.is_symlink():
            atomic_write(folder / name, source.read_bytes(), durable=False)


def write_exports(out: Path, results: list[SubmissionResult], roster: list[str], assignment_ids: list[str]) -> None:
    from autograder.report import render_summary

    write_results_json(results, out / "results.json")
    write_grades_csv(results, roster, assignment_ids, out / "grades.csv")
    atomic_write(out / "summary.html", render_summary(results, roster))


def rerender(out: Path, course: Path | None = None) -> int:
    """Reports, summary and exports again from OUT/results/, without grading."""
    store = ResultStore(out)
    results = store.all()
    if not results:
        raise GradingRunError(f"no stored results in {out / 'results'}: run `autograde grade` first", exit_code=1)
    roster: list[str] = []
    gradebook = (course / "gradebook.db") if course else (out / "gradebook.db")
    if gradebook.exists():
        from autograder.gradebook import CourseGradebook

        with CourseGradebook(gradebook) as gb:
            roster = gb.roster()
    for result in results:
        html = write_report(out, result)
        if course is not None:
            folder = course / "submitted" / nbgrader_folder_name(result.student_id) / result.assignment_id
            write_feedback(course / "feedback", result, folder, f"{result.assignment_id}.ipynb", html)
    assignment_ids = [a for a in ASSIGNMENTS if any(r.assignment_id == a for r in results)]
    write_exports(out, results, roster, assignment_ids)
    return len(results)


def import_roster(course: Path, roster_csv: Path) -> None:
    """`nbgrader db student import` into the course's gradebook (the roster is nbgrader's)."""
    from autograder.gradebook import run_nbgrader

    done = run_nbgrader(["db", "student", "import", str(roster_csv)], course)
    if done.returncode != 0:
        raise GradingRunError(f"nbgrader db student import failed: {done.stderr[-500:]}")


DEMO_LIMITS = dict(cell_timeout=10.0, probe_timeout=10.0)  # the hostile student's endless loop costs 10 s, not 30


def run_demo(out: Path, tier: str | None = None) -> RunSummary:
    """The bundled example class as an nbgrader course, graded: what the README's first command shows."""
    from autograder.demo.build import DEMO_MARKER, build_demo_course

    out = Path(out)
    if (out / DEMO_MARKER).exists():  # a previous demo: start its grading afresh
        for name in ("autograde", "feedback"):
            shutil.rmtree(out / name, ignore_errors=True)
        (out / "gradebook.db").unlink(missing_ok=True)
    try:
        demo = build_demo_course(out)
    except FileExistsError as exc:
        raise GradingRunError(str(exc)) from None
    import_roster(demo.root, demo.roster_csv)
    from autograder.executors import default_workers

    return run_grading(RunOptions(assignments=["all"], submissions=demo.root / "submitted",
                                  out=demo.root / "autograde", tier=tier, workers=default_workers(), **DEMO_LIMITS),
                       progress=True)


@contextlib.contextmanager
def _closing(grader: "Grader | None"):
    try:
        yield grader
    finally:
        if grader is not None:
            grader.close()


class _progress:
    """A rich progress bar over the submissions (or nothing, for the API)."""

    def __init__(self, enabled: bool, total: int):
        self.enabled, self.total = enabled, total

    def __enter__(self):
        if not self.enabled or self.total == 0:
            return lambda result: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                            TextColumn("{task.description}"))
        self.bar.start()
        task = self.bar.add_task("", total=self.total)

        def advance(result):
            self.bar.update(task, advance=1, description=f"{result.student_id}/{result.assignment_id}")

        return advance

    def __exit__(self, *exc):
        if getattr(self, "bar", None) is not None:
            self.bar.stop()
