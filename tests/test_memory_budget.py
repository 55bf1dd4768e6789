"""A memory budget per submission, all its processes together (issue 21), on both paths: the pool uid's cgroup and
the grader's watchdog.

A submission forks three children that each allocate and touch 500 MiB, against a 1 GiB budget (each child alone
is far below the per-process RLIMIT_AS): it must end within 5 s of passing its budget, with the outcome
"内存超出限制", and the honest submission graded after it must get what it got before it. Watched from outside:
a sampler in the test reads the pool uids' memory (the cgroup's usage, or the sum of their processes' PSS) and
when their processes are gone.
"""

import threading
import time
from dataclasses import replace

import pytest

from hostile.corpus import MEMORY_HOG

from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.running.sandbox import memory, uids
from grading_helpers import TEST_LIMITS, edited_notebook

pytestmark = pytest.mark.slow

BUDGET = 1024**3
FIRST_UID, POOL = 61980, 4  # a pool of the test's own, outside the usual one: the sampler watches only these
HOG = MEMORY_HOG  # three children touching 500 MiB each (the hostile corpus's case)


class Sampler(threading.Thread):
    """Every 20 ms: is a pool uid over the budget (first time: `passed`), and once it was, are its processes gone
    (first time: `ended`)."""

    def __init__(self, path: str):
        super().__init__(daemon=True)
        self.path, self.passed, self.ended, self.peak = path, None, None, 0
        self.stop = threading.Event()
        self.over_uid = None

    def used(self, uid: int) -> int:
        if self.path == "cgroup":
            layout = memory.cgroup_layout()
            name = "memory.current" if layout.version == 2 else "memory.usage_in_bytes"
            try:
                return int((layout.memory_parent / f"{memory.PREFIX}{uid}" / name).read_text())
            except (OSError, ValueError):
                return 0
        return sum(memory.pss_bytes(pid) for pid in uids.processes_of(uid))

    def run(self):
        while not self.stop.wait(0.02):
            now = time.monotonic()
            if self.over_uid is None:
                for uid in range(FIRST_UID, FIRST_UID + POOL):
                    used = self.used(uid)
                    self.peak = max(self.peak, used)
                    # 80% of the budget on both paths, as this sampler (slower than its 20 ms on a busy machine)
                    # may miss the last step that passes it, the grader killing at once: the watchdog's PSS of every
                    # process of the pool (CI once saw 0.89 GiB last), and the cgroup's memory.current (a full run
                    # once saw 0.961 GiB last, under the 0.97 the grader counts as passed). The clock starts early,
                    # so the time measured to the end is at least the true one; a hog left alone holds 1.5 GiB for
                    # 120 s
                    threshold = 0.8 * BUDGET
                    if used >= threshold:
                        self.passed, self.over_uid = now, uid
                        break
            elif not uids.processes_of(self.over_uid):
                self.ended = now
                return


@pytest.fixture
def own_pool(monkeypatch):
    monkeypatch.setattr(uids, "FIRST_UID", FIRST_UID)
    monkeypatch.setattr(uids, "POOL_SIZE", POOL)


@pytest.mark.parametrize("path", ["cgroup", "watchdog"])
def test_a_multi_process_hog_ends_within_5_s_of_its_budget_and_the_batch_goes_on(path, own_pool, tmp_path):
    if path == "cgroup":
        try:
            memory.resolve("cgroup")
        except memory.MemoryGuardUnavailable as exc:
            pytest.skip(str(exc))
    honest = edited_notebook("rmsnorm", [], tmp_path / "honest" / "rmsnorm.ipynb")
    hog = edited_notebook("rmsnorm", [], tmp_path / "hog" / "rmsnorm.ipynb", extra_cells=[(12, HOG)])
    limits = replace(TEST_LIMITS, submission_memory_bytes=BUDGET, memory_guard=path)
    sampler = Sampler(path)
    sampler.start()
    try:
        first, hogged, last = grade_batch([Submission(honest, "rmsnorm", "alice"), Submission(hog, "rmsnorm", "bob"),
                                           Submission(honest, "rmsnorm", "alice")], GradingOptions(limits=limits))
    finally:
        sampler.stop.set()
        sampler.join()
    where = [hogged.message, [(c.index, c.error_type, c.error_message[:80]) for c in hogged.cells if not c.ok]]
    assert first.score == first.max_score and all(c.ok for c in first.cells)
    assert last.identity() == first.identity()
    assert hogged.status == "graded" and hogged.score == 0, where
    assert "内存超出限制" in hogged.message, where
    assert [c.error_type for c in hogged.cells if not c.ok][0] == "MemoryLimit", where
    assert all("内存超出限制" in c.message for p in hogged.parts for c in p.checks), where
    assert sampler.passed is not None and sampler.ended is not None, (sampler.peak, where)
    print(f"{path}: passed its budget -> all its processes gone in {sampler.ended - sampler.passed:.2f} s")
    assert sampler.ended - sampler.passed < 5.0
    if path == "cgroup":  # nothing left of the cgroups made
        layout = memory.cgroup_layout()
        uids.wait_for_releases()
        own = {f"{memory.PREFIX}{uid}" for uid in range(FIRST_UID, FIRST_UID + POOL)}  # other tests run alongside
        assert not [p for p in layout.memory_parent.glob(f"{memory.PREFIX}*") if p.name in own]
        if layout.pids_parent is not None:
            assert not [p for p in layout.pids_parent.glob(f"{memory.PREFIX}*") if p.name in own]


