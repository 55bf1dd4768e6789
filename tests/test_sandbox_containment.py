"""What student code can see and reach inside each sandbox tier, asked directly of a running sandbox."""

import os
import socket
import threading

import pytest

from autograder import REPO_ROOT
from autograder.running.sandbox import environment, tiers, uids
from autograder.running.sandbox.process import Sandbox
from grading_helpers import TEST_LIMITS, runner_processes

pytestmark = pytest.mark.slow

MACHINE_TIERS = tiers.available()


@pytest.fixture(scope="module", params=tiers.TIERS)
def sandbox(request):
    if request.param not in MACHINE_TIERS:
        pytest.skip(f"tier {request.param} does not work on this machine")
    box = Sandbox(environment.locate(), request.param, TEST_LIMITS, env={"JUPYTERHUB_USER": "alice"})
    box.start()
    yield request.param, box
    box.close()


def run(box, source: str, name: str):
    reply = box.request({"op": "exec_cell", "source": source, "cell": 0}, None, 20)
    assert reply.ok, reply.error
    return box.request({"op": "variable", "name": name}, None, 5).result


def test_course_files_are_out_of_view(sandbox):
    tier, box = sandbox
    if tier == "rlimits":
        pytest.skip("the rlimits tier has no file-system isolation (documented)")
    targets = [str(REPO_ROOT / "solutions" / "rmsnorm.py"), str(REPO_ROOT / "autograder" / "checks" / "rmsnorm.py"),
               str(REPO_ROOT / "assignments" / "rmsnorm" / "rmsnorm.ipynb"), str(REPO_ROOT / ".git" / "HEAD"),
               "/etc/passwd", "/root"]
    readable = run(box, (
        f"import os\nREADABLE = []\nfor p in {targets!r}:\n"
        "    try:\n        open(p, 'rb').read(1) if os.path.isfile(p) else os.listdir(p)\n        READABLE.append(p)\n"
        "    except OSError:\n        pass"), "READABLE")
    assert readable == []


def test_nothing_of_the_course_is_importable(sandbox):
    tier, box = sandbox
    result = run(box, (
        "import sys\nIMPORTED = []\nfor name in ['solutions', 'autograder', 'nbgrader']:\n"
        "    try:\n        __import__(name)\n        IMPORTED.append(name)\n    except ImportError:\n        pass\n"
        "PATHS = [p for p in sys.path if 'work' in p or 'autograder' in p or 'site-packages' in p]"), "IMPORTED")
    assert result == []
    assert run(box, "", "PATHS") == []


def test_no_network_even_to_loopback(sandbox):
    tier, box = sandbox
    if tier == "rlimits":
        pytest.skip("the rlimits tier has no network isolation (documented)")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        try:
            accepted.append(server.accept())
        except OSError:  # the listener shut down at the test's end: nothing connected
            pass

    listener = threading.Thread(target=accept, daemon=True)
    listener.start()
    try:
        result = run(box, (
            "import socket\ns = socket.socket()\ns.settimeout(2)\n"
            f"try:\n    s.connect(('127.0.0.1', {port}))\n    CONNECTED = True\nexcept OSError:\n    CONNECTED = False"),
            "CONNECTED")
        assert result is False and accepted == []
    finally:
        try:
            server.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept (close alone does not, on Linux)
        except OSError:
            pass
        server.close()
        listener.join(5)


def test_student_code_runs_as_an_unprivileged_pool_uid(sandbox):
    tier, box = sandbox
    uid = run(box, "import os\nUID = os.getuid()", "UID")
    if os.geteuid() == 0:
        assert uids.FIRST_UID <= uid < uids.FIRST_UID + uids.POOL_SIZE
    else:
        assert uid != 0


def test_student_id_reaches_the_notebook(sandbox):
    tier, box = sandbox
    assert run(box, "import os\nWHO = os.environ.get('JUPYTERHUB_USER')", "WHO") == "alice"


def test_torch_uses_one_thread(sandbox):
    tier, box = sandbox
    assert run(box, "import torch\nTHREADS = torch.get_num_threads()", "THREADS") == 1


def test_only_its_own_pipes_are_open_and_no_capability_is_left(sandbox):
    """The fork of the warm parent keeps nothing of it: not its control socket, no capability at all."""
    tier, shared = sandbox
    box = Sandbox(environment.locate(), tier, TEST_LIMITS, zygote=shared.zygote)  # fresh: nothing opened by other tests
    box.start()
    try:
        check_descriptors_and_capabilities(tier, box)
    finally:
        box.close()


def check_descriptors_and_capabilities(tier, box):
    fds = run(box, ("import os\ndef _open(fd):\n    try:\n        os.fstat(fd)\n        return True\n"
                    "    except OSError:\n        return False\nFDS = [fd for fd in range(4096) if _open(fd)]"), "FDS")
    assert fds == [0, 1, 2, 3, 4]  # /dev/null thrice, then the request and the reply pipe
    if os.geteuid() == 0:
        caps = run(box, "CAPS = {l.split(':')[0]: int(l.split()[1], 16) for l in open('/proc/self/status') "
                        "if l.startswith('Cap')}", "CAPS") if tier != "landlock" else None
        if caps is not None:
            assert caps == {"CapInh": 0, "CapPrm": 0, "CapEff": 0, "CapBnd": 0, "CapAmb": 0}


