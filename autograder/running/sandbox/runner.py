"""The sandbox side's fork server: the warm parent (the zygote) and the fork of each submission.

Started by the grader as `python -I -S runner.py CONFIG_JSON` inside the tier's view (nothing of
the course in it), as a warm parent (see `zygote`): it imports torch once and forks a confined child
per submission, which gets two pipes (requests in, replies out). In the child, confinement.py confines
the process and probe_server.py answers the grader's probes (its docstring lists the requests). It
imports only the standard library, torch, what the notebooks import, and its siblings confinement.py,
probe_server.py and wire.py (environment.RUNNER_FILES: copied, or bound, into the sandbox together).
Everything it sends is plain data in wire.py's format; pass/fail is never decided here.
"""

import ctypes
import errno
import gc
import json
import os
import select
import signal
import sys
import time

if __package__:
    from . import confinement, probe_server
else:  # run as a script: `python -I` leaves the script's own folder off sys.path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import confinement  # noqa: E402
    import probe_server  # noqa: E402


# --- the warm parent (zygote) and the confinement of each child -----------------------------------
#
# The zygote imports torch (and what the notebooks import) once, runs nothing parallel, and then
# only forks: one child per submission. It never runs student code and holds nothing of any
# student: each child closes every descriptor but its own two pipes, enters fresh namespaces,
# drops to its pool uid without capabilities, sets its limits and only then reads the first cell.


