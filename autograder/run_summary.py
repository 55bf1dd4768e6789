"""What a class run did (RunSummary: the stage `export` makes it), and its summary in the terminal: per assignment the
scores, errors and flags, where the files are, what needs the instructor's action."""

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from autograder.assignments import assignment_ids as course_assignments
from autograder.intake.discovery import Discovery
from autograder.intake.validate import safe_text
from autograder.recording import run_settings
from autograder.recording.class_record import ClassRecord
from autograder.results import STATUS_ERROR, SubmissionResult


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
    dry_run_settings: list[str] = field(default_factory=list)  # --dry-run: the settings the run would grade with

    def feedback_lines(self) -> list[str]:
        """Where the feedback is, only as paths that exist, and for whom it is withheld and why."""
        from autograder.recording.feedback import feedback_page, withheld_because

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
                          "had been changed since they were graded (by `nbgrader autograde`, or by `autograde grade` "
                          "into another OUT with this gradebook: keep one OUT per class)")
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
