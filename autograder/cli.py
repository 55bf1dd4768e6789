"""The `autograde` command line: a thin layer over the Python API (autograder.run and friends)."""

import gc
import sys
from pathlib import Path
from typing import Literal

import typer

from autograder import __version__
from autograder.intake.late import METHODS as LATE_POLICIES
from autograder.intake.lms import LAYOUTS
from autograder.running.sandbox.memory import GUARDS as MEMORY_GUARDS
from autograder.running.sandbox.tiers import TIERS

from autograder.assignments import AssignmentRecordError, assignment_ids


def _course_help() -> str:
    """The first line of `autograde --help`: the course's assignments, as their records list them."""
    try:
        ids = assignment_ids()
    except AssignmentRecordError as error:
        return f"Grade the chapter's assignments (their records cannot be read: {error})."
    return f"Grade the chapter's {len(ids)} assignments ({', '.join(ids)})."


class _Help:
    """Help without type labels where the option says it all: `--force`, not `--force <bool>`; a list's items are
    named by the option (`--student ID`), not `<list[str]>`."""

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for param in params:
            if getattr(param, "is_flag", False) and param.metavar is None:
                param.metavar = ""
            elif param.metavar is None and param.display_type(ctx).startswith("<list["):
                param.display_type_rich = lambda ctx: None  # an argument: its name column says `assignments...`
        if params and any(getattr(p, "rich_help_panel", None) for p in params[:-1]):
            params[-1].rich_help_panel = "Help"  # --help last, after the command's own panels
        return params


class _Command(_Help, typer.core.TyperCommand):
    pass


class _Group(_Help, typer.core.TyperGroup):
    pass


app = typer.Typer(
    cls=_Group,
    help=_course_help(),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_BAD_INPUT = 2  # bad arguments, no such assignment, unreadable folder
EXIT_NOTHING = 1  # nothing to grade
EXIT_CHECK_BUG = 3  # every result is written, but a check raised on the reference's output too, or its diagnosis raised (a bug of ours)
EXIT_INTERRUPTED = 130  # Ctrl-C: what was graded is kept (128 + SIGINT, as shells report it)
# `grade --help` ends with them (the README's "Exit status" says the same)
EXIT_STATUSES = "\n\n".join([
    "[b]Exit status[/b]",
    "0  grading ran, whatever the scores",
    "1  nothing to grade (no submissions found, no such student)",
    "2  bad use: arguments, no such assignment or folder, bad settings, settings that differ from "
    "OUT/settings.json, another run holding the lock",
    "3  every result is written, but a check failed on the reference too or its diagnosis raised (or a result "
    "could not be recorded): fix the check and grade again",
    f"{EXIT_INTERRUPTED}  interrupted (Ctrl-C): what was graded is kept; the same command grades the rest",
])


# the options with a fixed set of values: parsed as choices, so that `--help` lists them and every command (also
# `grade --dry-run`) refuses anything else with exit 2 before it does anything
Executor = Literal["local", "dask"]
SandboxTier = Literal[TIERS]
MemoryGuard = Literal[MEMORY_GUARDS]
LatePolicyName = Literal[LATE_POLICIES]
Layout = Literal[LAYOUTS]

# `grade --help` in panels, in the order a run is thought through
PANEL_WHAT = "What to grade"
PANEL_WHERE = "Where to write"
PANEL_POLICY = "Policy: lateness, hand-in checks, credit, regrading"
PANEL_LIMITS = "Limits per submission"
PANEL_SANDBOX = "Sandbox"
PANEL_SCALE = "Scale and progress"


def _print_version(value: bool):
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the grader version and exit."),
):
    """Grade the chapter's assignments (the full line is the app's help: _course_help)."""


def parse_bytes(text: str) -> int:
    """A size such as 4G, 1536M, 512MiB or 1073741824 (bytes); K, M, G are powers of 1024."""
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", text or "", re.IGNORECASE)
    if not match:
        raise ValueError(f"not a size: {text!r} (e.g. 4G, 1536M)")
    value = float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " ")
    if value < 256 * 1024**2:
        raise ValueError(f"a memory budget of {text} is too small: a sandbox needs at least 256M")
    return int(value)


def fail(message: str, code: int = EXIT_BAD_INPUT):
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


