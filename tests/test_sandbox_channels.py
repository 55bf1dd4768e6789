"""Nothing of one sandbox reaches the next one on the same pool uid (issue 21): kernel key rings, SysV shared memory
and message queues, POSIX message queues, files in /tmp, /var/tmp and /dev/shm, an abstract Unix socket served by a
leftover daemon.

For every channel and every tier this machine runs: a writer graded in one sandbox, then a reader in the next
sandbox on the same uid (the pool is forced to one uid), must find nothing. The controls show the channel is real:
the same writer and reader run directly on the host as that uid, one process after the other, do pass the secret;
and inside one sandbox (writer and reader in the same process) wherever the tier does not refuse the channel
outright. After the run, the uid's key ring on the host is empty.
"""

import os
import secrets
import subprocess

import pytest

from autograder.running.sandbox import environment, tiers, uids
from autograder.running.sandbox.process import Sandbox
from autograder.running.sandbox.zygote import Zygote
from grading_helpers import TEST_LIMITS
from hostile.channels import CHANNELS, PRELUDE, reader, writer
from hostile.watch import machine_tiers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="pool uids (and this test's forced uid) need root")

TEST_UID = 61990  # outside the usual pool (61000-61063): no other grader on the machine holds it
HOST_PYTHON = "/usr/bin/python3"
ROOT = os.geteuid() == 0

# where a tier refuses the channel outright (so even writer and reader in one process get nothing): seccomp
# (key rings; SysV IPC and POSIX message queues without an IPC namespace; AF_UNIX sockets in landlock), Landlock
# (no write outside the scratch folder; a POSIX message queue is a file of the mqueue file system), bubblewrap's
# private /tmp and /dev/shm (root's, mode 0755: the sandbox's uid writes only its work folder)
REFUSED = {
    "bubblewrap": {"key_ring", "shared_files"},
    "landlock": {"key_ring", "shared_files", "abstract_socket", "posix_mq"} | (set() if ROOT else {"sysv_shm",
                                                                                                   "sysv_msg"}),
    "rlimits": {"key_ring", "sysv_shm", "sysv_msg", "posix_mq"},
}

CLEANUP = PRELUDE + r'''
_libc.syscall(_NR["keyctl"], 7, ctypes.c_int(-4))  # KEYCTL_CLEAR @u
_libc.mq_unlink(b"/" + _NAME)
'''

KEYS_OF_UID = PRELUDE + r'''
_buf = ctypes.create_string_buffer(4096)
_n = _libc.syscall(_NR["keyctl"], 11, ctypes.c_int(-4), _buf, ctypes.c_size_t(4096))  # KEYCTL_READ @u: key ids
print(max(_n, 0) // 4)
'''