def _child(torch, wire, spec, fd_in, fd_out, report_fd, cgroup_fds=(), pid_one=False):
    """In the fork of the zygote: confine, then serve. Never returns. `pid_one`: forked as PID 1 of a new PID
    namespace already (`_spawn`); otherwise, where the tier asks for one, it is entered here and the process that
    serves is forked once more, as its PID 1, this one waiting for it."""
    libc = ctypes.CDLL(None, use_errno=True)
    status, out = 70, fd_out
    try:
        # first of all, into the submission's cgroups (memory, pids): everything it starts is counted there. A fork
        # has one thread, so the grader may hand v1's `tasks` files (this thread's move is the whole process's)
        for fd in cgroup_fds:
            os.write(fd, b"0")
            os.close(fd)
        if confinement.enter_namespaces(libc, spec, in_pid_namespace=pid_one):
            # the next process is PID 1 of the new namespace: when it dies, everything in it dies
            inner = os.fork()
            if inner:
                os.write(report_fd, f"{inner}\n".encode())
                os.close(report_fd)
                os.close(fd_in)
                os.close(fd_out)
                libc.prctl(confinement.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                _, code = os.waitpid(inner, 0)
                os._exit(os.waitstatus_to_exitcode(code) & 0xFF if os.WIFEXITED(code) else 128 + os.WTERMSIG(code))
        else:
            os.write(report_fd, f"{os.getpid()}\n".encode())
        os.close(report_fd)
        confinement.keep_only(fd_in, fd_out)
        out = confinement.FD_OUT
        abi = confinement.confine(libc, spec)
        probe_server.serve(torch, wire, confinement.FD_IN, confinement.FD_OUT, spec, abi)
        status = 0
    except BaseException as exc:  # confinement failed: say why on the reply pipe, if it is there
        try:
            wire.write_frame(out, {"op": "failed", "error": probe_server.describe(exc)})
        except BaseException:
            pass
    finally:
        os._exit(status)


def warm_up(site):
    """Import torch and what the notebooks import, once; run nothing parallel (children are forked from here)."""
    sys.path.insert(1, site)  # the sandbox environment (torch), after this folder (as in the script's own import)
    os.environ["MPLBACKEND"] = "Agg"
    import torch  # noqa: E402  (after sys.path is set)

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    # the first backward with given output gradients imports much of torch (sympy among it, ~0.6 s):
    # pay that here, once, as the module probes do it (both dtypes), and not in every child's budget
    for dtype in (torch.float32, torch.float64):
        _layer = torch.nn.Linear(4, 4).to(dtype)
        _x = torch.ones(2, 4, dtype=dtype, requires_grad=True)
        _y = torch.nn.functional.softmax(_layer(_x), dim=-1)
        torch.autograd.backward([_y], [torch.ones_like(_y)])
    del _layer, _x, _y
    import wire  # noqa: E402

    for name in ("numpy", "matplotlib.pyplot", "hashlib", "math", "random"):
        try:
            __import__(name)
        except Exception:  # a notebook that needs it will say so itself
            pass
    return torch, wire


class PidNamespaces:
    """The zygote forks each child straight into a new PID namespace, as its PID 1: `unshare(CLONE_NEWPID)` makes
    the next fork's namespace a new one, `setns` to its own namespace afterwards makes the following forks' its own
    again. One fork of the ~200 MiB warm parent per child, not two (the child entering the namespace and forking its
    PID 1, waiting for it): 6 ms less per sandbox here. Where that cannot be done (no /proc, no privilege), the
    child enters the namespace and forks its PID 1 itself, as before."""

    def __init__(self, libc):
        self.libc = libc
        self.pid_ones: set[int] = set()  # the children forked as PID 1 of their namespace, until reaped
        try:
            self.own = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            self.own = None

    def enter_for_next_fork(self, spec) -> bool:
        """Whether the next fork is PID 1 of a new namespace (the spec asks for one and it could be made)."""
        if self.own is None or "pid" not in spec.get("namespaces", ()):
            return False
        return self.libc.unshare(confinement.NAMESPACE_FLAGS["pid"]) == 0

    def leave(self) -> None:
        """The next forks in this process's own namespace again; if that fails this process cannot fork a sandbox
        rightly any more: it ends (the grader starts another)."""
        if self.libc.setns(self.own, confinement.NAMESPACE_FLAGS["pid"]) != 0:
            os._exit(71)

    def exit_code(self, pid: int, status: int) -> int:
        """A reaped child's exit code as the waiting process of a child that forked its own PID 1 gave it (its PID 1's
        code; 128 + the signal that killed it), so that both ways say the same."""
        if pid not in self.pid_ones:
            return os.waitstatus_to_exitcode(status)
        self.pid_ones.discard(pid)
        return os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _spawn(control, torch, wire, request, fds, children, namespaces=None):
    """Fork one confined child (it never returns here: `_child` ends it) and wait for its inner pid."""
    fd_in, fd_out, *cgroup_fds = fds
    report_read, report_write = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # until the child is in `children`
    pid_one = namespaces is not None and namespaces.enter_for_next_fork(request["spec"])
    try:
        pid = os.fork()
    except BaseException:
        if pid_one:
            namespaces.leave()
        raise
    if pid and pid_one:
        namespaces.leave()
        namespaces.pid_ones.add(pid)
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        control.close()
        os.close(report_read)
        _child(torch, wire, request["spec"], fd_in, fd_out, report_write, cgroup_fds, pid_one)
    for fd in (fd_in, fd_out, *cgroup_fds):
        os.close(fd)
    os.close(report_write)
    with os.fdopen(report_read, "rb") as report:
        line = report.readline().strip()
    # the child says its pid once in its namespaces (as PID 1 its own number there is 1: ours is `pid`)
    inner = (pid if pid_one else int(line)) if line.isdigit() else None
    children[pid] = inner
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    return {"op": "spawned", "pid": pid, "inner": inner}


def _kill(pid, children):
    """SIGKILL a child's process group, its inner process and itself."""
    inner = children.get(pid)
    for target, group in ((pid, True), (inner, False), (pid, False)):
        if target:
            try:
                (os.killpg if group else os.kill)(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return {"op": "killed", "pid": pid}


FONTLIST_MAX_BYTES = 80_000  # matplotlib's list of ~140 fonts: ~57 KB; its reply is one message on the control
# socket, at most FONTLIST_MAX_MESSAGE bytes (a datagram larger than the socket's buffer cannot be sent)
FONTLIST_MAX_MESSAGE = 160_000


def _seeded_fontlist() -> list[str]:
    """The font lists matplotlib finds in its config folder (the grader put one there from an earlier start)."""
    try:
        return [n for n in os.listdir(os.environ.get("MPLCONFIGDIR", "")) if n.startswith("fontlist-")]
    except OSError:
        return []


def _fontlist() -> dict:
    """The font list matplotlib wrote at this process's start, before any sandbox was forked: the grader keeps it
    for the next warm parent (whose matplotlib then reads it instead of asking fontconfig and opening every font)."""
    for name in _seeded_fontlist():
        try:
            with open(os.path.join(os.environ["MPLCONFIGDIR"], name), "rb") as f:
                content = f.read(FONTLIST_MAX_BYTES + 1)
        except OSError:
            continue
        reply = {"op": "fontlist", "name": name, "content": content.decode("utf-8", "replace")}
        if len(content) <= FONTLIST_MAX_BYTES and len(json.dumps(reply)) <= FONTLIST_MAX_MESSAGE:
            return reply
    return {"op": "fontlist", "name": None, "content": None}


MADV_COLLAPSE = 25  # Linux 6.1+: back a range with transparent huge pages now, whatever the sysfs THP mode
HUGE_PAGE = 2 << 20


class HugePages:
    """The warm parent's private anonymous memory (about 200 MiB once torch is imported: the heap, the
    interpreter's arenas) collapsed into 2 MiB pages, one at a time while it waits for requests (`step`).

    Forking then copies one page-table entry per 2 MiB instead of 512, and a child's exit has as few to free: in a
    process set up as the warm parent is, a fork took 6.3 ms before and 1.3 ms after, and a fork that runs a small
    model to its exit 30 ms before and 19 ms after. Nothing a child sees changes: a child's write to a shared huge
    page splits it and copies 4 KiB, as before (what a sandbox is charged is the same), and the ranges keep their
    THP setting (a child's new memory gets no huge pages it would not have had). Best effort: where the kernel
    cannot (older than 6.1, THP disabled) the first refusal ends it and nothing changes."""

    def __init__(self, libc, maps="/proc/self/maps"):
        self.madvise = libc.madvise
        self.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        self.madvise.restype = ctypes.c_int
        self.pending: list[int] = []  # the start of each 2 MiB page still to collapse
        self.collapsed = 0
        try:
            with open(maps, encoding="ascii") as f:
                lines = f.read().splitlines()
        except OSError:
            return
        for line in lines:
            fields = line.split()
            # private, writable, anonymous (inode 0): the heap and the unnamed mappings, not the stack or a file
            if len(fields) < 5 or fields[1] != "rw-p" or fields[4] != "0" or fields[5:] not in ([], ["[heap]"]):
                continue
            low, high = (int(x, 16) for x in fields[0].split("-"))
            start = -(-low // HUGE_PAGE) * HUGE_PAGE
            self.pending.extend(range(start, high - HUGE_PAGE + 1, HUGE_PAGE))
        self.pending.reverse()  # popped from the end: lowest first

    def step(self) -> None:
        """Collapse the next 2 MiB page (a few milliseconds)."""
        address = self.pending.pop()
        if self.madvise(address, HUGE_PAGE, MADV_COLLAPSE) == 0:
            self.collapsed += 1
            return
        failure = ctypes.get_errno()
        if failure in (errno.EINVAL, errno.ENOMEM, errno.EPERM, errno.ENOSYS) and not self.collapsed:
            self.pending.clear()  # the kernel cannot: stop at the first refusal
        elif failure == errno.ENOMEM:
            self.pending.clear()  # no huge page left to allocate: stop


def zygote(config):
    """Fork one confined child per `spawn` request on the control socket; kill and reap them on request."""
    import socket

    fontlist = _seeded_fontlist()  # before matplotlib's import: it writes the file when there is none
    torch, wire = warm_up(config["site"])
    # what this process holds (torch's modules, ~250,000 objects) is never collected in a child: a child's full
    # collection would walk all of it and write to each object's header, copying most of this process's memory
    # into the child (in a test: 180 -> 40 ms for a child that allocates much; gradient_flow's cells -20%). No
    # collection first: it would take 95 ms of the start to free a few dozen objects
    gc.freeze()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(confinement.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader died: so do we
    control = socket.socket(fileno=config["control_fd"])
    threads = len(os.listdir(f"/proc/{os.getpid()}/task")) if os.path.isdir("/proc/self/task") else None
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    children, exited = {}, {}  # monitor pid -> inner pid; monitor pid -> exit code
    namespaces = PidNamespaces(libc)

    def reap(*_):
        """Collect every child that ended: our children, and the orphans we adopt as subreaper (a killed fork
        bomb's, a `setsid` daemon's), at once: a zombie would still count against its uid's process limit."""
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in children:
                children.pop(pid)
                exited[pid] = namespaces.exit_code(pid, code)
                while len(exited) > 256:
                    exited.pop(next(iter(exited)))

    libc.prctl(confinement.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, reap)

    def send(message):
        control.sendall(json.dumps(message).encode())

    send({"op": "ready", "pid": os.getpid(), "threads": threads, "torch": torch.__version__,
          "fontlist": "seeded" if fontlist else "built"})
    huge_pages = HugePages(libc)
    while True:
        while huge_pages.pending and not select.select([control], [], [], 0)[0]:
            huge_pages.step()  # while nothing is asked
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        except OSError:
            return
        if not data:
            return  # the grader closed its end
        request = json.loads(data)
        op = request.get("op")
        reap()
        if op == "spawn":
            send(_spawn(control, torch, wire, request, fds, children, namespaces))
        elif op == "kill":
            send(_kill(int(request["pid"]), children))
        elif op == "status":
            pid, deadline = int(request["pid"]), time.monotonic() + float(request.get("timeout", 0))
            while pid in children and time.monotonic() < deadline:
                time.sleep(0.01)
                reap()
            send({"op": "status", "pid": pid, "code": exited.get(pid), "running": pid in children})
        elif op == "fontlist":
            try:
                send(_fontlist())
            except OSError:  # too large for this socket after all: the grader keeps none
                send({"op": "fontlist", "name": None, "content": None})
        elif op == "usage":
            import resource

            send({"op": "usage", "zygote_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "sandbox_maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss})
        else:
            for fd in fds:
                os.close(fd)
            send({"op": "error", "message": f"unknown op {op!r}"})


def main():
    config = json.loads(sys.argv[1])
    zygote(config)


if __name__ == "__main__":
    main()
