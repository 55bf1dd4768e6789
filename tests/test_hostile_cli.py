"""Hostile cases that go through `autograde grade` (discovery, student ids) or need two graders at once.

- attack_other_sandboxes: one student's code kills, stops and ptraces every process it can find while
  another student's honest notebook is graded by a second grader at the same time; the honest result equals
  the same notebook graded alone. Under every tier that fences processes (tests/hostile/corpus.py).
- zip_with_dotdot, odd_student_ids, student_id_with_slash: refused or graded under the exact id, with
  every file inside the output folder.
(kill_9_and_resume is tests/test_cli.py's resume test, whose class holds hostile submissions.)
"""

import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.intake.discovery import Discovery, FoundSubmission
from autograder.run import GradingRunError, RunOptions, run_grading
from autograder.recording.outputs import ResultStore
from autograder.running.sandbox import tiers, uids
from conftest import release_notebook, source_notebook
from hostile.corpus import CONCURRENT, SLOW_HONEST, Context, plant_course, submission
from hostile.watch import machine_tiers, leftover_pool_processes, live_children, tree_fingerprint

pytestmark = pytest.mark.slow

MACHINE_TIERS = machine_tiers()
FAST = ["--cell-timeout", "8", "--probe-timeout", "8"]


def cli(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "autograder.cli", *args]


def cli_env() -> dict:
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def nbgrader_layout(root: Path, student: str, notebook) -> Path:
    folder = root / student / "rmsnorm"
    folder.mkdir(parents=True)
    if isinstance(notebook, Path):
        nbformat.write(nbformat.read(notebook, as_version=4), folder / "rmsnorm.ipynb")
    else:
        nbformat.write(notebook, folder / "rmsnorm.ipynb")
    return root


def identities(out: Path) -> dict[str, dict]:
    return {r.student_id: r.identity() for r in ResultStore(out).all()}


class PoolWatch:
    """Samples which sandbox uids have live processes; `most` is the largest number seen at one time."""

    def __enter__(self):
        self.most, self._stop = 0, threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            busy = sum(1 for uid in range(uids.FIRST_UID, uids.FIRST_UID + uids.POOL_SIZE) if uids.processes_of(uid))
            self.most = max(self.most, busy)
            time.sleep(0.1)

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