@pytest.mark.parametrize("option, value, said", [("--memory-guard", "bogus", "Invalid value for '--memory-guard'"),
                                                 ("--memory-budget", "10", "too small"),
                                                 ("--memory-budget", "lots", "not a size")])
def test_the_cli_refuses_a_memory_option_it_cannot_use(option, value, said, tmp_path):
    import subprocess
    import sys

    (tmp_path / "subs").mkdir()
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "grade", "rmsnorm", "-s", str(tmp_path / "subs"),
                           "-o", str(tmp_path / "out"), option, value], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr


def test_a_crashed_graders_cgroup_is_emptied_reset_and_removed(monkeypatch):
    """A grader killed while a sandbox ran leaves the uid's cgroup with a process in it and its limits: the next
    sandbox on that uid kills that process, resets the limits to its own budget, and removes the cgroup at the end."""
    import os
    import subprocess

    from autograder.running.sandbox import environment
    from autograder.running.sandbox.process import Sandbox

    try:
        memory.resolve("cgroup")
    except memory.MemoryGuardUnavailable as exc:
        pytest.skip(str(exc))
    uid = FIRST_UID
    monkeypatch.setattr(uids, "FIRST_UID", uid)
    monkeypatch.setattr(uids, "POOL_SIZE", 1)
    layout = memory.cgroup_layout()
    leftover = memory.UidCgroup(layout, uid, 300 * 1024**2, 10).create()
    orphan = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "300"])
    try:
        (leftover.memory_dir / "cgroup.procs").write_text(str(orphan.pid))
        limit_file = "memory.max" if layout.version == 2 else "memory.limit_in_bytes"
        assert int((leftover.memory_dir / limit_file).read_text()) == 300 * 1024**2
        limits = replace(TEST_LIMITS, submission_memory_bytes=BUDGET, memory_guard="cgroup")
        with Sandbox(environment.locate(), "bubblewrap", limits) as box:
            assert orphan.wait(timeout=10) == -9  # killed when the uid was acquired
            assert int((leftover.memory_dir / limit_file).read_text()) == BUDGET
            inside = [int(p) for p in (leftover.memory_dir / "cgroup.procs").read_text().split()]
            assert inside and all(os.stat(f"/proc/{p}").st_uid in (0, uid) for p in inside)
            assert box.request({"op": "exec_cell", "source": "x = 1", "cell": 0}, None, 10).ok
        uids.wait_for_releases()
        assert not leftover.memory_dir.exists()
        assert leftover.pids_dir is None or not leftover.pids_dir.exists()
    finally:
        orphan.kill()
        orphan.wait()
        leftover.remove()


# a cell that starts a thread and forks a child, both alive until the test looks (the parent's thread waits)
SPREAD = """
import os, threading, time
_stop = threading.Event()
_thread = threading.Thread(target=_stop.wait, daemon=True)
_thread.start()
_child = os.fork()
if _child == 0:
    time.sleep(60)
    os._exit(0)
"""


@pytest.mark.parametrize("tier", ["bubblewrap", "landlock", "rlimits"])
def test_every_task_of_a_sandbox_is_in_its_uids_cgroups(tier, own_pool):
    """The sandbox's first process moves itself into its uid's memory and pids cgroups before anything runs (on v1
    through the `tasks` files: a fresh fork has one thread, so that move is the whole process's); everything it then
    starts, threads and processes, is born there. Seen from the host: every task of the uid, and no other."""
    import os

    from autograder.running.sandbox import environment
    from autograder.running.sandbox.process import Sandbox
    from hostile.watch import machine_tiers

    try:
        memory.resolve("cgroup")
    except memory.MemoryGuardUnavailable as exc:
        pytest.skip(str(exc))
    if tier not in machine_tiers():
        pytest.skip(f"tier {tier} does not work on this machine")
    limits = replace(TEST_LIMITS, submission_memory_bytes=BUDGET, memory_guard="cgroup")
    with Sandbox(environment.locate(), tier, limits) as box:
        assert box.request({"op": "exec_cell", "source": SPREAD, "cell": 0}, None, 30).ok
        uid = box.lease.uid
        cgroup = box.lease.cgroup
        processes = uids.processes_of(uid)
        tasks = {int(t) for pid in processes for t in os.listdir(f"/proc/{pid}/task")}
        assert len(processes) >= 2 and len(tasks) >= 3, tasks  # the first process, its thread, the fork
        for directory in filter(None, (cgroup.memory_dir, cgroup.pids_dir)):
            listed = "cgroup.threads" if cgroup.layout.version == 2 else "tasks"
            inside = {int(t) for t in (directory / listed).read_text().split()}
            assert tasks <= inside, (directory, tasks - inside)
            # the rest, if any, is the sandbox's root-owned monitor (bubblewrap's PID 1 as root, or the process
            # that forked the first one), never a task of another uid
            assert all(os.stat(f"/proc/{t}").st_uid in (0, uid) for t in inside - tasks), inside - tasks
