"""Tampering gains nothing, and hostile cells cost only themselves: under every tier this machine runs.

Each case is the rmsnorm reference notebook with a trick, graded next to the same notebook without
the trick (its baseline); the two must score the same, check by check. A case that a tier cannot
contain is not run under that tier (CONTAINED_BY says which tiers contain it).
"""

import fcntl
import hashlib
import os
from dataclasses import dataclass

import pytest

from autograder import REPO_ROOT
from autograder.engine import GradingOptions, Submission, grade_batch
from autograder.sandbox import tiers, uids
from grading_helpers import TEST_LIMITS, edited_notebook

pytestmark = pytest.mark.slow

RETURN_LINE = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"
WRONG = [(RETURN_LINE, "return x")]  # a wrong rms_norm: the baseline of the tricks that try to pass it off
RAISES = [(RETURN_LINE, "raise RuntimeError('broken')")]  # the baseline of tricks inside rms_norm
ALL_TIERS = set(tiers.TIERS)
ISOLATING = {"bubblewrap", "landlock"}

FIND_COURSE = """
import os
FOUND = []
for top in ["/", "/work", "/opt", "/root", "/home", "/srv", "/tmp"]:
    try:
        for root, dirs, files in os.walk(top):
            if root.count(os.sep) > 6:
                dirs[:] = []
            for name in files:
                if name in ("rmsnorm.py", "test_rmsnorm.py", "gradebook.db", ".autograde-secret"):
                    FOUND.append(os.path.join(root, name))
            if len(FOUND) > 20:
                break
    except OSError:
        pass
"""


@dataclass(frozen=True)
class Case:
    name: str
    trick_edits: list
    baseline_edits: list
    extra_cells: list = ()
    contained_by: frozenset = frozenset(ALL_TIERS)