@pytest.fixture(scope="module")
def honest_alone(tmp_path_factory):
    """The honest, slow notebook graded alone (the strongest tier: an honest result does not depend on it)."""
    tmp = tmp_path_factory.mktemp("honest-alone")
    from autograder.examples import notebook_with_edits

    nbgrader_layout(tmp / "sub", "bob", notebook_with_edits("rmsnorm", [], list(SLOW_HONEST)))
    done = subprocess.run(cli(["grade", "rmsnorm", "--submissions", str(tmp / "sub"), "--out", str(tmp / "out"),
                               *FAST]), env=cli_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    result = identities(tmp / "out")["bob"]
    assert result["score"] == 10
    return result


@pytest.mark.parametrize("tier", tiers.TIERS)
def test_an_attack_on_other_sandboxes_changes_nothing_of_theirs(tier, honest_alone, tmp_path):
    if tier not in MACHINE_TIERS:
        pytest.skip(f"tier {tier} does not work on this machine")
    if tier not in CONCURRENT.contained_by:
        pytest.skip(f"the {tier} tier does not fence processes here: not run under it")
    from autograder.examples import notebook_with_edits

    ctx = Context(tmp_path / "markers", plant_course(tmp_path / "course", "HOSTILE-SECRET-x"), "HOSTILE-SECRET-x")
    attacker = submission(CONCURRENT, tmp_path / "attacker-nb", ctx)
    nbgrader_layout(tmp_path / "a", "mallory", attacker)
    nbgrader_layout(tmp_path / "b", "bob", notebook_with_edits("rmsnorm", [], list(SLOW_HONEST)))
    children = live_children(os.getpid())
    with PoolWatch() as watch:
        procs = [subprocess.Popen(cli(["grade", "rmsnorm", "--submissions", str(tmp_path / side), "--out",
                                       str(tmp_path / f"out-{side}"), "--sandbox", tier, *FAST]),
                                  env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for side in ("a", "b")]
        outputs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-2000:]
    if os.geteuid() == 0:
        assert watch.most >= 2, "the two sandboxes never ran at the same time: the attack proved nothing"
    mallory = ResultStore(tmp_path / "out-a").all()[0]
    assert mallory.status == "graded" and mallory.tier == tier
    hits = [c.error_message for c in mallory.cells if not c.ok]
    assert hits == [], f"the attacker reached other processes: {hits}"
    assert identities(tmp_path / "out-b")["bob"] == honest_alone
    assert live_children(os.getpid()) == children and leftover_pool_processes() == {}


def test_a_zip_with_a_dotdot_member_is_refused_and_nothing_is_written_outside(tmp_path):
    archive = tmp_path / "lms.zip"
    honest = source_notebook("rmsnorm").read_bytes()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("alice_rmsnorm.ipynb", honest)
        zf.writestr("../evil_rmsnorm.ipynb", honest)
        zf.writestr("x/../../../evil2_rmsnorm.ipynb", honest)
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    with pytest.raises(GradingRunError, match="outside the archive") as info:
        run_grading(RunOptions(assignments=["rmsnorm"], submissions=archive, out=tmp_path / "out"))
    assert info.value.exit_code == 2
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before
    assert not list(tmp_path.rglob("evil*")) and not (tmp_path / "out" / "results").exists()


ODD_IDS = ["Zhang Wei", "张伟", "=cmd|'C calc'!A0", "-rf", "a%2Fb", "ünïcödé ☃"]


def test_odd_student_ids_are_graded_under_their_exact_id(tmp_path):
    course = tmp_path / "course"
    for i, sid in enumerate(ODD_IDS):
        nbgrader_layout(course / "submitted", sid, source_notebook("rmsnorm") if i == 0 else release_notebook("rmsnorm"))
    (course / "nbgrader_config.py").write_text("")
    outside = tree_fingerprint(tmp_path)
    summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=course / "submitted", out=tmp_path / "out",
                                     cell_timeout=8, probe_timeout=8, gradebook=tmp_path / "out" / "gradebook.db"))
    by_id = {r.student_id: r for r in summary.results}
    assert sorted(by_id) == sorted(ODD_IDS)
    assert by_id["Zhang Wei"].score == 10 and all(r.status == "graded" for r in by_id.values())
    rows = json.loads((tmp_path / "out" / "results.json").read_text())
    assert sorted(r["student"] for r in rows) == sorted(ODD_IDS)
    for sid in ODD_IDS:
        assert (course / "feedback" / sid / "rmsnorm" / "rmsnorm.html").is_file(), sid
        assert (course / "autograded" / sid / "rmsnorm" / "rmsnorm.ipynb").is_file(), sid  # for formgrader
    written = set(tree_fingerprint(tmp_path)) - set(outside)
    allowed = (str(tmp_path / "out") + "/", str(course / "feedback") + "/", str(course / "autograded") + "/")
    assert all(p.startswith(allowed) for p in written), sorted(p for p in written if not p.startswith(allowed))
    assert not set(outside) - set(tree_fingerprint(tmp_path))


def test_a_student_id_with_a_slash_stays_inside_the_output_folder(tmp_path, monkeypatch):
    """Discovery takes ids from folder names, so none holds `/` or `..`; an id from elsewhere (the API, a future
    layout) may: the whole record path (results, report, gradebook, nbgrader feedback) stays inside OUT and the
    course's feedback/."""
    import autograder.class_run

    course = tmp_path / "work" / "course"
    folder = course / "submitted" / "x" / "rmsnorm"
    folder.mkdir(parents=True)
    (folder / "rmsnorm.ipynb").write_bytes(b"{")  # an error: no sandbox needed for what this tests
    (course / "nbgrader_config.py").write_text("")
    sid = "../../escaped/../x/evil"
    monkeypatch.setattr(autograder.class_run, "discover", lambda *a, **k: Discovery(
        "nbgrader", course / "submitted", [FoundSubmission(sid, "rmsnorm", folder / "rmsnorm.ipynb", folder)]))
    out = tmp_path / "work" / "out"
    before = tree_fingerprint(tmp_path)
    summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=course / "submitted", out=out,
                                     gradebook=out / "gradebook.db"))
    assert [(r.student_id, r.status) for r in summary.results] == [(sid, "error")]
    written = set(tree_fingerprint(tmp_path)) - set(before)
    inside = (str(out) + "/", str(course / "feedback") + "/")
    assert any(p.startswith(str(course / "feedback")) for p in written), sorted(written)
    assert all(p.startswith(inside) for p in written), sorted(p for p in written if not p.startswith(inside))
    assert [r.student_id for r in ResultStore(out).all()] == [sid]