@app.command(cls=_Command, epilog=EXIT_STATUSES)
def grade(
    assignments: list[str] = typer.Argument(..., help="Assignment ids to grade, or `all`."),
    submissions: Path = typer.Option(..., "--submissions", "-s",
                                     help="nbgrader's submitted/ folder (or the course folder), a folder of .ipynb "
                                          "files, or an LMS .zip.", rich_help_panel=PANEL_WHAT),
    student: list[str] = typer.Option(None, "--student", metavar="ID", help="Grade only these students (repeatable).",
                                      rich_help_panel=PANEL_WHAT),
    run_all_cells: bool = typer.Option(
        False, "--run-all-cells",
        help="Run every cell, as nbgrader does, also the instructor's demo and plot cells a student left unchanged "
             "(skipped by default: they define nothing the grading reads).", rich_help_panel=PANEL_WHAT),
    layout: Layout = typer.Option("auto", "--layout",
                                  help="How --submissions names students (auto: recognised).",
                                  rich_help_panel=PANEL_WHAT),
    lms_roster: Path = typer.Option(None, "--lms-roster",
                                    help="The LMS's roster export that maps its ids to nbgrader's roster: Canvas's "
                                         "gradebook CSV, or Moodle's grading worksheet CSV.",
                                         rich_help_panel=PANEL_WHAT),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Print what would be graded (student, assignment, file, how the id was found) "
                                      "and what would be skipped; grade nothing.", rich_help_panel=PANEL_WHAT),
    course: Path = typer.Option(
        None, "--course", help="The course folder whose nbgrader_config.py holds the settings (late policy, limits, "
                               "time zone) when --submissions is not its submitted/ (an LMS zip, a folder); default: "
                               "the --gradebook's folder, else the current folder, if it holds nbgrader_config.py.",
                               rich_help_panel=PANEL_WHAT),
    out: Path = typer.Option(Path("autograde-out"), "--out", "-o", help="Where results, reports and CSV go.",
                             rich_help_panel=PANEL_WHERE),
    gradebook: Path = typer.Option(None, "--gradebook",
                                   help="nbgrader gradebook to write; default: the course's gradebook.db when grading "
                                        "a course's submitted/, else OUT/gradebook.db.", rich_help_panel=PANEL_WHERE),
    release_flagged_feedback: bool = typer.Option(
        False, "--release-flagged-feedback",
        help="Also write feedback for submissions whose OS owner is not the student (withheld by default).",
        rich_help_panel=PANEL_WHERE),
    resume: bool = typer.Option(False, "--resume", help="Kept for scripts: what is unchanged since it was graded in OUT "
                                                        "is never graded again (see --force).",
                                                        rich_help_panel=PANEL_POLICY),
    force: bool = typer.Option(False, "--force", help="Regrade everything, even submissions unchanged since they were "
                                                      "graded under the same checks, grader version and limits.",
                                                      rich_help_panel=PANEL_POLICY),
    convention_credit: float = typer.Option(
        None, min=0.0, max=1.0,
        help="Share of a check's points kept when it fails only by another convention (RoPE half-split pairing, "
             "the chapter's h % num_kv_heads GQA mapping); the report explains the pinned convention either way "
             "(default: what OUT was graded with, else 0).", rich_help_panel=PANEL_POLICY),
    late_policy: LatePolicyName = typer.Option(None, "--late-policy",
                                               help="Overrides c.Autograde.late_policy in nbgrader_config.py.",
                                               rich_help_panel=PANEL_POLICY),
    late_points: float = typer.Option(None, "--late-points", help="fixed: points off a late submission.",
                                      rich_help_panel=PANEL_POLICY),
    late_percent: float = typer.Option(None, "--late-percent",
                                       help="percent_per_hour/day: percent of the maximum per started hour/day.",
                                       rich_help_panel=PANEL_POLICY),
    late_cap_percent: float = typer.Option(None, "--late-cap-percent",
                                           help="The total late penalty at most this percent of the maximum.",
                                           rich_help_panel=PANEL_POLICY),
    exchange: Path = typer.Option(None, "--exchange", help="nbgrader's exchange root (default: c.Exchange.root).",
                                  rich_help_panel=PANEL_POLICY),
    course_id: str = typer.Option(None, "--course-id", help="The course id (default: c.CourseDirectory.course_id).",
                                  rich_help_panel=PANEL_POLICY),
    time_tolerance: float = typer.Option(None, "--time-tolerance",
                                         help="Seconds timestamp.txt may differ from when the exchange saw the "
                                              "submission land (default 120).", rich_help_panel=PANEL_POLICY),
    accept_new_settings: bool = typer.Option(
        False, "--accept-new-settings",
        help="Grade under the settings this run is given (options, nbgrader_config.py) where they differ from "
             "OUT/settings.json (which they replace); settings not given are always OUT's.",
             rich_help_panel=PANEL_POLICY),
    cell_timeout: float = typer.Option(None, help="Seconds per notebook cell (default: what OUT was graded with, "
                                                  "else 30).", rich_help_panel=PANEL_LIMITS),
    probe_timeout: float = typer.Option(None, help="Seconds per check's call into student code (default: what OUT "
                                                   "was graded with, else 30).", rich_help_panel=PANEL_LIMITS),
    submission_timeout: float = typer.Option(
        None, "--submission-timeout", help="Seconds of wall clock for one whole submission: cells, restarts after a "
                                           "crash, replays and checks (default: c.Autograde.submission_timeout, "
                                           "else what OUT was graded with, else 300).", rich_help_panel=PANEL_LIMITS),
    memory_budget: str | None = typer.Option(
        None, "--memory-budget", help="Memory for all of one submission's processes together, e.g. 4G, 1536M; "
                                      "over it the submission ends with 内存超出限制 and the batch goes on "
                                      "(default: what OUT was graded with, else 4G).", rich_help_panel=PANEL_LIMITS),
    memory_guard: MemoryGuard = typer.Option(
        "auto", "--memory-guard", help="How the memory budget is enforced: cgroup (a cgroup per sandbox under the "
                                       "grader's own; needs root and the memory controller), watchdog (the grader "
                                       "sums the submission's PSS), or auto (cgroup where it works).",
                                       rich_help_panel=PANEL_LIMITS),
    sandbox: SandboxTier = typer.Option(None, "--sandbox", help="Isolation tier (default: the strongest that works "
                                                                "here).", rich_help_panel=PANEL_SANDBOX),
    allow_weak_sandbox: bool = typer.Option(False, "--allow-weak-sandbox",
                                            help="Fall back to rlimits-only isolation if nothing stronger works.",
                                            rich_help_panel=PANEL_SANDBOX),
    workers: int = typer.Option(None, "--workers", "-j", min=1,
                                help="Worker processes on this machine (default: $AUTOGRADE_WORKERS, else the number of cores), or the "
                                     "LocalCluster's workers with --executor dask.", rich_help_panel=PANEL_SCALE),
    executor: Executor = typer.Option("local", "--executor", help="local (worker processes here) or dask (a Dask "
                                                             "LocalCluster, or the cluster of --scheduler).",
                                                             rich_help_panel=PANEL_SCALE),
    scheduler: str = typer.Option(None, "--scheduler", help="Address of an existing Dask scheduler "
                                                           "(tcp://host:8786); implies --executor dask.",
                                                           rich_help_panel=PANEL_SCALE),
    progress_interval: float = typer.Option(
        None, "--progress-interval", min=0.0,
        help="Seconds between progress lines when the output is not a terminal (a log file, CI; a terminal shows a "
             "bar): default $AUTOGRADE_PROGRESS_INTERVAL, else 10; 0: none.", rich_help_panel=PANEL_SCALE),
):
    """Grade submissions: results.json, grades.csv, one report per student, summary.html, and the gradebook."""
    from autograder.run import GradingInterrupted, GradingRunError, RunOptions, interrupted_message, run_grading
    from autograder.intake.handin import HandInOptions

    handin = HandInOptions(late_policy=late_policy, late_points=late_points, late_percent=late_percent,
                           late_cap_percent=late_cap_percent, time_tolerance=time_tolerance, exchange=exchange,
                           course_id=course_id, release_flagged_feedback=release_flagged_feedback)

    from autograder.jobs.executors import default_workers

    try:
        budget_bytes = None if memory_budget is None else parse_bytes(memory_budget)
        workers = workers or default_workers()
    except ValueError as exc:
        fail(str(exc))
    options = RunOptions(assignments=assignments, submissions=submissions, out=out, students=set(student or []),
                         resume=resume, force=force, workers=workers,
                         executor="dask" if scheduler else executor, scheduler=scheduler,
                         gradebook=gradebook, tier=sandbox, allow_weak_sandbox=allow_weak_sandbox,
                         cell_timeout=cell_timeout, probe_timeout=probe_timeout,
                         submission_timeout=submission_timeout, memory_budget=budget_bytes,
                         memory_guard=memory_guard, convention_credit=convention_credit, handin=handin,
                         run_all_cells=run_all_cells,
                         layout=layout, lms_roster=lms_roster, dry_run=dry_run, accept_new_settings=accept_new_settings,
                         course=course)
    try:
        summary = run_grading(options, progress=not dry_run, progress_interval=progress_interval)
    except GradingInterrupted as exc:
        typer.secho(str(exc), fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    except KeyboardInterrupt:  # before grading or after it: every result kept is in OUT already
        typer.secho(interrupted_message(out), fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(EXIT_INTERRUPTED)
    if dry_run:
        found = summary.discovery.found
        typer.echo(f"dry run ({summary.discovery.layout} layout): {len(found)} submission(s) would be graded, "
                   "nothing is graded")
        from autograder.intake.validate import safe_text

        for f in found:
            typer.echo(safe_text(f"  {f.student_id}\t{f.assignment_id}\t{f.notebook}\t{f.how}"))
        for line in summary.discovery.lines():
            typer.echo(safe_text(line))
        if summary.settings_file is not None:
            typer.echo(f"settings: {summary.settings_file}")
        for line in summary.dry_run_settings:
            typer.echo(safe_text(line))
        return
    summary.print()
    if summary.check_bugs or summary.record_failures:
        typer.secho("error: every other result is written, but the checks above failed on the reference too "
                    "or in their diagnosis (or results could not be recorded): fix them and grade again", fg=typer.colors.RED, err=True)
        raise typer.Exit(EXIT_CHECK_BUG)


@app.command(cls=_Command)
def extension(
    assignment: str = typer.Argument(..., help="Assignment id."),
    student: str = typer.Argument(..., help="Student id."),
    hours: float = typer.Option(0.0, "--hours", min=0.0, help="Extension in hours (added to --days)."),
    days: float = typer.Option(0.0, "--days", min=0.0, help="Extension in days."),
    course: Path = typer.Option(Path("."), "--course", help="The course folder (its gradebook.db)."),
):
    """Give a student more time for an assignment, in nbgrader's gradebook (0: remove the extension).

    The next `autograde grade` (also with --resume) measures lateness from the due date plus this."""
    from datetime import timedelta

    from autograder.assignments import load_assignment
    from autograder.recording.gradebook import CourseGradebook
    from autograder.run import GradingRunError, resolve_assignments
    from autograder.recording.locking import LockedError, run_locks

    try:
        (assignment_id,) = resolve_assignments([assignment])
    except (GradingRunError, ValueError) as exc:
        fail(str(exc) if isinstance(exc, GradingRunError) else "name one assignment")
    gradebook = course / "gradebook.db"
    if not gradebook.is_file():
        fail(f"{gradebook}: no gradebook here; run this in the course folder or pass --course")
    try:
        with run_locks("autograde extension", gradebook=gradebook), CourseGradebook(gradebook) as gb:
            roster = gb.roster()
            if student not in roster:
                import difflib

                close = difflib.get_close_matches(student, roster, n=3, cutoff=0.6)
                fail(f"{student!r} is not on the course's roster ({gradebook}: {len(roster)} student(s))"
                     + (f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ".")
                     + f" To add them: `nbgrader db student add {student} --first-name=... --last-name=... --email=...`"
                     " (many: `nbgrader db student import roster.csv`); the next `autograde grade` then records their "
                     "graded work everywhere, and the extension can be granted.")
            gb.grant_extension(load_assignment(assignment_id), student, timedelta(days=days, hours=hours))
            due = gb.due_date(assignment_id)
    except LockedError as exc:
        fail(str(exc))
    from autograder.reporting.formatting import fmt_duration_words
    from autograder.intake.handin import course_display
    from autograder.intake.local_time import TimeDisplay

    try:
        display = course_display(course)  # the course's c.NbGraderAPI.timezone, as formgrader shows its times
    except Exception as exc:  # a bad zone or a broken nbgrader_config.py: the extension is granted anyway
        typer.secho(f"warning: {course / 'nbgrader_config.py'}: {exc}; the time is shown in UTC", err=True)
        display = TimeDisplay()
    length = timedelta(days=days, hours=hours)
    typer.echo(f"{student}: {assignment_id} "
               + (f"extended by {fmt_duration_words(length.total_seconds())}" if length else "extension removed")
               + (f"; due {display.format(due + length)}" if due else "; the assignment has no due date yet"))


@app.command(cls=_Command)
def report(
    out: Path = typer.Option(Path("autograde-out"), "--out", "-o", help="The output folder of an earlier `grade`."),
    course: Path = typer.Option(None, "--course", help="Also write nbgrader feedback into this course folder."),
):
    """Re-render the reports, the summary, results.json and grades.csv from stored results, without regrading."""
    from autograder.commands.report import rerender
    from autograder.run import GradingRunError

    notes: list[str] = []
    try:
        count = rerender(out, course, notes)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    for line in notes:
        typer.echo(line)
    typer.echo(f"re-rendered {count} reports in {out / 'reports'} and {out / 'summary.html'}")


@app.command(cls=_Command)
def forget(
    student: str = typer.Argument(..., help="The student id, as in grades.csv."),
    assignment: str = typer.Argument(..., help="The assignment id."),
    out: Path = typer.Option(Path("autograde-out"), "--out", "-o", help="The output folder of an earlier `grade`."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be removed, remove nothing."),
):
    """Remove one stored result from OUT (and its submission from the gradebook): the only way a grade leaves the
    exports. A result whose submission a later run did not find (a partial LMS download) is kept until then."""
    from autograder.commands.forget import forget as forget_result
    from autograder.run import GradingRunError

    try:
        lines = forget_result(out, student, assignment, dry_run)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    for line in lines:
        typer.echo(line)
    typer.echo("nothing removed (--dry-run)" if dry_run else f"{student}/{assignment} forgotten; exports rebuilt in {out}")


@app.command("lms-grades", cls=_Command)
def lms_grades(
    assignment: str = typer.Argument(..., help="Assignment id whose scores go into the LMS's gradebook."),
    lms_gradebook: Path = typer.Option(..., "--lms-gradebook",
                                       help="The LMS's own export: Canvas's gradebook CSV, or Moodle's grading "
                                            "worksheet CSV (downloaded for this assignment)."),
    out: Path = typer.Option(Path("autograde-out"), "--out", "-o", help="The output folder of an earlier `grade`."),
    column: str = typer.Option(None, "--lms-column",
                               help="Canvas: the assignment's column (default: the one named after the assignment)."),
):
    """Fill the LMS's exported gradebook with the final scores and write it to OUT/lms/, ready to import."""
    from autograder.commands.lms_grades import fill_lms_gradebook
    from autograder.run import GradingRunError

    try:
        report = fill_lms_gradebook(out, assignment, lms_gradebook, column)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    typer.echo(f"{report.path}: {report.filled} score(s) in column {report.column!r}; import it into the LMS")
    for name in report.unmapped:
        typer.echo(f"  not on the roster, left as it was: {name}")
    feedback = report.feedback
    if feedback is not None:
        how = ("upload it in Moodle: the assignment's View all submissions -> Grading action -> Upload multiple "
               "feedback files in a zip" if feedback.path.suffix == ".zip" else
               "Canvas takes no bulk upload of such files: attach each to its student's submission comment in "
               "SpeedGrader (README)")
        typer.echo(f"{feedback.path}: {len(feedback.written)} student report(s); {how}")
        for name in feedback.without[:10]:
            typer.echo(f"  no report (nothing graded): {name}")
        if len(feedback.without) > 10:
            typer.echo(f"  ... {len(feedback.without)} without a report in all")


@app.command(cls=_Command)
def check(
    notebook: Path = typer.Argument(..., help="Your notebook, before you submit it."),
    assignment: str = typer.Option(None, "--assignment", "-a", help="Assignment id (default: from the file name)."),
    timeout: float = typer.Option(60.0, help="Seconds per cell."),
):
    """For students: is the notebook readable and complete, and do its visible self-checks pass? (No hidden checks.)

    The same check as check_notebook.py in release/<id>/, which students run without this repository."""
    from autograder import REPO_ROOT
    from autograder.tools.student_check import manifest_from_release, run_check

    code = run_check(notebook, assignment, timeout, manifest=manifest_from_release(REPO_ROOT / "release"))
    raise typer.Exit(code)


@app.command("student-checker", cls=_Command)
def student_checker(
    out: Path = typer.Option(None, "--out", "-o", help="Write only the checker, to this file."),
):
    """Write what students need next to each notebook: check_notebook.py (from release/: no answers, no reference
    code), student-requirements.txt and autograde_submit.py (practice grading, `autograde serve`), into
    assignments/<id>/ (generate_assignment copies them) and release/<id>/."""
    from autograder import REPO_ROOT
    from autograder.tools.student_check import write_checker, write_student_files

    if out is not None:
        typer.echo(f"student checker written to {write_checker(REPO_ROOT / 'release', out)}")
        return
    written = write_student_files(REPO_ROOT)
    folders = sorted({str(p.parent.relative_to(REPO_ROOT)) for p in written})
    typer.echo(f"check_notebook.py, student-requirements.txt and autograde_submit.py written to {len(folders)} "
               f"folders ({', '.join(folders)}); students: python check_notebook.py NOTEBOOK, and on the course's hub "
               "python autograde_submit.py NOTEBOOK")


@app.command(cls=_Command)
def selftest(
    sandbox: SandboxTier = typer.Option(None, "--sandbox", help="Isolation tier to test under (default: the strongest)."),
    assignment: list[str] = typer.Option(None, "--assignment", "-a", metavar="ID", help="Only these assignments (repeatable)."),
    both_ways: bool = typer.Option(False, "--both-ways", help="Grade everything also with every cell run "
                                   "(--run-all-cells): every result must be the same check by check."),
    progress_interval: float = typer.Option(
        None, "--progress-interval", min=0.0,
        help="Seconds between progress lines when the output is not a terminal (a log file, CI; a terminal shows a "
             "bar): default $AUTOGRADE_PROGRESS_INTERVAL, else 10; 0: none."),
):
    """Grade every reference notebook (must be full marks), every release notebook (must be 0), every catalogued
    mistake (named), every other correct style and precision case; exit 1 below 100%."""
    from autograder.run import GradingRunError, resolve_assignments
    from autograder.tools.selftest import run_selftest

    try:
        ids = resolve_assignments(assignment or ["all"])
    except GradingRunError as error:
        fail(str(error))
    raise typer.Exit(run_selftest(tier=sandbox, assignment_ids=ids, both_ways=both_ways, progress=True,
                                  progress_interval=progress_interval))


@app.command(cls=_Command)
def demo(
    out: Path = typer.Option(Path("autograde-demo"), "--out", "-o", help="Where to build the sample course."),
    sandbox: SandboxTier = typer.Option(None, "--sandbox", help="Isolation tier (default: the strongest that works here)."),
):
    """Build a sample course from the bundled example class, grade it, and print where the reports are."""
    from autograder.run import GradingRunError
    from autograder.tools.demo.run import run_demo

    try:
        summary = run_demo(out, tier=sandbox)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    summary.print()


@app.command(cls=_Command)
def bench(
    students: int = typer.Option(20, "--students", "-n", min=1, help="Synthetic students (each submits every assignment)."),
    assignment: list[str] = typer.Option(None, "--assignment", "-a", metavar="ID", help="Only these assignments (repeatable)."),
    workers: int = typer.Option(None, "--workers", "-j", min=1, help="Worker processes (default: $AUTOGRADE_WORKERS, else the number of cores)."),
    executor: Executor = typer.Option("local", "--executor", help="local or dask (a LocalCluster)."),
    vs_nbgrader: bool = typer.Option(False, "--vs-nbgrader",
                                     help="Also run `nbgrader autograde` on a subset of the same notebooks and print "
                                          "the ratio."),
    nbgrader_subset: int = typer.Option(12, "--nbgrader-subset", min=1,
                                        help="Notebooks for nbgrader autograde (as many from each assignment)."),
    run_all_cells: bool = typer.Option(False, "--run-all-cells", help="Run every cell, the unchanged demo cells too."),
    both_ways: bool = typer.Option(False, "--both-ways",
                                   help="Grade the class twice: demo cells skipped, then every cell run."),
    sandbox: SandboxTier = typer.Option(None, "--sandbox", help="Isolation tier (default: the strongest that works here)."),
    keep: Path = typer.Option(None, "--keep", help="Build the class and outputs here and keep them."),
):
    """Grade a synthetic class (correct, wrong and broken work) and print notebooks/s, median, p95 and peak memory."""
    from autograder.tools.bench import bench as run_bench
    from autograder.jobs.executors import default_workers
    from autograder.run import GradingRunError, resolve_assignments

    try:
        workers = workers or default_workers()
    except ValueError as exc:
        fail(str(exc))
    try:
        ids = resolve_assignments(assignment or ["all"])
        code = run_bench(students, ids, workers, executor, vs_nbgrader, nbgrader_subset,
                         sandbox, keep, run_all_cells=run_all_cells, both_ways=both_ways)
    except GradingRunError as exc:
        fail(str(exc), exc.exit_code)
    raise typer.Exit(code)


@app.command("sync-solutions", cls=_Command)
def sync_solutions_command(
    check_only: bool = typer.Option(False, "--check", help="Only report cells that differ; exit 1 if any do."),
):
    """Rewrite the solution cells of assignments/ from the reference code in solutions/."""
    from autograder.tools import sync_solutions  # here: it imports nbformat, which `autograde grade` starts without

    raise typer.Exit(sync_solutions.main(["--check"] if check_only else []))


@app.command("sandbox-setup", cls=_Command)
def sandbox_setup():
    """Build the sandbox's own Python environment (torch, numpy, matplotlib; nothing of the course)."""
    from autograder.running.sandbox import environment, tiers

    env = environment.build()
    typer.echo(f"sandbox environment: {env.python} with {env.site}")
    typer.echo(f"isolation tiers that work here: {', '.join(tiers.available())}")


@app.command(cls=_Command)
def serve(
    course: Path = typer.Option(Path("."), "--course", help="The course folder (nbgrader_config.py, gradebook.db)."),
    db: str = typer.Option(None, "--db", metavar="URL", help="Where the attempts are kept (an SQLAlchemy URL, e.g. "
                           "postgresql://...); default: sqlite in the course folder (service.sqlite)."),
    workers: int = typer.Option(2, "--workers", min=1, help="Local grading worker processes."),
    scheduler: str = typer.Option(None, "--scheduler", metavar="ADDRESS",
                                  help="Grade on this Dask cluster (tcp://host:8786) instead of local workers."),
    practice_secret_file: Path = typer.Option(None, "--practice-secret-file", metavar="FILE",
                                              help="The practice secret (else $AUTOGRADE_PRACTICE_SECRET)."),
    listen: str = typer.Option(None, "--listen", metavar="URL",
                               help="Where to listen; default: $JUPYTERHUB_SERVICE_URL, as JupyterHub sets it."),
):
    """The students' practice-grading service, run by JupyterHub as a service (see the README's "Practice grading
    before the deadline")."""
    try:
        from autograder.service.server import ServeOptions, ServiceError, serve as run_service
    except ImportError as exc:
        fail(f"the service needs its extra: pip install -e '.[service]' ({exc})")
    try:
        raise typer.Exit(run_service(ServeOptions(course, db, workers, scheduler, practice_secret_file, listen)))
    except ServiceError as exc:
        fail(str(exc))


@app.command("practice-secret", cls=_Command)
def practice_secret_command():
    """Print the service's practice secret: derived one-way from the course secret that `autograde grade` uses
    ($AUTOGRADE_SECRET or .autograde-secret); the service is given this, never the course secret."""
    from autograder.course import course_secret
    from autograder.service.practice import practice_secret

    typer.echo(practice_secret(course_secret()).decode())


@app.command(cls=_Command)
def version():
    """Print the grader version."""
    typer.echo(__version__)


def main():
    try:
        app(prog_name="autograde")
    finally:
        # everything is written and closed by now: the interpreter's end still runs (atexit, each object's
        # release), but its collections no longer walk every object of nbgrader and SQLAlchemy several times
        # over, 0.19 s of a one-submission run of 2.4 s
        gc.freeze()


if __name__ == "__main__":
    sys.exit(main())
