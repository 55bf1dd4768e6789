"""Scores into nbgrader's own SQLite gradebook, so that `nbgrader export` and formgrader show them.

Each part's score becomes the auto score of its grade cell; students, the assignment, its notebook
and its cells, and the submission are created as needed. The notebook's cells are what `nbgrader
generate_assignment` stores (its SaveCells step: grade, solution and source cells of the release
notebook, with checksums), so nbgrader's own `autograde`, `generate_feedback` and formgrader accept
the gradebook. The scores of one submission are written in one transaction (all or nothing), or many
submissions' in one (`batch`: what a grading run does), and writing them again changes nothing (idempotent). A manual score or comment set in formgrader is
never touched: it hides the auto score, so an instructor's override survives a regrade; a written
answer has no auto score (as nbgrader has it) and waits for the instructor's.
"""

import contextlib
import functools
import importlib.util
import os
import subprocess
import sys
import warnings
from datetime import datetime, timedelta
from pathlib import Path

import nbformat


def _nbgrader_without_its_server() -> None:
    """nbgrader's package, its `__init__` not run yet: that loads nbgrader's Jupyter server extensions (tornado,
    jupyter_server: about 0.7 s), which the gradebook API never uses. Its submodules import as always; the first
    look-up of a name `__init__` defines (e.g. `_jupyter_server_extension_points`) runs it then. Nothing when
    nbgrader is imported already."""
    if "nbgrader" in sys.modules:
        return
    spec = importlib.util.find_spec("nbgrader")
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not a package found on disk: import it as always (or fail there, saying why)
    package = importlib.util.module_from_spec(spec)
    running = []

    def complete(name: str):
        # a submodule not imported yet (`from . import utils`) is the import system's to load, not a reason to run
        # __init__; nor is a dunder look-up
        if not running and not name.startswith("__") and importlib.util.find_spec(f"nbgrader.{name}") is None:
            running.append(True)
            spec.loader.exec_module(package)  # the package's own __init__, in the same module object
            if name in package.__dict__:
                return package.__dict__[name]
        raise AttributeError(f"module 'nbgrader' has no attribute {name!r}")

    package.__getattr__ = complete
    sys.modules["nbgrader"] = package
    package.__version__ = importlib.import_module("nbgrader._version").__version__


_nbgrader_without_its_server()

import nbgrader.api  # noqa: E402 (after the package is in place without its server)
from nbgrader import utils as nbgrader_utils  # noqa: E402
from nbgrader.api import Comment, Grade, Gradebook, MissingEntry, SubmittedNotebook  # noqa: E402
from sqlalchemy import bindparam, event, insert, select, update  # noqa: E402
from sqlalchemy.orm import selectinload  # noqa: E402
from sqlalchemy.orm.util import identity_key  # noqa: E402
from sqlalchemy.exc import SAWarning  # noqa: E402

from autograder.assignments import Assignment  # noqa: E402
from autograder.recording.class_record import student_entry  # noqa: E402
from autograder.results import SubmissionResult  # noqa: E402


def _alembic_on_path() -> None:
    """nbgrader may run `alembic` from PATH: make it this environment's, even from a venv not activated."""
    bin_dir = str(Path(sys.executable).parent)
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


def _nbgrader_migrations() -> Path:
    """nbgrader's alembic scripts (their folder), found without importing nbgrader."""
    spec = importlib.util.find_spec("nbgrader")
    return Path(next(iter(spec.submodule_search_locations))) / "alembic"


