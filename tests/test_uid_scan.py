"""The scan of a pool uid's processes (uids._tasks_of), on which every purge, kill and memory watchdog relies: it finds
the uid's live processes and its zombies, tells them apart, and nothing a process names itself moves it to another uid.
"""

import os
import subprocess
import sys
import time

import pytest

from autograder.running.sandbox import uids

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="processes of another uid need root")

UID = 61991  # outside the usual pool (61000-61063) and the other tests' own uids


def as_uid(*argv: str) -> subprocess.Popen:
    return subprocess.Popen(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", *argv])


def state_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/status", "rb") as f:
        return next(line for line in f if line.startswith(b"State:")).split()[1]


def test_live_processes_and_zombies_of_the_uid_and_nothing_else():
    live = as_uid("sleep", "60")
    zombie = as_uid("true")  # never waited for until the end: a zombie of the uid
    # a process of root named so that its status line reads like another Uid line (the kernel escapes the newline)
    impostor = subprocess.Popen([sys.executable, "-c", (
        "import ctypes, time\n"
        f"ctypes.CDLL(None).prctl(15, b'x\\nUid:\\t{UID}\\t{UID}', 0, 0, 0)\n"
        "print('named', flush=True)\n"
        "time.sleep(60)")], stdout=subprocess.PIPE)
    try:
        assert impostor.stdout.readline() == b"named\n"
        deadline = time.monotonic() + 10
        while state_of(zombie.pid) != b"Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state_of(zombie.pid) == b"Z"
        assert state_of(live.pid) in (b"S", b"R")
        found = dict(uids._tasks_of(UID))
        assert found == {live.pid: False, zombie.pid: True}
        assert uids.processes_of(UID) == [live.pid]
        assert sorted(uids.processes_of(UID, zombies=True)) == sorted([live.pid, zombie.pid])
        assert impostor.pid in dict(uids._tasks_of(0))
    finally:
        for process in (live, impostor):
            process.kill()
        for process in (live, zombie, impostor):
            process.wait()
    assert uids._tasks_of(UID) == []