def test_two_sandboxes_of_one_warm_parent_cannot_reach_each_other(sandbox):
    """A second submission forked from the same warm parent: signals and ptrace from the first reach nothing."""
    tier, box = sandbox
    if tier == "rlimits" and os.geteuid() != 0:
        pytest.skip("without root, the rlimits tier's sandboxes share the grader's uid")
    other = Sandbox(environment.locate(), tier, TEST_LIMITS, zygote=box.zygote)
    other.start()
    try:
        run(other, "import os\nALIVE = os.getpid()", "ALIVE")
        hits = run(box, (
            "import os, signal, ctypes\nHITS = []\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "for pid in range(2, 1 << 16):\n"
            "    if pid == os.getpid():\n        continue\n"
            "    try:\n        os.kill(pid, 0)\n    except OSError:\n        continue\n"
            "    if libc.ptrace(16, pid, 0, 0) == 0:\n        HITS.append(('ptrace', pid))\n"
            "    try:\n        os.kill(pid, signal.SIGKILL)\n        HITS.append(('kill', pid))\n    except OSError:\n        pass\n"
            "try:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass"), "HITS")
        assert hits == []
        assert run(other, "ALIVE2 = 1", "ALIVE2") == 1  # the other sandbox still answers
    finally:
        other.close()


def test_the_sandbox_is_pid_1_forked_straight_from_the_warm_parent(sandbox):
    """Where a tier gives each sandbox a PID namespace, the warm parent forks the sandbox into it as its PID 1: no
    second fork of the ~200 MiB parent, no process in between waiting (runner.py's PidNamespaces)."""
    tier, _ = sandbox
    box = Sandbox(environment.locate(), tier, TEST_LIMITS)  # a warm parent of its own: only this sandbox under it
    box.start()
    try:
        pid, ppid = run(box, "import os\nPIDS = (os.getpid(), os.getppid())", "PIDS")
        root = box.zygote.process.pid  # bwrap (the warm parent under it), or the warm parent itself
        runners = runner_processes(root)
        if tier == "bubblewrap" or (tier == "landlock" and os.geteuid() == 0):
            assert (pid, ppid) == (1, 0)  # PID 1 of its own namespace, its parent outside it
            assert len(runners) == 2, runners  # the warm parent and the sandbox, nothing in between
        else:  # no PID namespace: the sandbox is the warm parent's child as it always was
            assert len(runners) == 2 and pid > 1
    finally:
        box.close()


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_how_a_sandbox_ended_is_said_the_same_in_every_tier(sandbox, how):
    """Its exit status, or the signal that killed it, whether the sandbox is the warm parent's child or PID 1 of a
    namespace forked straight from it (whose status the warm parent gives as a waiting parent did: 128 + the
    signal)."""
    from autograder.running.sandbox.process import SandboxDied

    tier, shared = sandbox
    box = Sandbox(environment.locate(), tier, TEST_LIMITS, zygote=shared.zygote)
    box.start()
    try:
        if how == "killed":
            threading.Timer(0.5, lambda: box.zygote.kill(box.pid)).start()
        source = "import os\nos._exit(3)" if how == "exit" else "import time\ntime.sleep(20)"
        with pytest.raises(SandboxDied) as died:
            box.request({"op": "exec_cell", "source": source, "cell": 0}, None, 30)
        expected = "exited with status 3" if how == "exit" else "was killed by signal SIGKILL"
        assert str(died.value) == f"the sandbox {expected}"
    finally:
        box.close()


def test_two_threads_asking_the_warm_parent_each_get_their_own_answer(sandbox):
    """A kill from a timer thread while the grading thread asks how the sandbox ended: the warm parent answers one
    request at a time, and each answer reaches the thread that asked (not the one whose select woke first)."""
    tier, shared = sandbox
    box = Sandbox(environment.locate(), tier, TEST_LIMITS, zygote=shared.zygote)
    box.start()
    try:
        usages = []
        for _ in range(6):
            # the warm parent holds a status request of a running sandbox for 0.4 s; a usage request comes meanwhile
            asker = threading.Timer(0.1, lambda: usages.append(box.zygote.usage()))
            asker.start()
            assert box.zygote.status(box.pid, timeout=0.4) is None  # still running
            asker.join()
        assert len(usages) == 6 and all("zygote_maxrss_kib" in usage for usage in usages), usages
    finally:
        box.close()


def test_what_the_warm_parent_holds_is_frozen_and_the_students_objects_are_collected(sandbox):
    """The warm parent freezes its objects before it forks (gc.freeze): a child's full collection does not walk
    torch's quarter of a million objects, copying the pages they are on. The student's own garbage is collected as
    ever."""
    tier, box = sandbox
    frozen, enabled, collected = run(box, (
        "import gc, weakref\nclass Node:\n    pass\n"
        "a, b = Node(), Node()\na.other, b.other = b, a\nprobe = weakref.ref(a)\ndel a, b\ngc.collect()\n"
        "GC = (gc.get_freeze_count(), gc.isenabled(), probe() is None)"), "GC")
    assert frozen > 100_000 and enabled and collected