def _read_head(versions: Path) -> str | None:
    """The one head of the migrations in `versions`, read off their files (each names its `revision` and its
    `down_revision`: the head is the revision no other revises); None unless every file is that simple (a literal
    revision, down revisions as None, a string or a tuple of them, no branch labels or dependencies) and there is
    exactly one head: alembic itself answers then."""
    import ast

    revisions, revised = set(), set()
    for path in sorted(versions.glob("*.py")):
        if path.name == "__init__.py":
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, ValueError):
            return None
        names = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    names[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    names[node.targets[0].id] = ValueError
        revision, down = names.get("revision"), names.get("down_revision", ValueError)
        if not isinstance(revision, str) or names.get("branch_labels") is not None \
                or names.get("depends_on") is not None:
            return None
        downs = (down,) if down is None or isinstance(down, str) else down
        if not isinstance(downs, tuple) or not all(d is None or isinstance(d, str) for d in downs):
            return None
        revisions.add(revision)
        revised.update(d for d in downs if d is not None)
    heads = revisions - revised
    return next(iter(heads)) if len(heads) == 1 and revised <= revisions else None


@functools.lru_cache(maxsize=1)
def _alembic_head() -> str:
    """The migration head nbgrader stamps into a new gradebook, read in-process from nbgrader's own scripts.

    nbgrader asks a `alembic heads` subprocess for it (about 2 s, and only with alembic on PATH). Read off the
    scripts' files when they are simple (`_read_head`: importing alembic costs about 0.5 s of a one-submission
    run; tests/test_gradebook.py checks that the answer is alembic's), else by alembic itself."""
    head = _read_head(_nbgrader_migrations() / "versions")
    return head if head is not None else _alembic_script_head()


def _alembic_script_head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(_nbgrader_migrations()))
    return ScriptDirectory.from_config(config).get_current_head()


def run_nbgrader(args: list[str], cwd: Path, timeout: float | None = None) -> subprocess.CompletedProcess:
    """`python -m nbgrader ARGS` in `cwd` from this environment: its bin first on PATH (nbgrader runs `alembic`
    from there), UTF-8 files (rosters hold Chinese names; nbgrader opens them with the default encoding)."""
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
               PYTHONUTF8="1")
    return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def late_penalties(penalty: float | None, notebooks: list[tuple]) -> dict:
    """The late penalty of each of a submission's notebooks, (key, is the assignment's own) in the gradebook's order:
    the whole penalty on the assignment's own notebook (else on the first), 0.0 on any other, so that `nbgrader
    export`, which sums them, subtracts it once. The ORM's way (`_record_handin`) and the rows' both use it."""
    first = next((key for key, own in notebooks if own), notebooks[0][0] if notebooks else None)
    return {key: penalty if key == first else 0.0 for key, _ in notebooks}


def _auto_score(part, scores: dict) -> float | None:
    """A part's auto score in the gradebook: none for a written answer (as nbgrader has it), else ours."""
    return None if part.written else float(scores.get(part.grade_id) or 0.0)


def _needs_manual_grade(part, manual_score: float | None) -> bool:
    """A written answer worth points still waits for the instructor; everything else is done."""
    return bool(part.written and part.points > 0 and manual_score is None)