CASES = [
    Case("patch_allclose_and_equal", WRONG, WRONG, [(-1, (
        "import torch\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\ntorch.Tensor.__eq__ = lambda *a, **k: True\n"
        "torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)"))]),
    Case("patch_builtins", WRONG, WRONG, [(-1, (
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda *a: 0\n"
        "builtins.abs = lambda x: 0\nbuiltins.max = lambda *a, **k: 0\nbuiltins.float = lambda *a: 0.0"))]),
    Case("lying_tensor_subclass", [(RETURN_LINE, (
        "class Liar(torch.Tensor):\n"
        "        def __eq__(self, other): return True\n"
        "        @classmethod\n"
        "        def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "            return True\n"
        "    return x.as_subclass(Liar)"))], [(RETURN_LINE, "return x")]),
    Case("sys_exit_in_probe", [(RETURN_LINE, "import sys; sys.exit(0)")], RAISES),
    Case("os_exit_in_probe", [(RETURN_LINE, "import os; os._exit(0)")], RAISES),
    Case("raise_keyboard_interrupt", [(RETURN_LINE, "raise KeyboardInterrupt")], RAISES),
    Case("raise_system_exit", [(RETURN_LINE, "raise SystemExit(0)")], RAISES),
    Case("import_solutions", [(RETURN_LINE, "from solutions.rmsnorm import rms_norm as r\n    return r(x, gamma, eps)")],
         RAISES),
    Case("import_autograder", [(RETURN_LINE, "import autograder\n    return x")], RAISES),
    Case("exit_in_a_cell", [], [], [(-1, "import os\nos._exit(0)")]),
    Case("sys_exit_in_first_cell", [], [], [(3, "import sys\nsys.exit(0)")]),
    Case("endless_loop_cell", [], [], [(12, "while True:\n    pass")]),
    Case("endless_loop_ignoring_alarm", [], [], [(12, (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass"))]),
    Case("allocate_50_gb", [], [], [(12, "import torch\nbig = torch.empty(50 * 1024**3, dtype=torch.uint8)")]),
    Case("sleep_forever_in_probe", [(RETURN_LINE, "import time; time.sleep(10**6)")], RAISES),
    Case("read_the_reference_from_disk", [(RETURN_LINE, (
        "for path in FOUND:\n"
        "        if path.endswith('solutions/rmsnorm.py'):\n"
        "            scope = {}\n"
        "            exec(open(path).read().replace('from solutions.student_params import student_rng', ''), scope)\n"
        "            return scope['rms_norm'](x, gamma, eps)\n"
        "    return x"))], WRONG, [(12, FIND_COURSE)], contained_by=frozenset(ISOLATING)),
    Case("write_into_the_course", [], [], [(-1, FIND_COURSE + (
        "for path in FOUND:\n"
        "    try:\n"
        "        open(path, 'a').write('# tampered')\n"
        "    except OSError:\n"
        "        pass\n"
        "for folder in ['/work', '/opt/autograde', '/tmp']:\n"
        "    try:\n"
        "        open(os.path.join(folder, 'TAMPERED'), 'w').write('x')\n"
        "    except OSError:\n"
        "        pass"))], contained_by=frozenset(ISOLATING)),
]


def tree_fingerprint(root) -> dict[str, str]:
    """The hash of every file under the course root, caches left out."""
    hashes = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in {".venv", "__pycache__", ".pytest_cache", ".git"}]
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                hashes[path] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def machine_tiers() -> list[str]:
    return tiers.available()


@pytest.fixture(scope="module", params=tiers.TIERS)
def tier_results(request, tmp_path_factory):
    tier = request.param
    if tier not in machine_tiers():
        pytest.skip(f"tier {tier} does not work on this machine")
    tmp = tmp_path_factory.mktemp(f"tamper-{tier}")
    subs, keys = [], []
    for case in CASES:
        if tier not in case.contained_by:
            continue
        for kind, edits in (("trick", case.trick_edits), ("baseline", case.baseline_edits)):
            extra = case.extra_cells if kind == "trick" else ()
            path = edited_notebook("rmsnorm", edits, tmp / f"{case.name}-{kind}.ipynb", extra_cells=list(extra))
            subs.append(Submission(path, "rmsnorm", "alice"))
            keys.append((case.name, kind))
    before = tree_fingerprint(REPO_ROOT)
    results = grade_batch(subs, GradingOptions(limits=TEST_LIMITS, tier=tier))
    after = tree_fingerprint(REPO_ROOT)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    return tier, dict(zip(keys, results)), changed


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_trick_scores_what_the_baseline_scores(case, tier_results):
    tier, results, _ = tier_results
    if tier not in case.contained_by:
        pytest.skip(f"the {tier} tier does not contain {case.name}: not run under it")
    trick, baseline = results[(case.name, "trick")], results[(case.name, "baseline")]
    assert trick.tier == tier and trick.status == "graded"
    assert trick.identity() == baseline.identity(), [
        (c.name, c.passed, c.message) for p in trick.parts for c in p.checks]


def test_nothing_outside_the_scratch_directory_changed(tier_results):
    tier, _, changed = tier_results
    assert changed == [], f"files of the course changed while grading under {tier}"
    assert not os.path.exists("/work/TAMPERED") and not os.path.exists("/opt/autograde/TAMPERED")


def test_no_process_is_left_running(tier_results):
    if os.geteuid() != 0:
        pytest.skip("sandbox uids are used only when the grader runs as root")
    leftovers = {}
    for uid in range(uids.FIRST_UID, uids.FIRST_UID + uids.POOL_SIZE):
        if not uids.LOCK_DIR.joinpath(f"{uid}.lock").exists():
            continue
        fd = os.open(uids.LOCK_DIR / f"{uid}.lock", os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a uid no live sandbox holds
        except BlockingIOError:
            os.close(fd)
            continue  # in use by a sandbox of another grader running right now
        try:
            leftovers[uid] = uids.processes_of(uid)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    assert not any(leftovers.values()), {u: p for u, p in leftovers.items() if p}


def test_endless_loop_costs_only_its_own_cell(tier_results):
    tier, results, _ = tier_results
    for name in ("endless_loop_cell", "endless_loop_ignoring_alarm", "allocate_50_gb", "exit_in_a_cell"):
        result = results[(name, "trick")]
        assert result.score == result.max_score, (name, result.score)
        failed_cells = [c for c in result.cells if not c.ok]
        assert len(failed_cells) == 1 and failed_cells[0].error_type in ("Timeout", "Crash", "RuntimeError",
                                                                          "OutOfMemoryError", "MemoryError"), failed_cells
