"""What student code can see and reach inside each sandbox tier, asked directly of a running sandbox."""

import os
import socket
import threading

import pytest

from autograder import REPO_ROOT
from autograder.sandbox import environment, tiers, uids
from autograder.sandbox.process import Sandbox
from grading_helpers import TEST_LIMITS

pytestmark = pytest.mark.slow

PROBE_UID = 65534 if os.geteuid() == 0 else None
MACHINE_TIERS = tiers.available(PROBE_UID)


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
    targets = [str(REPO_ROOT / "solutions" / "rmsnorm.py"), str(REPO_ROOT / "autograder" / "checks" / "test_rmsnorm.py"),
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
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    try:
        result = run(box, (
            "import socket\ns = socket.socket()\ns.settimeout(2)\n"
            f"try:\n    s.connect(('127.0.0.1', {port}))\n    CONNECTED = True\nexcept OSError:\n    CONNECTED = False"),
            "CONNECTED")
        assert result is False and accepted == []
    finally:
        server.close()


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