class CourseGradebook:
    def __init__(self, path: Path, course_id: str = "default_course"):
        _alembic_on_path()
        nbgrader.api.get_alembic_version = _alembic_head  # the same answer as nbgrader's subprocess, in-process
        self.path = Path(path)
        self.gb = Gradebook(f"sqlite:///{self.path}", course_id=course_id)
        self._prepared: set[str] = set()
        # read within one transaction: another process (nbgrader's generate_assignment, `db student remove`) may
        # change the gradebook between two
        self._shapes: dict[str, tuple] = {}  # assignment id -> _shape
        self._students: set[str] = set()  # students known to be in the gradebook
        event.listen(self.gb.db(), "after_commit", lambda session: self._transaction_ended())
        self.by_rows = True  # record: a submission's rows inserted or updated directly (False: nbgrader's ORM)
        self._due_dates: dict[str, datetime | None] = {}

    def close(self) -> None:
        self.gb.close()

    @contextlib.contextmanager
    def batch(self):
        """Inside, every write joins one transaction, ended by `commit()` (durable: SQLite syncs it) or `rollback()`;
        what is still open when the block ends is rolled back. nbgrader's own methods (add_student, add_submission,
        update_or_create_*) commit on their own: inside, their commits only flush."""
        session = self.gb.db()
        session.commit = session.flush
        try:
            yield self
        finally:
            del session.commit
            self.rollback()

    def commit(self) -> None:
        session = self.gb.db()
        type(session).commit(session)

    def rollback(self) -> None:
        """Undo the open transaction; what it had made (an assignment's cells) is made again when next needed.

        Every object leaves the session too: SQLAlchemy expunges on rollback only the objects that were new in
        the transaction, while an object *loaded* in it (a row this transaction inserted, loaded again after its
        first instance was garbage-collected: when depends on the collector) stays, its row gone, and the next
        touch raises ObjectDeletedError. What is staged again after a rollback queries everything afresh."""
        self.gb.db.rollback()
        self.gb.db.expunge_all()
        self._prepared.clear()
        self._transaction_ended()

    def _transaction_ended(self) -> None:
        self._shapes.clear()
        self._students.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def roster(self) -> list[str]:
        """The students nbgrader knows (`nbgrader db student import`)."""
        return sorted(s.id for s in self.gb.students)

    def students(self) -> dict[str, dict]:
        """id -> {"email": ..., "named": whether it has a name or email (imported, not added by autograde)}."""
        return {s.id: student_entry(s.first_name, s.last_name, s.email) for s in self.gb.students}

    def ensure_assignment(self, assignment: Assignment) -> None:
        """The assignment, its notebook and its cells as `nbgrader generate_assignment` stores them; the maxima
        from the source notebook."""
        if assignment.id in self._prepared:
            return
        gb, notebook = self.gb, assignment.source.stem
        try:
            gb.find_assignment(assignment.id)
        except MissingEntry:
            gb.add_assignment(assignment.id)
        gb.update_or_create_notebook(notebook, assignment.id)
        self._save_cells(assignment)
        for part in assignment.parts:
            gb.update_or_create_grade_cell(part.grade_id, notebook, assignment.id, max_score=part.points,
                                           cell_type="markdown" if part.written else "code")
        self._fill_submissions(assignment)
        self._prepared.add(assignment.id)

    def _save_cells(self, assignment: Assignment) -> None:
        """What nbgrader's SaveCells records from the student version (release/): a solution cell per answer cell,
        a source cell (source, locked, checksum) per nbgrader cell. nbgrader's autograde restores the locked cells
        from these and drops the metadata of a cell it does not find ("nbgrader cell does not have a grade_id")."""
        gb, notebook = self.gb, assignment.source.stem
        cells = nbformat.read(assignment.cells_notebook, as_version=4).cells
        for cell in cells:
            if not (nbgrader_utils.is_grade(cell) or nbgrader_utils.is_solution(cell) or nbgrader_utils.is_locked(cell)):
                continue
            meta = cell.metadata["nbgrader"]
            if nbgrader_utils.is_solution(cell):
                gb.update_or_create_solution_cell(meta["grade_id"], notebook, assignment.id)
            gb.update_or_create_source_cell(meta["grade_id"], notebook, assignment.id, cell_type=cell.cell_type,
                                            locked=nbgrader_utils.is_locked(cell), source=cell.source,
                                            checksum=meta.get("checksum"))

    def _fill_submissions(self, assignment: Assignment) -> None:
        """A grade per grade cell and a comment per solution cell in every submission of the notebook, as
        `add_submission` makes them: submissions made before a cell was in the gradebook lack them, and
        nbgrader's autograde and formgrader expect them."""
        gb = self.gb
        nb = gb.find_notebook(assignment.source.stem, assignment.id)
        added = False
        # nb.submissions with their grades and comments in three queries, not two lazy loads per submission (0.3 s
        # of a run again over 280 submissions)
        submissions = (gb.db.query(SubmittedNotebook).filter(SubmittedNotebook.notebook_id == nb.id)
                       .options(selectinload(SubmittedNotebook.grades), selectinload(SubmittedNotebook.comments)).all())
        for submitted in submissions:
            graded = {g.cell_id for g in submitted.grades}
            commented = {c.cell_id for c in submitted.comments}
            for cell in nb.grade_cells:
                if cell.id not in graded:
                    gb.db.add(Grade(cell_id=cell.id, notebook=submitted))
                    added = True
            for cell in nb.solution_cells:
                if cell.id not in commented:
                    gb.db.add(Comment(cell_id=cell.id, notebook=submitted))
                    added = True
        if added:
            gb.db.commit()

    def _submission(self, assignment: Assignment, student_id: str):
        """The student's submission of the assignment, with the assignment, the student and the submission (an
        empty grade per cell) created as needed."""
        self.ensure_assignment(assignment)
        gb = self.gb
        self._ensure_student(student_id)
        try:
            return gb.find_submission(assignment.id, student_id)
        except MissingEntry:
            with warnings.catch_warnings():  # nbgrader's own add_submission trips SQLAlchemy's autoflush warnings
                warnings.simplefilter("ignore", SAWarning)
                return gb.add_submission(assignment.id, student_id)

    def _ensure_student(self, student_id: str) -> None:
        """The student, added (as nbgrader's add_student does) unless the gradebook has it."""
        if student_id in self._students:
            return
        table = nbgrader.api.Student.__table__
        if self.gb.db.execute(select(table.c.id).where(table.c.id == student_id)).first() is None:
            self.gb.add_student(student_id)
        self._students.add(student_id)

    def record(self, result: SubmissionResult, assignment: Assignment) -> dict[str, float | None]:
        """Write one submission's part scores as auto scores, all in one transaction (inside `batch`: in the batch's,
        and a failure rolls the batch back). Returns the auto scores it replaced (grade_id -> the gradebook's value
        before) where they differed from ours.

        A submission the gradebook does not have yet (every one in a first run) is written as rows, with its scores
        in them (`_write_rows`): the rows nbgrader's add_submission makes, with what the rest of this method then
        sets, in a few statements instead of the ORM's flushes (13-20 ms a result); one it has (a result kept, or
        graded again) by updates of the rows whose values change (`_update_rows`). `by_rows = False` takes the
        ORM's way for every submission: tests/test_gradebook.py writes a class both ways, and again with other
        results, and compares the gradebooks."""
        gb, notebook = self.gb, assignment.source.stem
        try:
            if self.by_rows:
                replaced = self._write_rows(result, assignment)
                if replaced is not None:
                    return replaced
        except BaseException:
            self.rollback()
            raise
        submission = self._submission(assignment, result.student_id)
        scores = {p.grade_id: p.auto_score for p in result.parts}
        replaced = {}
        try:
            if result.handin is not None:  # when it was handed in, and the late penalty `nbgrader export` subtracts
                self._record_handin(result, assignment, submission)
            # the submission's grades of grade cells (a task cell may have a grade cell's name), read together (its
            # notebooks, their grades and the notebook's grade cells: a few lazy loads), not one find_grade per part
            grades = {g.name: g for nb in submission.notebooks if nb.name == notebook
                      for cells in [{c.id for c in nb.notebook.grade_cells}] for g in nb.grades if g.cell_id in cells}
            for part in assignment.parts:
                grade = grades.get(part.grade_id) or gb.find_grade(part.grade_id, notebook, assignment.id,
                                                                   result.student_id)
                auto, needs = _auto_score(part, scores), _needs_manual_grade(part, grade.manual_score)
                if grade.auto_score != auto:
                    replaced[part.grade_id] = grade.auto_score
                    grade.auto_score = auto
                if grade.needs_manual_grade != needs:
                    grade.needs_manual_grade = needs
            gb.db.commit()
        except BaseException:
            self.rollback()
            raise
        return replaced

    def _shape(self, assignment: Assignment) -> tuple[str, list[tuple]]:
        """The gradebook's id of the assignment and, per notebook of it (as add_submission walks them), its id, name,
        the ids (and names) of its grade cells and the ids of its solution and task cells; read once while the
        assignment stays prepared."""
        if assignment.id not in self._shapes:
            gradebook_assignment = self.gb.find_assignment(assignment.id)
            self._shapes[assignment.id] = (gradebook_assignment.id, [
                (nb.id, nb.name, [(c.id, c.name) for c in nb.grade_cells], [c.id for c in nb.solution_cells],
                 [c.id for c in nb.task_cells]) for nb in gradebook_assignment.notebooks])
        return self._shapes[assignment.id]

    def _write_rows(self, result: SubmissionResult, assignment: Assignment) -> dict[str, float | None] | None:
        """`record` for a submission the gradebook does not have: its rows inserted with their final values, the
        same rows and in the same order as add_submission's flush, followed by `record`'s changes; for one it has,
        `_update_rows`. None (nothing written) where the ORM's way is to be taken."""
        self.ensure_assignment(assignment)
        self._ensure_student(result.student_id)
        session = self.gb.db()
        session.flush()  # what the ORM holds goes first, as it would in its own flush
        api = nbgrader.api
        submitted = api.SubmittedAssignment.__table__
        assignment_key, notebooks = self._shape(assignment)
        there = session.execute(select(submitted.c.id).where(submitted.c.assignment_id == assignment_key,
                                                             submitted.c.student_id == result.student_id)).first()
        if there is not None:
            return self._update_rows(there[0], result, assignment, notebooks)
        timestamp, penalty = self._handin_values(result)
        own = assignment.source.stem
        scores = {p.grade_id: p.auto_score for p in result.parts}
        parts = {p.grade_id: p for p in assignment.parts}
        submission_id = api.new_uuid()
        session.execute(insert(submitted), [{"id": submission_id, "assignment_id": assignment_key,
                                             "student_id": result.student_id, "timestamp": timestamp,
                                             "extension": None}])
        # each notebook's late penalty (late_penalties); None on every notebook without a hand-in
        penalties = late_penalties(penalty, [(nb[0], nb[1] == own) for nb in notebooks])
        notebook_rows, grade_rows, comment_rows = [], [], []
        for notebook_key, name, grade_cells, solution_cells, task_cells in notebooks:
            notebook_id = api.new_uuid()
            notebook_rows.append({"id": notebook_id, "assignment_id": submission_id, "notebook_id": notebook_key,
                                  "flagged": False, "late_submission_penalty":
                                      None if result.handin is None else penalties[notebook_key]})
            for cell, cell_name in grade_cells:
                part = parts.get(cell_name) if name == own else None
                grade_rows.append({"id": api.new_uuid(), "notebook_id": notebook_id, "cell_id": cell,
                                   "auto_score": None if part is None else _auto_score(part, scores),
                                   "manual_score": None, "extra_credit": None,
                                   "needs_manual_grade": True if part is None else _needs_manual_grade(part, None)})
            comment_rows += [{"id": api.new_uuid(), "notebook_id": notebook_id, "cell_id": cell,
                              "auto_comment": None, "manual_comment": None} for cell in solution_cells + task_cells]
            grade_rows += [{"id": api.new_uuid(), "notebook_id": notebook_id, "cell_id": cell, "auto_score": None,
                            "manual_score": None, "extra_credit": None, "needs_manual_grade": True}
                           for cell in task_cells]
        for model, rows in ((api.SubmittedNotebook, notebook_rows), (api.Grade, grade_rows),
                            (api.Comment, comment_rows)):
            if rows:
                session.execute(insert(model.__table__), rows)
        self.gb.db.commit()  # as the ORM's way ends (inside `batch`: a flush, the batch commits)
        return {p.grade_id: None for p in assignment.parts if _auto_score(p, scores) is not None}

    def _update_rows(self, submission_id: str, result: SubmissionResult, assignment: Assignment,
                     notebooks: list[tuple]) -> dict[str, float | None] | None:
        """`record` for a submission the gradebook has (a result kept or graded again): what the ORM's way changes
        (the hand-in's time and penalty, each part's auto score and whether it needs a manual grade), read in two
        queries and written as updates of the rows that change. None, with nothing written, when the submission
        lacks a row the ORM's way would find otherwise (its notebook, a part's grade): the ORM's way then."""
        api, session, own = nbgrader.api, self.gb.db(), assignment.source.stem
        own_notebook = next((nb for nb in notebooks if nb[1] == own), None)
        if own_notebook is None:
            return None
        submitted_nb, grade = api.SubmittedNotebook.__table__, api.Grade.__table__
        ours = session.execute(select(submitted_nb.c.id, submitted_nb.c.notebook_id,
                                      submitted_nb.c.late_submission_penalty)
                               .where(submitted_nb.c.assignment_id == submission_id)).all()
        mine = [row for row in ours if row[1] == own_notebook[0]]
        if len(mine) != 1:
            return None
        names = dict(own_notebook[2])  # grade cell id -> name, of the assignment's own notebook
        grades = {names[row[1]]: row for row in session.execute(
            select(grade.c.id, grade.c.cell_id, grade.c.auto_score, grade.c.manual_score, grade.c.needs_manual_grade)
            .where(grade.c.notebook_id == mine[0][0])).all() if row[1] in names}
        if any(part.grade_id not in grades for part in assignment.parts):
            return None
        scores = {p.grade_id: p.auto_score for p in result.parts}
        replaced, changed = {}, []
        for part in assignment.parts:
            grade_id, _, auto_before, manual, needs_before = grades[part.grade_id]
            auto, needs = _auto_score(part, scores), _needs_manual_grade(part, manual)
            if auto_before != auto:
                replaced[part.grade_id] = auto_before
            if auto_before != auto or needs_before != needs:
                changed.append({"row": grade_id, "auto_score": auto, "needs_manual_grade": needs})
        if changed:
            session.execute(update(grade).where(grade.c.id == bindparam("row")), changed)
        touched = [(api.Grade, row[0]) for row in grades.values()]
        if result.handin is not None:
            timestamp, penalty = self._handin_values(result)
            if timestamp is not None:
                session.execute(update(api.SubmittedAssignment.__table__)
                                .where(api.SubmittedAssignment.__table__.c.id == submission_id)
                                .values(timestamp=timestamp))
            penalties = late_penalties(penalty, [(row[0], row[0] == mine[0][0]) for row in ours])
            for row in ours:
                value = penalties[row[0]]
                if row[2] != value:
                    session.execute(update(submitted_nb).where(submitted_nb.c.id == row[0])
                                    .values(late_submission_penalty=value))
        touched += [(api.SubmittedNotebook, row[0]) for row in ours] + [(api.SubmittedAssignment, submission_id)]
        for model, key in touched:  # an object the session loaded before holds the old values: read it again
            instance = session.identity_map.get(identity_key(model, key))
            if instance is not None:
                session.expire(instance)
        self.gb.db.commit()  # as the ORM's way ends (inside `batch`: a flush, the batch commits)
        return replaced

    def manual_grades(self, assignment: Assignment, student_id: str) -> dict[str, tuple[float | None, str]]:
        """grade_id -> (the manual score, the instructor's comments) given in formgrader, for the parts that have
        either. formgrader comments on solution cells: a part's are those on its answer cells (a written answer's
        solution cell is its grade cell)."""
        return self.class_manual_grades(assignment, [student_id]).get(student_id, {})

    def class_manual_grades(self, assignment: Assignment, student_ids=None) -> dict[str, dict]:
        """student id -> `manual_grades` of that student, for every student of the assignment (or `student_ids`)
        with any, in two queries (one per submission costs about 20 ms)."""
        from nbgrader.api import Assignment as GradebookAssignment, BaseCell, Notebook, SubmittedAssignment, SubmittedNotebook

        def rows(model, value):
            query = (self.gb.db.query(SubmittedAssignment.student_id, BaseCell.name, value)
                     .join(SubmittedNotebook, model.notebook_id == SubmittedNotebook.id)
                     .join(SubmittedAssignment, SubmittedNotebook.assignment_id == SubmittedAssignment.id)
                     .join(GradebookAssignment, SubmittedAssignment.assignment_id == GradebookAssignment.id)
                     .join(Notebook, SubmittedNotebook.notebook_id == Notebook.id)
                     .join(BaseCell, model.cell_id == BaseCell.id)
                     .filter(GradebookAssignment.name == assignment.id, Notebook.name == assignment.source.stem,
                             value.isnot(None)))
            if student_ids is not None:
                query = query.filter(SubmittedAssignment.student_id.in_(list(student_ids)))
            return query.all()

        scores: dict[str, dict[str, float]] = {}
        comments: dict[str, dict[str, str]] = {}
        for student, cell, score in rows(Grade, Grade.manual_score):
            scores.setdefault(student, {})[cell] = score
        for student, cell, text in rows(Comment, Comment.manual_comment):
            if text.strip():
                comments.setdefault(student, {})[cell] = text.strip()
        found = {}
        for student in set(scores) | set(comments):
            theirs, said = scores.get(student, {}), comments.get(student, {})
            for part in assignment.parts:
                cells = dict.fromkeys([*part.answer_cells, part.grade_id])
                comment = "\n\n".join(said[c] for c in cells if c in said)
                if theirs.get(part.grade_id) is not None or comment:
                    found.setdefault(student, {})[part.grade_id] = (theirs.get(part.grade_id), comment)
        return found

    def class_extensions(self, assignment_id: str) -> dict[str, timedelta]:
        """student id -> the extension the gradebook holds for the assignment (the students that have one)."""
        from nbgrader.api import Assignment as GradebookAssignment, SubmittedAssignment

        query = (self.gb.db.query(SubmittedAssignment.student_id, SubmittedAssignment.extension)
                 .join(GradebookAssignment, SubmittedAssignment.assignment_id == GradebookAssignment.id)
                 .filter(GradebookAssignment.name == assignment_id, SubmittedAssignment.extension.isnot(None)))
        return dict(query.all())

    def _record_handin(self, result: SubmissionResult, assignment: Assignment, submission) -> None:
        timestamp, penalty = self._handin_values(result)
        if timestamp is not None:
            submission.timestamp = timestamp
        own = assignment.source.stem
        penalties = late_penalties(penalty, [(i, nb.name == own) for i, nb in enumerate(submission.notebooks)])
        for i, nb in enumerate(submission.notebooks):
            nb.late_submission_penalty = penalties[i]

    @staticmethod
    def _handin_values(result: SubmissionResult) -> tuple[datetime | None, float | None]:
        """When the submission was handed in (None: not known) and its late penalty; (None, None) without a
        hand-in."""
        from autograder.intake.handin import from_iso

        if result.handin is None:
            return None, None
        # to the microsecond: formgrader lists a submission as autograded only when the gradebook's time equals
        # nbgrader's reading of its timestamp.txt exactly (results stored before this field have seconds only)
        exact = result.handin.submitted_exact
        return (datetime.fromisoformat(exact) if exact else from_iso(result.handin.submitted_at)), result.handin.penalty

    def due_date(self, assignment_id: str) -> datetime | None:
        """The assignment's due date (naive UTC), set by `nbgrader db assignment add ID --duedate=...`; read once
        per gradebook opened (a run), not once per submission."""
        if assignment_id not in self._due_dates:  # an assignment not there yet has none, once too (each asks ~2 ms)
            try:
                self._due_dates[assignment_id] = self.gb.find_assignment(assignment_id).duedate
            except MissingEntry:
                self._due_dates[assignment_id] = None
        return self._due_dates[assignment_id]

    def extension(self, assignment_id: str, student_id: str) -> timedelta | None:
        """The student's extension for the assignment, if the gradebook has one."""
        try:
            return self.gb.find_submission(assignment_id, student_id).extension
        except MissingEntry:
            return None

    def grant_extension(self, assignment: Assignment, student_id: str, extension: timedelta) -> None:
        """Set (or with a zero length, remove) a student's extension; creates the student and submission."""
        self._submission(assignment, student_id)
        seconds = extension.total_seconds()
        self.gb.grant_extension(assignment.id, student_id, minutes=seconds / 60 if seconds > 0 else 0)

    def scores(self, assignment_id: str, student_id: str) -> dict[str, float | None]:
        """grade_id -> the score nbgrader shows (manual if set, else auto): for tests and checks."""
        submission = self.gb.find_submission(assignment_id, student_id)
        return {g.name: g.score for nb in submission.notebooks for g in nb.grades}