def as_uid(code: str) -> str:
    """Run `code` with the host's Python as TEST_UID, outside any sandbox; what it prints (`found` if it sets it)."""
    code += "\nif 'found' in dir():\n    print(found)\n"
    done = subprocess.run(["setpriv", f"--reuid={TEST_UID}", f"--regid={TEST_UID}", "--clear-groups",
                           HOST_PYTHON, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=60,
                          cwd="/")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def one_uid(monkeypatch):
    """The pool is one uid: every sandbox of the test runs as TEST_UID."""
    monkeypatch.setattr(uids, "FIRST_UID", TEST_UID)
    monkeypatch.setattr(uids, "POOL_SIZE", 1)
    uids.purge(TEST_UID)
    as_uid(CLEANUP)
    yield TEST_UID
    uids.wait_for_releases()
    uids.purge(TEST_UID)
    as_uid(CLEANUP)


@pytest.fixture(scope="module", params=tiers.TIERS)
def zygote(request):
    if request.param not in machine_tiers():
        pytest.skip(f"tier {request.param} does not work on this machine")
    with Zygote(environment.locate(), request.param) as z:
        yield z


def run_cells(zygote, *cells):
    """Run `cells` in one sandbox (on the forced uid) and give back its `found`."""
    box = Sandbox(zygote.environment, zygote.tier, TEST_LIMITS, zygote=zygote)
    box.start()
    try:
        assert box.info["uid"] == TEST_UID
        for i, source in enumerate(cells):
            reply = box.request({"op": "exec_cell", "source": source, "cell": i}, None, 30)
            assert reply.ok, reply.error
        if "found = None" not in cells[-1]:
            return None
        reply = box.request({"op": "variable", "name": "found"}, None, 10)
        assert reply.ok, reply.error
        return reply.result
    finally:
        box.close()
        uids.wait_for_releases()  # the uid is free (and purged) again: the next sandbox gets the same one


@pytest.mark.parametrize("channel", CHANNELS)
def test_the_channel_is_real_on_the_host(channel, one_uid):
    """The control: two processes of the uid, one after the other, with nothing between them but the uid."""
    secret = "S" + secrets.token_hex(8)
    assert as_uid(writer(channel, secret)) == ""
    assert as_uid(reader(channel)) == secret
    uids.kill_all(one_uid)  # the abstract socket's daemon


@pytest.mark.parametrize("channel", CHANNELS)
def test_a_reader_after_a_writer_on_the_same_uid_finds_nothing(channel, zygote, one_uid):
    secret = "S" + secrets.token_hex(8)
    if channel not in REFUSED[zygote.tier]:  # the control inside the tier: one process, the reader finds it
        assert run_cells(zygote, writer(channel, secret), reader(channel)) == secret
        secret = "S" + secrets.token_hex(8)
    run_cells(zygote, writer(channel, secret))
    assert run_cells(zygote, reader(channel)) is None
    assert as_uid(reader(channel)) == "None", "the writer's data is still on the host"
    assert as_uid(KEYS_OF_UID) == "0", "the uid's key ring on the host is not empty"


# the key ring writer's key, but in a key ring of its own linked into the uid's user ring (@u)
NESTED_KEY_WRITER = PRELUDE + r'''
_ring = _libc.syscall(_NR["add_key"], b"keyring", b"autograde-h21-nested", None, ctypes.c_size_t(0), ctypes.c_int(-4))
assert _ring > 0, ctypes.get_errno()
_libc.syscall(_NR["keyctl"], 5, _ring, ctypes.c_uint32(0x3F3F3F3F))  # KEYCTL_SETPERM: anyone may search it
_data = SECRET.encode()
_kid = _libc.syscall(_NR["add_key"], b"user", _NAME, _data, ctypes.c_size_t(len(_data)), ctypes.c_int(_ring))
assert _kid > 0, ctypes.get_errno()
_libc.syscall(_NR["keyctl"], 5, _kid, ctypes.c_uint32(0x3F3F3F3F))
'''


@pytest.mark.parametrize("where", ["in_the_user_ring", "in_a_ring_linked_into_it"])
def test_a_key_left_on_the_uid_outside_any_sandbox_is_gone_once_a_sandbox_starts_on_it(zygote, one_uid, where):
    """Key rings outlive processes: what was stored on the uid before (an older grader, a process run as that uid
    by hand) is cleared by the next sandbox on it, before the student's code runs. Gone means unreadable: a key
    only unlinked lives on until the kernel's key collector runs, and meanwhile the reader finds it by its id in
    /proc/keys (unlinking alone left the secret readable in about half of the rounds here); so three rounds."""
    for _ in range(3):
        secret = "S" + secrets.token_hex(8)
        if where == "in_the_user_ring":
            as_uid(writer("key_ring", secret))
        else:
            as_uid(f"SECRET = {secret!r}\n" + NESTED_KEY_WRITER)
        assert as_uid(reader("key_ring")) == secret
        run_cells(zygote, "x = 1")
        assert as_uid(reader("key_ring")) == "None"
        assert as_uid(KEYS_OF_UID) == "0"
