"""The corpus of hostile and broken submissions, as data: what each one is, how it is made, what it is
compared with, what must come out of grading it under each sandbox tier, and which tiers contain it.

A runtime case is the rmsnorm reference notebook with text edits and extra code cells (the trick);
its baseline is the same notebook without the trick (`BASELINES`): the trick's score is never above
the baseline's, and where `score == "=="` it equals it check by check. A file case builds the
submitted file itself (raw bytes, a link, an edited notebook). A CLI case goes through `autograde
grade` (discovery, student ids). `CONCURRENT` is graded next to another student's sandbox.

Sources may name things of the test run, filled in by `fill()`: @@MARKER_DIR@@ (a folder outside
every sandbox's view, which must stay empty), @@COURSE@@ (a course tree with a gradebook, another
student's notebook and a secret), @@TCP_PORT@@ and @@UDP_PORT@@ (listeners the test runs on 127.0.0.1),
@@UNIX_PATHS@@ and @@FIFO_PATHS@@ (Unix sockets and FIFOs the test listens on under /tmp and /run).

A case that a tier cannot contain is not run under it (`contained_by`). Destructive cases (fork bomb,
kill(-1), signals, a daemon) are contained by a tier only where that tier fences processes: bubblewrap and
landlock by a PID namespace; rlimits only when the grader is root, because each sandbox then runs as its
own pool uid (all four uids set, no capabilities), so the kernel lets it signal or trace nothing but its
own processes, RLIMIT_NPROC bounds its forks (it does not bind root), and every process of the uid is
killed before the uid is reused. A disk filler is contained only by bubblewrap's size-capped tmpfs (the
other tiers' scratch folder is on the host's disk, capped per file only).
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder import REPO_ROOT
from autograder.examples import notebook_with_edits
from autograder.running.sandbox import tiers
from hostile import channels as channels_module

SOURCE = REPO_ROOT / "assignments" / "rmsnorm" / "rmsnorm.ipynb"
ASSIGNMENT = "rmsnorm"
PARTS = ("rmsnorm_hand", "rmsnorm_function", "rmsnorm_module")
SECRET_PREFIX = "HOSTILE-SECRET-"  # student code looks for this; the test plants it followed by a random token

ALL_TIERS = frozenset(tiers.TIERS)
ISOLATING = frozenset({"bubblewrap", "landlock"})
ROOT = os.geteuid() == 0
# processes: a PID namespace, or (as root) a pool uid of its own; without root rlimits runs as the grader's uid
PROCESS_FENCED = ALL_TIERS if ROOT else frozenset({"bubblewrap"})
# network: bubblewrap's network namespace; landlock forbids TCP, and only as root adds a network namespace (UDP)
NETWORK_FENCED = ISOLATING if ROOT else frozenset({"bubblewrap"})
DISK_FENCED = frozenset({"bubblewrap"})  # only bubblewrap caps the scratch space's total size

RETURN_LINE = "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)"
WRONG = [(RETURN_LINE, "return x")]  # a wrong rms_norm: the baseline of the tricks that try to pass it off
RAISES = [(RETURN_LINE, "raise RuntimeError('broken')")]  # the baseline of tricks inside rms_norm
BASELINES = {"reference": [], "wrong": WRONG, "raises": RAISES}

GRADED, ERROR = "graded", "error"


@dataclass(frozen=True)
class Expect:
    """What grading one case must give (under one tier)."""

    status: str = GRADED
    score: str = "=="  # "==": the baseline's result check by check; "<=": never above the baseline's score; "0"
    failed_cells: int | None = 0  # how many of its code cells fail (None: not checked)
    cell_errors: frozenset = frozenset()  # the kinds those failures may have (Timeout, Crash, OSError, ...)
    failing_parts: frozenset = frozenset()  # parts of which every check fails
    unanswered: frozenset = frozenset()  # parts reported as not answered
    message: str = ""  # found in the result's message (error) or in a failing check's message

    def describe(self) -> str:
        words = [self.status]
        if self.status == GRADED:
            words.append({"==": "score = baseline", "<=": "score <= baseline", "0": "score 0"}[self.score])
        if self.failed_cells:
            words.append(f"{self.failed_cells} cell {'/'.join(sorted(self.cell_errors))}")
        elif self.failed_cells is None and self.cell_errors:
            words.append(f"cells may fail: {'/'.join(sorted(self.cell_errors))}")
        if self.failing_parts:
            words.append("fails " + ", ".join(p.removeprefix("rmsnorm_") for p in sorted(self.failing_parts)))
        if self.message:
            words.append(f"msg '{self.message}'")
        return "; ".join(words)


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    edits: tuple = ()  # (old, new) in the reference notebook's code cells
    cells: tuple = ()  # extra code cells (position, source)
    build: object = None  # file cases: build(out: Path, ctx) -> Path of the submitted file
    baseline: str | None = "reference"  # a key of BASELINES; None: compared with zero
    expect: Expect = Expect()
    per_tier: tuple = ()  # (tier, Expect) where a tier's outcome differs
    contained_by: frozenset = ALL_TIERS
    alone: bool = False  # also graded by itself: alone and in the batch must agree
    weak: tuple = ()  # (tier, reason): a known weakness of that tier, the test marked xfail there
    # (field, value) pairs replacing HOSTILE_LIMITS': the case is graded in a batch of its own under them, followed by
    # the honest reference (which must get what it got before any trick); for a case whose outcome would otherwise
    # depend on the machine's load
    limits: tuple = ()

    def expect_for(self, tier: str) -> Expect:
        return dict(self.per_tier).get(tier, self.expect)


@dataclass(frozen=True)
class Context:
    marker_dir: Path
    course: Path
    secret: str  # SECRET_PREFIX + token, planted in the course tree
    tcp_port: int = 0
    udp_port: int = 0
    unix_paths: tuple = ()  # Unix stream and datagram sockets the test listens on, under /tmp and /run
    fifo_paths: tuple = ()  # FIFOs the test reads, under /tmp and /run


def fill(source: str, ctx: Context) -> str:
    for key, value in (("@@MARKER_DIR@@", ctx.marker_dir), ("@@COURSE@@", ctx.course), ("@@TCP_PORT@@", ctx.tcp_port),
                       ("@@UDP_PORT@@", ctx.udp_port), ("@@REPO@@", REPO_ROOT),
                       ("@@UNIX_PATHS@@", repr(list(ctx.unix_paths))), ("@@FIFO_PATHS@@", repr(list(ctx.fifo_paths)))):
        source = source.replace(key, str(value))
    return source


def plant_course(root: Path, secret: str) -> Path:
    """A course tree next to the repository: a gradebook, another student's notebook, a secret file."""
    (root / "submitted" / "bob" / ASSIGNMENT).mkdir(parents=True)
    nb = nbformat.read(SOURCE, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell(f"# {secret}"))
    nbformat.write(nb, root / "submitted" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    (root / "gradebook.db").write_bytes(b"SQLite format 3\0" + secret.encode())
    (root / "course-secret.txt").write_text(secret + "\n")
    return root


def submission(case: Case, out: Path, ctx: Context) -> Path:
    """Write the case's submitted file under `out` (a folder of its own) and return its path."""
    out.mkdir(parents=True, exist_ok=True)
    if case.build is not None:
        return case.build(out / f"{ASSIGNMENT}.ipynb", ctx)
    nb = notebook_with_edits(ASSIGNMENT, [(old, fill(new, ctx)) for old, new in case.edits],
                             [(pos, fill(src, ctx)) for pos, src in case.cells])
    path = out / f"{ASSIGNMENT}.ipynb"
    nbformat.write(nb, path)
    return path


def baseline_notebook(name: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{ASSIGNMENT}.ipynb"
    nbformat.write(notebook_with_edits(ASSIGNMENT, BASELINES[name]), path)
    return path


# --- student code ------------------------------------------------------------------------------------

FIND_COURSE = """
import os
FOUND = []
for top in ["/", "/work", "/opt", "/root", "/home", "/srv", "/tmp"]:
    try:
        for root, dirs, files in os.walk(top):
            if root.count(os.sep) > 6:
                dirs[:] = []
            for name in files:
                if name in ("rmsnorm.py", "test_rmsnorm.py", "gradebook.db", ".autograde-secret", "course-secret.txt"):
                    FOUND.append(os.path.join(root, name))
            if len(FOUND) > 20:
                break
    except OSError:
        pass
"""

# Reads whatever it can of the course: the planted course tree (whose path a student might guess), the
# repository, and any file that holds the secret prefix; reports it in an exception, which reaches the result.
STEAL_SECRETS = """
import os, time
LOOT = []
targets = ["@@COURSE@@/course-secret.txt", "@@COURSE@@/gradebook.db", "@@COURSE@@/submitted/bob/rmsnorm/rmsnorm.ipynb",
           "@@REPO@@/solutions/rmsnorm.py", "@@REPO@@/autograder/checks/rmsnorm.py",
           "@@REPO@@/assignments/rmsnorm/rmsnorm.ipynb", "@@REPO@@/.autograde-secret", "/root/.bash_history"]
for path in targets:
    try:
        LOOT.append((path, open(path, "rb").read(4000).decode("utf-8", "replace")))
    except OSError:
        pass
started = time.monotonic()
for top in ["/tmp", "/work", "/home", "/root", "/srv", "/opt", "/run", "/var"]:
    for root, dirs, files in os.walk(top):
        if time.monotonic() - started > 2:
            break
        for name in files:
            try:
                data = open(os.path.join(root, name), "rb").read(65536)
            except OSError:
                continue
            at = data.find(b"HOSTILE-SECRET-")
            if at >= 0:
                LOOT.append((os.path.join(root, name), data[at:at + 64].decode("utf-8", "replace")))
if LOOT:
    raise RuntimeError("found: " + repr(LOOT)[:1800])
"""

WRITE_INTO_THE_COURSE = FIND_COURSE + """
for path in FOUND + ["@@COURSE@@/gradebook.db", "@@COURSE@@/submitted/bob/rmsnorm/rmsnorm.ipynb",
                     "@@REPO@@/solutions/rmsnorm.py", "@@MARKER_DIR@@/written"]:
    try:
        open(path, 'a').write('# tampered')
    except OSError:
        pass
for folder in ['/work', '/opt/autograde', '/tmp', '@@COURSE@@', '@@REPO@@']:
    try:
        open(os.path.join(folder, 'TAMPERED'), 'w').write('x')
    except OSError:
        pass
"""

FORK_BOMB = """
import os, time
while True:
    try:
        os.fork()
    except OSError:
        time.sleep(0.01)
"""

DISK_FILLER = """
block = b"\\0" * (16 * 1024 * 1024)
i = 0
while True:
    with open(f"fill-{i}.bin", "wb") as f:
        for _ in range(3):
            f.write(block)
    i += 1
"""

PRINT_100_MB = """
import os, sys
chunk = "x" * (1024 * 1024)
for _ in range(50):
    print(chunk)
    sys.stderr.write(chunk)
for _ in range(25):
    os.write(1, chunk.encode())
    os.write(2, chunk.encode())
"""

SETSID_DAEMON = """
import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        while True:  # outlive grading, and leave a trace if it can
            time.sleep(0.2)
            try:
                open("@@MARKER_DIR@@/daemon-alive", "w").write("x")
            except OSError:
                pass
    os._exit(0)
os.waitpid(pid, 0)
"""

KILL_EVERYTHING = """
import os, signal
for sig in (signal.SIGKILL, signal.SIGSTOP):
    try:
        os.kill(-1, sig)
    except OSError:
        pass
"""

SIGNAL_THE_GRADER = """
import os, signal
parent = os.getppid()
for act in (lambda: os.killpg(os.getpgid(parent), signal.SIGKILL), lambda: os.kill(parent, signal.SIGKILL),
            lambda: os.killpg(os.getpgid(parent), signal.SIGSTOP)):
    if parent > 1:
        try:
            act()
        except OSError:
            pass
"""

UNIX_AND_FIFOS = """
import os, socket
for path in @@UNIX_PATHS@@:
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        try:
            s = socket.socket(socket.AF_UNIX, kind)
            s.settimeout(1)
            if kind == socket.SOCK_STREAM:
                s.connect(path)
                s.sendall(b"HOSTILE-MARKER unix")
            else:
                s.sendto(b"HOSTILE-MARKER unix-dgram", path)
            s.close()
        except OSError:
            pass
for path in @@FIFO_PATHS@@:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"HOSTILE-MARKER fifo")
        os.close(fd)
    except OSError:
        pass
"""
DEMO_NAME_COMPUTED = "_seen = ('{0.__glo' + 'bals__[rms_out]}').format(rms_norm)"
HUGE_HAND_ANSWER = "rms = 10**400\noutput = [float('inf'), -10**400]"
SURROGATE_TEXT = ("print(chr(0xDCFF) * 3, 'x' + chr(0xD800))\n"
                  "NOTE = chr(0xDC80)\n"
                  "raise ValueError('bad ' + chr(0xDC80) + chr(0xDBFF))")
# The reply encoder made compact (it is the student's to patch): a list of 4 million numbers then fits the 8 MiB
# header and reaches the grader as the typed answer.
HAND_ANSWER_4_MILLION = """
import gc, json, types
gc.unfreeze()  # the warm parent's objects (the runner's modules among them) are frozen: gc.get_objects() skips them
for _m in [m for m in gc.get_objects() if isinstance(m, types.ModuleType) and hasattr(m, "_json_dumps")]:
    _m._json_dumps = lambda h, allow_nan=False: json.dumps(h, separators=(",", ":"))
rms = [1] * 4_000_000
"""
FLOOD_CELLS = 2000  # failing cells (tests/test_bounds.py grades 40,000: a 5 MiB notebook)
FLOOD_CELL = 'raise ValueError("failing cell " * 200)'  # a 2,600-character message each
GAMMA_LINE = "        self.gamma = nn.Parameter(torch.ones(d_model))"
GAMMA_STATE_DICT_LIE = (GAMMA_LINE, GAMMA_LINE.replace("ones", "zeros") + (
    "\n\n    def state_dict(self, *args, **kwargs):\n"
    "        return {'gamma': torch.ones_like(self.gamma).detach()}\n"))

LOOPBACK = """
import socket
REACHED = []
try:
    s = socket.create_connection(("127.0.0.1", @@TCP_PORT@@), timeout=2)
    s.sendall(b"HOSTILE-MARKER")
    s.close()
    REACHED.append("tcp")
except OSError:
    pass
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"HOSTILE-MARKER", ("127.0.0.1", @@UDP_PORT@@))
except OSError:
    pass
if REACHED:
    raise RuntimeError(f"reached the grader's machine: {REACHED}")
"""

# Finds the sandbox's reply channel without knowing fd numbers or reading /proc (Landlock hides it): every
# descriptor that is a pipe or a socket open for writing.
FORGERY = """
import fcntl, json, os, pickle, stat, struct

def _reply_channels():
    found = []
    for fd in range(3, 1024):
        try:
            mode, flags = os.fstat(fd).st_mode, fcntl.fcntl(fd, fcntl.F_GETFL)
        except OSError:
            continue
        if (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and flags & os.O_ACCMODE in (os.O_WRONLY, os.O_RDWR):
            found.append(fd)
    return found

def _forge(frame):
    for fd in _reply_channels():
        try:
            os.write(fd, frame)
        except OSError:
            pass

class _Evil:
    def __reduce__(self):  # run by whoever unpickles it: leaves a file in a folder the sandbox cannot see
        return (open, ("@@MARKER_DIR@@/unpickled", "w"))

_pickled = pickle.dumps({"op": "call", "id": 1, "ok": True, "result": _Evil()})
FORGED = {
    "pickle": struct.pack(">I", len(_pickled)) + _pickled,
    "oversized": struct.pack(">I", 0x7FFFFFF0) + b"{" * 64,
    "huge_buffers": (lambda h: struct.pack(">I", len(h)) + h)(json.dumps(
        {"op": "call", "id": 1, "ok": True, "buffers": [2**40],
         "values": {"$dict": [["result", {"$tensor": 0, "dtype": "uint8", "shape": [2**40]}]]}}).encode()),
    # one 64 MiB buffer named 20 times: each reference decoded to a copy of its own was 1.25 GiB in the grader
    "aliasing": (lambda h: struct.pack(">I", len(h)) + h + bytes(64 * 1024**2))(json.dumps(
        {"op": "call", "id": 1, "ok": True, "buffers": [64 * 1024**2],
         "values": {"$dict": [["result", [{"$tensor": 0, "dtype": "float32", "shape": [16 * 1024**2]}] * 20]]}}).encode()),
    "lying_shape": (lambda h: struct.pack(">I", len(h)) + h + bytes(16))(json.dumps(
        {"op": "call", "id": 1, "ok": True, "buffers": [16],
         "values": {"$dict": [["result", {"$tensor": 0, "dtype": "float32", "shape": [64, 64]}]]}}).encode()),
}
"""


def forge(kind: str) -> tuple:
    """Edits that send a forged `kind` frame from inside rms_norm, then return the right answer."""
    return ((RETURN_LINE, f"_forge(FORGED[{kind!r}])\n    {RETURN_LINE}"),)


# --- file cases --------------------------------------------------------------------------------------


def _write(out: Path, data: bytes) -> Path:
    out.write_bytes(data)
    return out


def _edited(out: Path, change) -> Path:
    nb = nbformat.read(SOURCE, as_version=4)
    change(nb)
    nbformat.write(nb, out)
    return out


def _grade_cell(cell) -> bool:
    return bool(cell.get("metadata", {}).get("nbgrader", {}).get("grade"))


def _delete_grade_cells(nb):
    nb.cells = [c for c in nb.cells if not _grade_cell(c)]


def _duplicate_grade_cells(nb):
    cells = []
    for c in nb.cells:
        copy = nbformat.from_dict(dict(json.loads(json.dumps(c)), id=f"copy-{len(cells)}"))  # Jupyter's new id
        cells += [c, copy] if _grade_cell(c) else [c]
    nb.cells = cells


def _grade_cells_first(nb):
    nb.cells = [c for c in nb.cells if _grade_cell(c)] + [c for c in nb.cells if not _grade_cell(c)]


def _points_100(nb):
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("grade"):
            meta["points"] = 100
        elif meta.get("solution"):
            meta.update(grade=True, points=100)  # a solution cell made into a graded cell of its own


def _delete_module_answer(nb):
    nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "rmsnorm_module_code"]


def _nbformat_3(out: Path, ctx) -> Path:
    nb = nbformat.read(SOURCE, as_version=4)
    nbformat.write(nbformat.convert(nb, 3), out, version=3)
    return out


def _with_outputs(megabytes: int):
    def build(out: Path, ctx) -> Path:
        nb = nbformat.read(SOURCE, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        picture = "A" * (1024 * 1024)
        code[-1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": picture})
                            for _ in range(megabytes)]
        nbformat.write(nb, out)
        return out
    return build


def _non_utf8(out: Path, ctx) -> Path:
    return _write(out, SOURCE.read_bytes().replace("RMSNorm".encode(), b"RMS\xff\xfeNorm", 1))


def _link_to_secret(out: Path, ctx) -> Path:
    out.symlink_to(ctx.course / "submitted" / "bob" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return out


def _no_cells(out: Path, ctx) -> Path:
    return _write(out, json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []}).encode())


# --- what one submission leaves for the next (issue 21): writers store a token, readers look for it ------------

KERNEL_STATE = ("key_ring", "sysv_shm", "sysv_msg", "posix_mq")  # per uid or per IPC namespace: refused or private
SHARED_FILES = ("shared_files", "abstract_socket")  # /tmp, /var/tmp, /dev/shm, a daemon on an abstract socket
STASH_TOKEN = "HOSTILE-STASH-the-reference-rms-norm"


def _stash_writer(channels) -> str:
    return channels_module.PRELUDE + f"SECRET = {STASH_TOKEN!r}\n" + "".join(
        channels_module.WRITERS[c] for c in channels)


def _stash_reader(channels) -> str:
    """Sets STASH_FOUND when any channel gives the writer's token: the reader's rms_norm is then the right one."""
    return channels_module.PRELUDE + "_hits = []\n" + "".join(
        channels_module.READERS[c] + "_hits.append(found)\n" for c in channels) + (
        f"STASH_FOUND = any(h == {STASH_TOKEN!r} for h in _hits)\n")


# the reader's rms_norm is wrong unless something of the writer reached it
STASH_READER_EDIT = ((RETURN_LINE, "return (xc / rms * gamma.to(compute_dtype)).to(x.dtype) "
                                   "if globals().get('STASH_FOUND') else x"),)

MEMORY_HOG = """
import os, time
children = []
for i in range(3):  # three children of 500 MiB each, touched: 1.5 GiB against the submission's 1 GiB
    pid = os.fork()
    if pid == 0:
        block = bytearray(500 * 1024**2)
        for j in range(0, len(block), 4096):
            block[j] = 1
        time.sleep(120)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
"""

# --- the corpus ----------------------------------------------------------------------------------------

TIMEOUT_1 = Expect(failed_cells=1, cell_errors=frozenset({"Timeout"}))
# the probe that met a forged frame fails (its sandbox is killed and started again), and every later call of it
# a forged reply is refused as such: the student reads that the reply was not of the protocol's size or form (not
# that their code crashed: nothing exited)
PROBE_BROKEN = Expect(score="<=", failed_cells=None, failing_parts=frozenset({"rmsnorm_function"}),
                      message="沙箱发回的回复超出了评分程序接收的大小或格式")

CASES = [
    # --- the student's code cheats: pass/fail is decided in the grader, so it gains nothing
    Case("patch_allclose_and_equal", "monkeypatch torch.allclose/equal/isclose/Tensor.__eq__", WRONG, ((-1, (
        "import torch\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\ntorch.Tensor.__eq__ = lambda *a, **k: True\n"
        "torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)")),), baseline="wrong"),
    Case("patch_builtins", "monkeypatch isinstance/len/abs/max/float", WRONG, ((-1, (
        "import builtins\nbuiltins.isinstance = lambda *a: True\nbuiltins.len = lambda *a: 0\n"
        "builtins.abs = lambda x: 0\nbuiltins.max = lambda *a, **k: 0\nbuiltins.float = lambda *a: 0.0")),),
        baseline="wrong"),
    Case("lying_tensor_subclass", "a Tensor subclass whose __eq__/__torch_function__ say True", ((RETURN_LINE, (
        "class Liar(torch.Tensor):\n"
        "        def __eq__(self, other): return True\n"
        "        @classmethod\n"
        "        def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "            return True\n"
        "    return x.as_subclass(Liar)")),), baseline="wrong", expect=Expect(failed_cells=None)),
    Case("nan_output", "rms_norm returns NaN", ((RETURN_LINE, RETURN_LINE + " * float('nan')"),), baseline="wrong",
         expect=Expect(score="<=", failed_cells=None, failing_parts=frozenset({"rmsnorm_function"}), message="NaN")),
    Case("wrong_dtype_output", "rms_norm returns int32", ((RETURN_LINE, RETURN_LINE + ".int()"),), baseline="wrong",
         expect=Expect(score="<=", failed_cells=None, failing_parts=frozenset({"rmsnorm_function"}), message="dtype")),
    Case("import_solutions", "import solutions (the reference) in rms_norm", ((RETURN_LINE, (
        "from solutions.rmsnorm import rms_norm as r\n    return r(x, gamma, eps)")),), baseline="raises",
        expect=Expect(failed_cells=None)),
    Case("import_autograder", "import autograder in rms_norm", ((RETURN_LINE, "import autograder\n    return x"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    # --- exit tricks
    Case("sys_exit_in_probe", "sys.exit(0) inside rms_norm", ((RETURN_LINE, "import sys; sys.exit(0)"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    Case("os_exit_in_probe", "os._exit(0) inside rms_norm", ((RETURN_LINE, "import os; os._exit(0)"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    Case("raise_keyboard_interrupt", "KeyboardInterrupt inside rms_norm", ((RETURN_LINE, "raise KeyboardInterrupt"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    Case("raise_system_exit", "SystemExit(0) inside rms_norm", ((RETURN_LINE, "raise SystemExit(0)"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    Case("exit_in_a_cell", "os._exit(0) in the last cell", cells=((-1, "import os\nos._exit(0)"),),
         expect=Expect(failed_cells=1, cell_errors=frozenset({"Crash"}))),
    Case("sys_exit_in_first_cell", "sys.exit(0) in the first code cell", cells=((3, "import sys\nsys.exit(0)"),),
         expect=Expect(failed_cells=1, cell_errors=frozenset({"SystemExit"}))),
    # --- time and resources
    Case("endless_loop_cell", "while True: pass in a cell", cells=((12, "while True:\n    pass"),), expect=TIMEOUT_1),
    Case("endless_loop_ignoring_alarm", "an endless loop that ignores SIGALRM", cells=((12, (
        "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass")),), expect=TIMEOUT_1),
    Case("sleep_forever_in_cell", "time.sleep forever in a cell", cells=((12, "import time\ntime.sleep(10**6)"),),
         expect=TIMEOUT_1),
    Case("sleep_forever_in_probe", "time.sleep forever inside rms_norm", ((RETURN_LINE, "import time; time.sleep(10**6)"),),
         baseline="raises", expect=Expect(failed_cells=None)),
    Case("allocate_50_gb", "torch.empty of 50 GB", cells=((12, (
        "import torch\nbig = torch.empty(50 * 1024**3, dtype=torch.uint8)")),),
        expect=Expect(failed_cells=1, cell_errors=frozenset({"RuntimeError", "OutOfMemoryError", "MemoryError",
                                                             "Crash"}))),
    # all of a submission's processes share one memory budget (HOSTILE_LIMITS: 1 GiB; a cgroup or the watchdog). Its
    # cell waits for its children, so it ends only at the budget; touching 1 GiB takes some 0.5 s of CPU, which a
    # machine busy with the rest of the suite spread over more than the batch's 5 s cell limit (three fresh-clone runs
    # of .ci/run saw the cell time out and the budget passed later, during the checks): a cell limit of its own
    Case("memory_hog_three_children", "three forked children touching 500 MiB each, over a 1 GiB budget",
         cells=((12, MEMORY_HOG),), expect=Expect(score="<=", failed_cells=None,
                                                  cell_errors=frozenset({"MemoryLimit"}),
                                                  failing_parts=frozenset(PARTS), message="内存超出限制"),
         limits=(("cell_timeout", 60.0),)),
    Case("print_100_mb", "100 MB to stdout/stderr, in a cell and in every rms_norm call",
         ((RETURN_LINE, "print('y' * 10**6)\n    " + RETURN_LINE),), ((12, PRINT_100_MB),)),
    Case("fork_bomb", "while True: os.fork()", cells=((12, FORK_BOMB),), contained_by=PROCESS_FENCED, alone=True,
         expect=Expect(failed_cells=1, cell_errors=frozenset({"Timeout", "Crash"}))),
    Case("disk_filler", "write 48 MB files until the disk is full", cells=((12, DISK_FILLER),),
         contained_by=DISK_FENCED, alone=True, expect=Expect(failed_cells=1, cell_errors=frozenset({"OSError"}))),
    # --- processes
    Case("setsid_daemon", "a setsid double-forked process meant to outlive grading", cells=((-1, SETSID_DAEMON),),
         contained_by=PROCESS_FENCED, alone=True,),
    Case("kill_every_process", "os.kill(-1, SIGKILL) and kill(-1, SIGSTOP)", cells=((12, KILL_EVERYTHING),),
         contained_by=PROCESS_FENCED, alone=True),
    Case("signal_the_grader", "SIGKILL/SIGSTOP to the parent and its process group", cells=((12, SIGNAL_THE_GRADER),),
         contained_by=PROCESS_FENCED, alone=True),
    # --- the course, the disk, the network
    Case("read_the_reference_from_disk", "find solutions/rmsnorm.py on disk and exec it", ((RETURN_LINE, (
        "for path in FOUND:\n"
        "        if path.endswith('solutions/rmsnorm.py'):\n"
        "            scope = {}\n"
        "            exec(open(path).read().replace('from solutions.student_params import student_rng', ''), scope)\n"
        "            return scope['rms_norm'](x, gamma, eps)\n"
        "    return x")),), ((12, FIND_COURSE),), baseline="wrong", contained_by=ISOLATING,
        expect=Expect(failed_cells=None)),
    Case("steal_course_secrets", "read solutions/, checks, gradebook.db, another student's notebook, a secret",
         cells=((12, STEAL_SECRETS),), contained_by=ISOLATING),
    Case("write_into_the_course", "append to every course file it can find, drop files in /work, /tmp, the repo",
         cells=((-1, WRITE_INTO_THE_COURSE),), contained_by=ISOLATING),
    Case("loopback_listener", "connect (TCP) and send (UDP) to listeners of the test on 127.0.0.1",
         cells=((12, LOOPBACK),), contained_by=NETWORK_FENCED),
    Case("unix_sockets_and_fifos", "connect and send to Unix sockets, write to FIFOs the test made under /tmp and /run",
         cells=((12, UNIX_AND_FIFOS),), contained_by=ISOLATING),
    # --- left for the next student (graded right after the writer, in the same batch): nothing crosses
    Case("kernel_state_writer", "a key in the uid's key ring, SysV shared memory and a message, a POSIX queue",
         cells=((-1, _stash_writer(KERNEL_STATE)),)),
    Case("kernel_state_reader", "after kernel_state_writer: rms_norm is right only if it finds what that stored",
         STASH_READER_EDIT, ((12, _stash_reader(KERNEL_STATE)),), baseline="wrong"),
    Case("shared_files_writer", "files in /tmp, /var/tmp and /dev/shm, a daemon serving an abstract Unix socket",
         cells=((-1, _stash_writer(SHARED_FILES)),), contained_by=ISOLATING),
    Case("shared_files_reader", "after shared_files_writer: rms_norm is right only if it finds what that left",
         STASH_READER_EDIT, ((12, _stash_reader(SHARED_FILES)),), baseline="wrong", contained_by=ISOLATING),
    # --- student data the grader must take as data (numbers, text), and what a module says about itself
    Case("huge_hand_answer", "the hand answer rms = 10**400 (no float holds it), output with inf",
         cells=((-1, HUGE_HAND_ANSWER),), expect=Expect(score="<=", message="无法比较的数",
                                                         failing_parts=frozenset({"rmsnorm_hand"}))),
    Case("lone_surrogates", "lone surrogates printed, kept in a variable and raised in an exception message",
         cells=((-1, SURROGATE_TEXT),), expect=Expect(failed_cells=1, cell_errors=frozenset({"ValueError"}))),
    Case("gamma_state_dict_lie", "gamma initialised to zeros, with a state_dict() that reports ones",
         (GAMMA_STATE_DICT_LIE,), expect=Expect(score="<=", message="gamma 的初始值不是全 1"), alone=False),
    # --- the unchanged demo cell (skipped) reached through a name no static rule sees: graded again with every cell
    Case("demo_name_through_a_computed_format_field", "after the unchanged demo cell, a cell that reads the demo's "
         "rms_out through a format field built with +", cells=((-1, DEMO_NAME_COMPUTED),)),
    # --- forged replies on the sandbox's reply channel (found through /proc/self/fd)
    Case("forged_reply_pickle", "a pickle whose __reduce__ writes a file", forge("pickle"), ((12, FORGERY),),
         expect=PROBE_BROKEN),
    Case("forged_reply_oversized", "a frame length of 2 GB", forge("oversized"), ((12, FORGERY),), expect=PROBE_BROKEN),
    Case("forged_reply_huge_buffers", "a header announcing a 1 TB buffer", forge("huge_buffers"), ((12, FORGERY),),
         expect=PROBE_BROKEN),
    Case("forged_reply_lying_shape", "a header whose shape disagrees with its buffer", forge("lying_shape"),
         ((12, FORGERY),), expect=PROBE_BROKEN),
    Case("forged_reply_aliasing", "one 64 MiB buffer named 20 times in a reply's header", forge("aliasing"),
         ((12, FORGERY),), expect=PROBE_BROKEN),
    # --- more than the grader keeps: bounded where it enters, the cut said ("…（已截断）")
    Case("failing_cell_flood", f"{FLOOD_CELLS} failing cells, each with a long message",
         cells=tuple((-1, FLOOD_CELL) for _ in range(FLOOD_CELLS)),
         expect=Expect(failed_cells=50, cell_errors=frozenset({"ValueError"}))),  # the first 50 kept, the rest counted
    Case("hand_answer_4_million_numbers", "the hand answer rms is a list of 4 million numbers (compact encoding)",
         cells=((-1, HAND_ANSWER_4_MILLION),), expect=Expect(score="<=", message="应该是一个数")),
    # --- broken and edited notebooks (read before any sandbox starts)
    Case("corrupt_json", "a notebook cut short", build=lambda out, ctx: _write(out, b'{"cells": ['), baseline=None,
         expect=Expect(status=ERROR, score="0", message="JSON")),
    Case("not_a_notebook", "valid JSON that is not a notebook", build=lambda out, ctx: _write(out, b"[1, 2, 3]"),
         baseline=None, expect=Expect(status=ERROR, score="0", message="nbformat")),
    Case("non_utf8_bytes", "the notebook with bytes that are not UTF-8", build=_non_utf8, baseline=None,
         expect=Expect(status=ERROR, score="0", message="UTF-8")),
    Case("nbformat_3", "the reference saved as nbformat 3", build=_nbformat_3),
    Case("no_cells", "a notebook with no cells", build=_no_cells, baseline=None,
         expect=Expect(score="0", failing_parts=frozenset(PARTS), unanswered=frozenset(PARTS),
                       message="未找到该题的答案")),
    Case("grade_cells_deleted", "every grade (self-check) cell deleted",
         build=lambda out, ctx: _edited(out, _delete_grade_cells)),
    Case("grade_cells_duplicated", "every grade cell twice", build=lambda out, ctx: _edited(out, _duplicate_grade_cells)),
    Case("grade_cells_reordered", "the grade cells moved to the top",
         build=lambda out, ctx: _edited(out, _grade_cells_first)),
    Case("points_edited_to_100", "nbgrader metadata edited: points 100, solution cells made graded",
         build=lambda out, ctx: _edited(out, _points_100)),
    Case("answer_cell_deleted", "the module's answer cell deleted", build=lambda out, ctx: _edited(out, _delete_module_answer),
         # the last cell (a demo that uses RMSNorm) is left unchanged and first skipped; the result is not clean, so
         # the notebook is graded again with every cell (the result that stands): the demo's NameError shows
         expect=Expect(score="<=", failed_cells=1, cell_errors=frozenset({"NameError"}),
                       failing_parts=frozenset({"rmsnorm_module"}), unanswered=frozenset({"rmsnorm_module"}),
                       message="未找到该题的答案")),
    Case("notebook_50_mb", "50 MB of saved outputs", build=_with_outputs(50)),
    Case("notebook_over_the_cap", "70 MB of saved outputs (above the 64 MiB cap)", build=_with_outputs(70),
         baseline=None, expect=Expect(status=ERROR, score="0", message="太大")),
    Case("link_to_a_secret", "the submitted file is a symlink to another student's notebook", build=_link_to_secret,
         baseline=None, expect=Expect(status=ERROR, score="0", message="无法打开")),
]

# Graded next to another student's honest sandbox, at the same time (tests/test_hostile_cli.py).
ATTACK_OTHER_SANDBOXES = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206
HITS = set()
me = os.getpid()
end = time.monotonic() + 6
while time.monotonic() < end:
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:  # /proc out of reach (Landlock): try every pid number instead
        pids = range(2, 70000)
    for pid in pids:
        if pid in (me, 1):
            continue
        for request in (PTRACE_ATTACH, PTRACE_SEIZE):
            if libc.ptrace(request, pid, None, None) == 0:
                HITS.add(("ptrace", pid))
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            try:
                os.kill(pid, sig)
                HITS.add(("kill", pid))
            except OSError:
                pass
    try:
        os.kill(-1, signal.SIGKILL)
    except OSError:
        pass
    time.sleep(0.05)
if HITS:
    raise RuntimeError(f"reached {len(HITS)} other processes: {sorted(HITS)[:20]}")
"""
CONCURRENT = Case("attack_other_sandboxes", "kill/SIGSTOP/ptrace every pid in /proc and kill(-1) for 6 s while "
                  "another student's sandbox runs", cells=((12, ATTACK_OTHER_SANDBOXES),), contained_by=PROCESS_FENCED)
SLOW_HONEST = ((12, "import time\ntime.sleep(3)"),)  # the other student: honest, and alive long enough to be hit

# Through `autograde grade`: discovery and student ids (tests/test_hostile_cli.py).
CLI_CASES = {
    "zip_with_dotdot": "an LMS zip with a `../` member: refused, nothing written outside",
    "odd_student_ids": "student folders named with spaces, unicode, a formula, '%2F', '-rf'",
    "student_id_with_slash": "an id with `/` and `..` (API only: a path cannot hold one): files stay inside OUT",
    "kill_9_and_resume": "SIGKILL at a random point of a batch with hostile submissions, then --resume",
}


def by_name(name: str) -> Case:
    return next(c for c in CASES + [CONCURRENT] if c.name == name)


def outcome_table() -> str:
    """The corpus as a markdown table: case x tier -> the expected outcome, or why it is not run there."""
    lines = ["| case | what | baseline | " + " | ".join(tiers.TIERS) + " |", "|---|---|---|" + "---|" * len(tiers.TIERS)]
    for case in CASES + [CONCURRENT]:
        cells = []
        for tier in tiers.TIERS:
            if tier not in case.contained_by:
                cells.append("not run (not contained)")
                continue
            text = case.expect_for(tier).describe()
            if tier in dict(case.weak):
                text += " (xfail: known weakness)"
            cells.append(text)
        baseline = case.baseline or "0"
        lines.append(f"| {case.name} | {case.what} | {baseline} | " + " | ".join(cells) + " |")
    for name, what in CLI_CASES.items():
        lines.append(f"| {name} | {what} | - | " + " | ".join(["CLI (default tier)"] * len(tiers.TIERS)) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(f"{len(CASES)} cases in the batch corpus, 1 concurrent, {len(CLI_CASES)} through the CLI")
    print(outcome_table())


# What each claim of the README's tier table ("protects against") rests on: the corpus cases that attack it.
# tests/test_tier_table.py maps every claim of every row to these, and checks that the row's tier runs them.
CLAIMS = {
    "reading the course": ("steal_course_secrets", "read_the_reference_from_disk"),
    "writing into the course": ("write_into_the_course",),
    "the network": ("loopback_listener",),
    "Unix sockets and FIFOs on the host": ("unix_sockets_and_fifos",),
    "signals to other processes": ("kill_every_process", "signal_the_grader"),
    "leftover processes": ("setsid_daemon",),
    "fork bombs": ("fork_bomb",),
    "filling the disk": ("disk_filler",),
    "memory": ("allocate_50_gb", "memory_hog_three_children"),
    "key rings and IPC objects left for the next student": ("kernel_state_reader",),
    "files and abstract sockets left for the next student": ("shared_files_reader",),
    "time": ("endless_loop_cell", "endless_loop_ignoring_alarm", "sleep_forever_in_cell", "sleep_forever_in_probe"),
}
