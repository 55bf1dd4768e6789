"""The gradebook autograde writes is one nbgrader's own tools accept, also when an older autograde made it."""

import subprocess
import sys
import warnings

import nbformat
import pytest
from nbgrader import utils
from sqlalchemy.exc import SAWarning

from autograder import REPO_ROOT
from autograder.assignments import load_assignment
from autograder.recording.gradebook import CourseGradebook


def release_cells(assignment_id: str) -> tuple[set[str], set[str]]:
    """(every nbgrader cell, the solution cells) of the student notebook, as generate_assignment records them."""
    cells = nbformat.read(REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb", as_version=4).cells
    tracked = {c.metadata["nbgrader"]["grade_id"] for c in cells
               if utils.is_grade(c) or utils.is_solution(c) or utils.is_locked(c)}
    return tracked, {c.metadata["nbgrader"]["grade_id"] for c in cells if utils.is_solution(c)}


def test_a_gradebook_an_older_autograde_wrote_gets_the_cells_and_comments_nbgrader_needs(tmp_path):
    assignment = load_assignment("gradient_flow")
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        # what the first version wrote: the grade cells only, and a submission made from them
        gb.gb.add_assignment(assignment.id)
        gb.gb.update_or_create_notebook(assignment.id, assignment.id)
        for part in assignment.parts:
            gb.gb.update_or_create_grade_cell(part.grade_id, assignment.id, assignment.id, max_score=0.0,
                                              cell_type="markdown" if part.written else "code")
        gb.gb.add_student("alice")
        with warnings.catch_warnings():  # nbgrader's own add_submission trips SQLAlchemy's autoflush warnings
            warnings.simplefilter("ignore", SAWarning)
            gb.gb.add_submission(assignment.id, "alice")

        gb.ensure_assignment(assignment)
        tracked, solutions = release_cells(assignment.id)
        notebook = gb.gb.find_notebook(assignment.id, assignment.id)
        assert {c.name for c in notebook.source_cells} == tracked
        assert {c.name for c in notebook.solution_cells} == solutions
        sources = {c.name: c for c in notebook.source_cells}
        assert sources["student_id"].locked and sources["student_id"].checksum
        assert {c.name: c.max_score for c in notebook.grade_cells}["gradient_flow_observation"] == 2.0
        submitted = gb.gb.find_submission_notebook(assignment.id, assignment.id, "alice")
        assert {c.name for c in submitted.comments} == solutions
        assert {g.name for g in submitted.grades} == {p.grade_id for p in assignment.parts}
        assert all(sources[name].source == "" or "BEGIN SOLUTION" not in sources[name].source for name in sources)


def test_the_cells_recorded_for_every_assignment_are_the_ones_nbformat_reads_off_its_release(tmp_path):
    """ensure_assignment records each source cell's type, lock, source and checksum, and the solution cells, as
    nbformat.read's cells of release/ give them to nbgrader's utils (nbgrader's SaveCells), for every assignment."""
    from autograder.assignments import assignment_ids

    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        for assignment_id in assignment_ids():
            assignment = load_assignment(assignment_id)
            assert assignment.cells_notebook == REPO_ROOT / "release" / assignment_id / f"{assignment_id}.ipynb"
            gb.ensure_assignment(assignment)
            cells = nbformat.read(assignment.cells_notebook, as_version=4).cells
            tracked = [c for c in cells if utils.is_grade(c) or utils.is_solution(c) or utils.is_locked(c)]
            notebook = gb.gb.find_notebook(assignment_id, assignment_id)
            assert {c.name: (c.cell_type, c.locked, c.source, c.checksum) for c in notebook.source_cells} == {
                c.metadata["nbgrader"]["grade_id"]: (c.cell_type, utils.is_locked(c), c.source,
                                                     c.metadata["nbgrader"].get("checksum")) for c in tracked}
            assert {c.name for c in notebook.solution_cells} == {
                c.metadata["nbgrader"]["grade_id"] for c in tracked if utils.is_solution(c)}
            assert any(c.locked and c.checksum for c in notebook.source_cells)


def test_a_runs_warm_up_builds_the_schema_validator_nbformat_then_checks_the_notebooks_with(tmp_path):
    """warm_up_exports (a run on local workers, its first job started) builds nbformat's validator for the
    notebooks the run reads with nbformat.read after its results (release/ for the gradebook's cells, the sources
    for the pages' titles): the one nbformat.read then uses, so that recording and titling build none."""
    code = ("import nbformat.validator as v; from autograder.assignments import all_assignments; "
            "from autograder.recording.rendered import warm_up_exports; "
            "from autograder.recording.gradebook import CourseGradebook; "
            "from autograder.reporting.formatting import assignment_info; "
            "assignments = all_assignments(); "
            "warm_up_exports(assignments); "
            "print(sorted(map(str, v.validators))); "
            f"gb = CourseGradebook({str(tmp_path / 'gradebook.db')!r}); "
            "[gb.ensure_assignment(a) for a in assignments]; gb.close(); "
            "titles = [assignment_info(a.id).title for a in assignments]; "
            "print(sorted(map(str, v.validators))); print(sum(t != a.id for t, a in zip(titles, assignments)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0, done.stderr
    warmed, after, titled = done.stdout.splitlines()
    assert warmed == after and warmed != "[]" and titled == "7", done.stdout


# --- the migration head a new gradebook is stamped with, read off nbgrader's scripts ---------------------------

def _alembic_heads(versions) -> list[str]:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(versions.parent))
    return list(ScriptDirectory.from_config(config).get_heads())


def test_the_head_read_off_nbgraders_scripts_is_alembics():
    from autograder.recording.gradebook import _alembic_head, _alembic_script_head, _nbgrader_migrations, _read_head

    versions = _nbgrader_migrations() / "versions"
    assert _read_head(versions) is not None  # the fast path is the one taken with the nbgrader installed
    assert _read_head(versions) == _alembic_script_head() == _alembic_head()
    assert _alembic_heads(versions) == [_read_head(versions)]


def _script(folder, name, revision, down, extra=""):
    (folder / f"{name}.py").write_text(f'"""{name}"""\nrevision = {revision!r}\ndown_revision = {down!r}\n{extra}'
                                       "\n\ndef upgrade():\n    pass\n\n\ndef downgrade():\n    pass\n")


def test_the_head_read_off_scripts_agrees_with_alembic_or_leaves_it_to_alembic(tmp_path):
    from autograder.recording.gradebook import _read_head

    cases = {
        "chain": [("a", None), ("b", "a"), ("c", "b")],
        "merge": [("a", None), ("b", "a"), ("c", "a"), ("m", ("b", "c"))],
        "two heads": [("a", None), ("b", "a"), ("c", "a")],
        "labels": [("a", None), ("b", "a", "branch_labels = ('x',)")],
        "depends": [("a", None), ("b", "a"), ("c", "a", "depends_on = 'b'")],
        "computed": [("a", None), ("b", "a", "down_revision = 'a'.upper().lower()")],
        "missing down": [("b", "a")],
    }
    for name, scripts in cases.items():
        versions = tmp_path / name.replace(" ", "_") / "versions"
        versions.mkdir(parents=True)
        for n, (revision, down, *extra) in enumerate(scripts):
            _script(versions, f"r{n}_{revision}", revision, down, *extra)
        read = _read_head(versions)
        if name in ("chain", "merge"):
            assert read == {"chain": "c", "merge": "m"}[name]
        if read is not None:
            assert _alembic_heads(versions) == [read], name
        else:
            assert name in ("two heads", "labels", "depends", "computed", "missing down"), name


# --- a new submission's rows inserted directly: the same gradebook as nbgrader's add_submission ----------------------

def gradebook_rows(path) -> dict[str, list[tuple]]:
    """Every table's rows in storage (rowid) order, each random id (uuid) replaced by what it names."""
    import sqlite3

    db = sqlite3.connect(path)
    try:
        q = lambda sql: db.execute(sql).fetchall()  # noqa: E731
        names = {}
        for i, n in q("select id, name from assignment"):
            names[i] = ("assignment", n)
        for i, n, a in q("select id, name, assignment_id from notebook"):
            names[i] = ("notebook", names[a], n)
        for i, n, nb, kind in q("select id, name, notebook_id, type from base_cell"):
            names[i] = ("cell", names[nb], n, kind)
        for i, n, nb in q("select id, name, notebook_id from source_cell"):
            names[i] = ("source", names[nb], n)
        for i, a, s in q("select id, assignment_id, student_id from submitted_assignment"):
            names[i] = ("submission", names[a], s)
        for i, a, nb in q("select id, assignment_id, notebook_id from submitted_notebook"):
            names[i] = ("submitted", names[a], names[nb])
        for table in ("grade", "comment"):
            for i, nb, cell in q(f"select id, notebook_id, cell_id from {table}"):
                names[i] = (table, names[nb], names[cell])
        tables = [r[0] for r in q("select name from sqlite_master where type='table' order by name")]
        return {t: [tuple(names.get(v, v) for v in row) for row in q(f"select * from {t} order by rowid")]
                for t in tables}
    finally:
        db.close()


def _synthetic_results(assignment_ids, students: int, seed: int = 7) -> list:
    """Results of every kind record() meets: scores whole, fractional and zero, written parts, no hand-in, a hand-in
    known to the microsecond or to the second only, late penalties."""
    import random

    from autograder.intake.handin import _iso
    from autograder.results import CheckResult, HandIn, PartResult, SubmissionResult
    from datetime import datetime, timezone

    rng = random.Random(seed)
    results = []
    for k in range(students):
        for assignment_id in assignment_ids:
            assignment = load_assignment(assignment_id)
            parts = []
            for part in assignment.parts:
                earned = rng.choice([0.0, part.points, round(part.points * rng.random(), 3)])
                checks = [] if part.written else [CheckResult("check", part.grade_id, earned == part.points, earned,
                                                                part.points, "", "")]
                parts.append(PartResult(part.grade_id, 0.0 if part.written else earned, part.points, checks,
                                        by_hand=part.written))
            when = datetime(2026, 11, 1 + k % 28, 8, 30, 15, 123456 * (k % 3), tzinfo=timezone.utc)
            handin = rng.choice([None, HandIn(submitted_at=_iso(when.replace(tzinfo=None)),
                                              submitted_exact=when.replace(tzinfo=None).isoformat(),
                                              penalty=rng.choice([0.0, 1.5])),
                                 HandIn(submitted_at=_iso(when.replace(tzinfo=None)), penalty=2.0), HandIn()])
            results.append(SubmissionResult(f"s{k:03d}", assignment_id, "graded", sum(p.score for p in parts),
                                            assignment.max_score, parts=parts, handin=handin))
    return results


def test_new_submissions_inserted_directly_make_the_gradebook_add_submission_makes(tmp_path, monkeypatch):
    """The same results recorded both ways (nbgrader's add_submission and the ORM, or rows inserted directly) give
    the same gradebook, row for row and in the same order; with a gradebook that also has what add_submission
    mirrors and autograde never makes itself (a second notebook, a task cell, a grade cell of no part), a student
    imported before, and a submission there before with the instructor's score in it (recorded the ORM's way both
    times); a task cell named like a part's grade cell in the part's notebook; and, between the batch's two
    transactions, a grade cell added by another connection (as `nbgrader generate_assignment` run meanwhile would).
    What `record` returns is the same too."""
    from nbgrader.api import Gradebook

    ids = ["rmsnorm", "gradient_flow", "mla"]
    results = _synthetic_results(ids, students=9)
    results.append(results[0])  # recorded twice: the second time it is there already
    added = []
    original = Gradebook.add_submission
    monkeypatch.setattr(Gradebook, "add_submission", lambda self, *a, **k: added.append(a) or original(self, *a, **k))
    returned = {}
    for way in ("orm", "rows"):
        with CourseGradebook(tmp_path / f"{way}.db") as gb:
            gb.by_rows = way == "rows"
            mla = load_assignment("mla")
            gb.ensure_assignment(mla)
            gb.gb.update_or_create_notebook("extra", "mla")
            gb.gb.update_or_create_task_cell("extra_task", "extra", "mla", max_score=1.0, cell_type="markdown")
            # a grade cell of the other notebook named as a part's: the part's score is not its
            gb.gb.update_or_create_grade_cell(mla.parts[0].grade_id, "extra", "mla", max_score=2.0, cell_type="code")
            gb.gb.update_or_create_task_cell("own_task", mla.source.stem, "mla", max_score=1.0, cell_type="markdown")
            gb.gb.add_student("s001", first_name="一", last_name="学生")
            gb.gb.add_student("s002")
            gb.ensure_assignment(load_assignment("rmsnorm"))
            flow = load_assignment("gradient_flow")
            gb.ensure_assignment(flow)  # a task cell with a part's name, where the part's grade cell is
            gb.gb.update_or_create_task_cell(flow.parts[0].grade_id, flow.source.stem, "gradient_flow", max_score=1.0,
                                             cell_type="markdown")
            with warnings.catch_warnings():  # nbgrader's add_submission trips SQLAlchemy's autoflush warnings
                warnings.simplefilter("ignore", SAWarning)
                before = gb.gb.add_submission("rmsnorm", "s002")  # there before, with the instructor's score in it
            grade = next(g for g in before.notebooks[0].grades if g.name == load_assignment("rmsnorm").parts[0].grade_id)
            grade.manual_score = 1.0
            gb.gb.db.commit()
            calls = len(added)
            half = len(results) // 2
            with gb.batch():
                returned[way] = [gb.record(r, load_assignment(r.assignment_id)) for r in results[:half]]
                gb.commit()
                with Gradebook(f"sqlite:///{tmp_path / f'{way}.db'}") as other:
                    other.update_or_create_grade_cell("added_meanwhile", "rmsnorm", "rmsnorm", max_score=1.0,
                                                      cell_type="code")
                returned[way] += [gb.record(r, load_assignment(r.assignment_id)) for r in results[half:]]
                gb.commit()
            # the ORM's way for every submission, or for none but the two already there
            assert len(added) - calls == (len(results) - 2 if way == "orm" else 0)
    assert returned["orm"] == returned["rows"]
    orm, rows = gradebook_rows(tmp_path / "orm.db"), gradebook_rows(tmp_path / "rows.db")
    assert orm.keys() == rows.keys()
    for table in orm:
        assert orm[table] == rows[table], table
    # what the comparison saw: every kind of row the fast way writes, in numbers that fit the results
    assert len(orm["submitted_assignment"]) == 9 * 3
    assert len(orm["task_cells"]) == 3
    named_as_a_part = [r for r in orm["grade"] if r[2][2] == flow.parts[0].grade_id]  # r[2]: its cell
    assert {r[2][3] for r in named_as_a_part} == {"GradeCell", "TaskCell"}
    assert all((r[3] is None) == (r[2][3] == "TaskCell") for r in named_as_a_part)  # the score is the grade cell's
    meanwhile = [r for r in orm["grade"] if r[2][2] == "added_meanwhile"]
    assert 0 < len(meanwhile) < 9  # the submissions recorded after it, and only those, have its grade
    assert {r[4] for r in orm["submitted_notebook"]} >= {None, 0.0, 1.5, 2.0}
    # `nbgrader export` sums a submission's notebooks' penalties: the whole on the assignment's own, 0.0 on the other
    mla_rows = [r for r in orm["submitted_notebook"] if r[2][1] == ("assignment", "mla")]
    assert {r[4] for r in mla_rows if r[2][2] == "extra"} == {None, 0.0}
    assert {r[4] for r in mla_rows if r[2][2] != "extra"} >= {None, 1.5, 2.0}
    assert any(r[3] is not None and "." in r[3] for r in orm["submitted_assignment"])


def test_submissions_there_already_are_updated_directly_as_the_orm_updates_them(tmp_path):
    """A class recorded, then recorded again with other results (other scores, hand-ins added, changed and gone),
    with the instructor's scores given in formgrader in between (a written part with one needs no manual grade):
    the same gradebook, row for row, and the same returned values, whether the second round updates the rows
    directly or takes the ORM's way. In the same transaction, a submission just updated directly is then written
    the ORM's way while the session holds its objects as loaded before: they are read again, not taken as they
    were. A part's grade row gone (made again when the gradebook is opened) is written the same way too."""
    import sqlite3
    from dataclasses import replace

    from nbgrader.api import Gradebook

    ids = ["rmsnorm", "gradient_flow", "mla"]
    first, second = _synthetic_results(ids, students=6), _synthetic_results(ids, students=6, seed=8)
    again = first[0]  # written once more, the ORM's way, after its update in the same transaction
    assert {p.grade_id: p.auto_score for p in again.parts} != {p.grade_id: p.auto_score for p in second[0].parts}
    returned, lost_returned = {}, {}
    for way in ("orm", "rows"):
        path = tmp_path / f"{way}.db"
        with CourseGradebook(path) as gb:
            gb.by_rows = False  # the first round the same way both times
            for r in first:
                gb.record(r, load_assignment(r.assignment_id))
        with Gradebook(f"sqlite:///{path}") as other:  # formgrader, meanwhile
            for r in first[:9]:
                assignment = load_assignment(r.assignment_id)
                part = next((p for p in assignment.parts if p.written), assignment.parts[-1])
                other.find_grade(part.grade_id, assignment.source.stem, assignment.id, r.student_id).manual_score = 0.5
            other.db.commit()
        with CourseGradebook(path) as gb:
            gb.by_rows = way == "rows"
            with gb.batch():
                held = gb.gb.find_submission(again.assignment_id, again.student_id)
                held_grades = [g for nb in held.notebooks for g in nb.grades]  # loaded now, kept by the session
                assert {g.auto_score for g in held_grades} != {None}
                returned[way] = [gb.record(r, load_assignment(r.assignment_id)) for r in second]
                gb.by_rows = False
                returned[way].append(gb.record(again, load_assignment(again.assignment_id)))
                gb.commit()
        lost = second[3]  # a part's grade row gone (an older autograde's gradebook): made again, then written
        part = load_assignment(lost.assignment_id).parts[0]
        db = sqlite3.connect(path)
        gone = db.execute("delete from grade where id in (select g.id from grade g join submitted_notebook n on "
                          "g.notebook_id = n.id join submitted_assignment s on n.assignment_id = s.id join "
                          "grade_cells c on g.cell_id = c.id join base_cell b on c.id = b.id where s.student_id = ? "
                          "and b.name = ?)", (lost.student_id, part.grade_id)).rowcount
        db.commit()
        db.close()
        assert gone == 1
        with CourseGradebook(path) as gb:
            gb.by_rows = way == "rows"
            other_scores = replace(lost, parts=[replace(p, score=0.0) for p in lost.parts])
            lost_returned[way] = gb.record(other_scores, load_assignment(lost.assignment_id))
            assert gb.scores(lost.assignment_id, lost.student_id)[part.grade_id] is not None
    assert returned["orm"] == returned["rows"]
    assert lost_returned["orm"] == lost_returned["rows"]
    orm, rows = gradebook_rows(tmp_path / "orm.db"), gradebook_rows(tmp_path / "rows.db")
    assert orm.keys() == rows.keys()
    for table in orm:
        assert orm[table] == rows[table], table
    # what the comparison saw: scores replaced, hand-ins' times and penalties changed, a manual grade that decided
    assert sum(1 for r in returned["rows"] if r) >= len(second) // 2
    changed = {(a.student_id, a.assignment_id) for a, b in zip(first, second) if a.handin != b.handin}
    assert len(changed) >= len(second) // 3
    assert {r[4] for r in orm["submitted_notebook"]} >= {0.0, 1.5, 2.0}
    assert any(r[4] is not None and not r[6] for r in orm["grade"])  # a manual score: no manual grade needed


def test_a_direct_update_reads_the_rows_and_leaves_the_session_nothing_stale(tmp_path):
    """Inside a batch that has written nothing yet, formgrader (another connection) gives a part another auto score.
    A direct update reads the rows, not the objects the session held from before: that part already has the
    score it writes, and the returned dict says so. A write of the same submission the ORM's way next, in the same
    transaction, then sees that score too (every grade the direct way read is read again), and replaces it."""
    from dataclasses import replace

    from nbgrader.api import Gradebook

    [first] = _synthetic_results(["rmsnorm"], students=1)
    assignment = load_assignment("rmsnorm")
    part = next(p for p in assignment.parts if not p.written)
    at = next(i for i, p in enumerate(first.parts) if p.grade_id == part.grade_id)
    scored = lambda score: replace(first, parts=[  # noqa: E731
        replace(p, score=score, checks=[replace(c, points=score) for c in p.checks]) if i == at else p
        for i, p in enumerate(first.parts)])
    path = tmp_path / "gradebook.db"
    with CourseGradebook(path) as gb:
        gb.record(scored(1.0), assignment)
    with CourseGradebook(path) as gb:
        with gb.batch():
            held = gb.gb.find_submission("rmsnorm", first.student_id)
            held_grades = [g for nb in held.notebooks for g in nb.grades]  # the session holds them, as loaded
            assert part.grade_id in {g.name for g in held_grades}
            with Gradebook(f"sqlite:///{path}") as other:
                other.find_grade(part.grade_id, assignment.source.stem, "rmsnorm", first.student_id).auto_score = 0.25
                other.db.commit()
            assert part.grade_id not in gb.record(scored(0.25), assignment)  # the row has 0.25 already
            gb.by_rows = False
            assert gb.record(scored(1.0), assignment) == {part.grade_id: 0.25}
            gb.commit()
    with CourseGradebook(path) as gb:
        assert gb.scores("rmsnorm", first.student_id)[part.grade_id] == 1.0


def test_a_kept_result_whose_failure_cannot_be_recorded_leaves_the_stored_scores_in_the_gradebook(tmp_path,
                                                                                                  monkeypatch):
    """keep(): a kept result finished again (its scores had been overwritten) whose files fail, and whose failure's
    files fail too (a full disk): the failure is reported, the result file keeps the stored scores, and so does
    the gradebook (written again from the store, as results.json and grades.csv show it), not the failure's
    zeros."""
    from types import SimpleNamespace

    from autograder import class_run
    from autograder.intake.discovery import FoundSubmission
    from autograder.recording.outputs import ResultStore
    from autograder.recording.rendered import RecordingFacts

    flow = load_assignment("gradient_flow")
    stored = next(r for r in _synthetic_results(["gradient_flow"], students=6)
                  if any(p.auto_score for p in r.parts))
    key = (stored.student_id, stored.assignment_id)
    out = tmp_path / "out"
    run = class_run.ClassRun(opts=None, assignment_ids=[flow.id], out=out, course=None,
                             gradebook_path=tmp_path / "gradebook.db")
    run.store = ResultStore(out)
    run.store.save(stored)
    run.assignments = {flow.id: flow}
    run.found_by_key = {key: FoundSubmission(*key, tmp_path / key[0] / "gradient_flow.ipynb")}
    run.handin_settings = SimpleNamespace(release_flagged_feedback=False)
    run.students = {stored.student_id: {"email": "", "named": False}}
    run.state = SimpleNamespace(roster=[], added_students=[])
    run.restored = {key}  # its scores had been overwritten (nbgrader autograde): finished again, its files again
    monkeypatch.setattr(class_run, "facts_of", lambda run, f: RecordingFacts(handin=stored.handin))
    monkeypatch.setattr(class_run, "finish", lambda result, known: "rendered")

    def disk_full(run, result, rendered):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(class_run, "write_files", disk_full)
    class_run.open_gradebook(run)
    try:
        class_run.keep(run)
    finally:
        class_run.close_gradebook(run)
    assert run.unrecorded == {key} and len(run.record_failures) == 1
    [in_store] = run.store.all()
    want = {p.grade_id: p.auto_score for p in stored.parts}
    assert {p.grade_id: p.auto_score for p in in_store.parts} == want
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        scores = gb.scores(flow.id, stored.student_id)
    assert {grade_id: scores[grade_id] for grade_id, auto in want.items() if auto is not None} == \
        {grade_id: auto for grade_id, auto in want.items() if auto is not None}
    assert any(want.values())


def test_a_result_recorded_outside_a_batch_is_committed_both_ways(tmp_path):
    """`record` outside `batch` is its own transaction, committed (the ORM's way always was): closing the gradebook
    loses nothing, and the other connection that reads it next waits for no lock."""
    results = _synthetic_results(["rmsnorm"], students=2)
    for way in ("orm", "rows"):
        path = tmp_path / f"{way}.db"
        with CourseGradebook(path) as gb:
            gb.by_rows = way == "rows"
            for result in results:
                gb.record(result, load_assignment("rmsnorm"))
            with CourseGradebook(path) as other:  # while the first is still open
                assert other.scores("rmsnorm", "s001") == {p.grade_id: p.auto_score for p in results[1].parts}
        with CourseGradebook(path) as gb:
            assert gb.scores("rmsnorm", "s000") == {p.grade_id: p.auto_score for p in results[0].parts}
    assert gradebook_rows(tmp_path / "orm.db") == gradebook_rows(tmp_path / "rows.db")


def test_a_due_date_is_read_once_per_gradebook_opened_also_when_the_assignment_is_not_there(tmp_path, monkeypatch):
    from nbgrader.api import Gradebook

    asked = []
    original = Gradebook.find_assignment
    monkeypatch.setattr(Gradebook, "find_assignment", lambda self, name: asked.append(name) or original(self, name))
    with CourseGradebook(tmp_path / "gradebook.db") as gb:
        assert [gb.due_date("rmsnorm") for _ in range(3)] == [None, None, None]
        gb.gb.add_assignment("rope", duedate="2026-11-30 23:59:00")
        assert [str(gb.due_date("rope")) for _ in range(3)] == ["2026-11-30 23:59:00"] * 3
    assert asked == ["rmsnorm", "rope"]


def test_submissions_made_before_a_cell_was_in_the_gradebook_get_its_grade_and_comment(tmp_path):
    """nbgrader's autograde and formgrader expect a grade per grade cell and a comment per solution cell in every
    submission. Submissions made before a cell was in the gradebook (their rows deleted here, some of them only) get
    them when the gradebook is opened again, once each, also in a session that had loaded them before."""
    import sqlite3

    results = _synthetic_results(["rmsnorm", "mla"], students=4)
    path = tmp_path / "gradebook.db"
    with CourseGradebook(path) as gb:
        for result in results:
            gb.record(result, load_assignment(result.assignment_id))
    pairs = lambda rows: sorted(map(repr, ((r[1], r[2]) for r in rows)))  # noqa: E731 (submitted notebook, cell)
    full = gradebook_rows(path)
    db = sqlite3.connect(path)
    for table, keep in (("grade", 1), ("comment", 2)):  # s001 and s002 lack rows, s000 and s003 keep them all
        db.execute(f"delete from {table} where rowid in (select t.rowid from {table} t join submitted_notebook n "
                   f"on t.notebook_id = n.id join submitted_assignment a on n.assignment_id = a.id "
                   f"where a.student_id in ('s001', 's002') and t.rowid % 3 != {keep})")
    db.commit()
    db.close()
    gone = gradebook_rows(path)
    assert len(gone["grade"]) < len(full["grade"]) and len(gone["comment"]) < len(full["comment"])
    with CourseGradebook(path) as gb:
        gb.gb.find_submission("mla", "s001").notebooks[0].grades  # loaded before: the fill still sees its rows
        for assignment_id in ("rmsnorm", "mla"):
            gb.ensure_assignment(load_assignment(assignment_id))
    after = gradebook_rows(path)
    for table in ("grade", "comment"):
        assert pairs(after[table]) == pairs(full[table]), table


# students as `nbgrader db student import` leaves them: names and emails or none, empty strings, ties in the order
STUDENTS = [("s3", "丙", "张", "c@example.org"), ("s1", None, None, None), ("s2", "乙", "张", None), ("s4", "", "", ""),
            ("ann lee", "Ann", "Lee", "ann@example.org"), ("s5", None, "张", None), ("s6", "乙", "张", "z@example.org")]


def _gradebook_with(path, students):
    path.parent.mkdir(parents=True, exist_ok=True)
    with CourseGradebook(path) as gb:
        for student_id, first, last, email in students:
            gb.gb.add_student(student_id, first_name=first, last_name=last, email=email)


def test_the_roster_read_without_nbgrader_is_nbgrader_s_in_its_order(tmp_path):
    """class_run.gradebook_students reads the students with sqlite3 (a run's start, before its workers): the same
    students, emails, 'named' and order as nbgrader's API gives, in a folder whose name a URI would misread."""
    from autograder.class_run import gradebook_students

    path = tmp_path / "my course #1" / "gradebook.db"
    _gradebook_with(path, STUDENTS)
    with CourseGradebook(path) as gb:
        expected = gb.students()
    assert list(gradebook_students(path).items()) == list(expected.items())
    assert expected["s1"] == {"email": "", "named": False} and expected["s6"] == {"email": "z@example.org",
                                                                               "named": True}


def test_reading_the_roster_imports_neither_nbgrader_nor_sqlalchemy(tmp_path):
    path = tmp_path / "gradebook.db"
    _gradebook_with(path, STUDENTS)
    code = ("import sys; from autograder.class_run import gradebook_students; "
            f"print(sorted(gradebook_students({str(path)!r}))); "
            "print([m for m in ('nbgrader', 'sqlalchemy', 'nbformat') if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == [repr(sorted(s[0] for s in STUDENTS)), "[]"], done.stdout + done.stderr


def test_a_file_the_read_cannot_take_is_opened_by_nbgrader_as_before(tmp_path):
    """A database without nbgrader's tables is made a gradebook by nbgrader's API (as it always was here); a file
    that is not a database fails as nbgrader's API fails on it."""
    import sqlite3

    from autograder.class_run import gradebook_students

    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    empty.write_bytes(b"")
    assert gradebook_students(empty) == {}
    with sqlite3.connect(empty) as db:  # nbgrader made it a gradebook
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'student'").fetchone() == ("student",)
    text = tmp_path / "notes.db"
    text.write_text("not a database, " * 100)
    with pytest.raises(Exception) as ours:
        gradebook_students(text)
    with pytest.raises(Exception) as theirs:
        CourseGradebook(text)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
