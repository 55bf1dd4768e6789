"""The warm parent: one per grading worker and tier, torch imported once, a confined fork per submission.

    with Zygote(environment.locate(), "bubblewrap", Limits()) as zygote:
        box = Sandbox(environment, "bubblewrap", limits, zygote=zygote)

The grader speaks to it over a Unix socket: `spawn` hands it the two pipe ends of a new sandbox
(SCM_RIGHTS) and the child's confinement (tiers.child_spec); `kill` ends a child and everything it
started; `status` tells how a child ended. The warm parent itself runs only runner.py's code and
never sees a student's pipe after the fork.
"""

import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from autograder.running.sandbox import uids
from autograder.running.sandbox.environment import SandboxEnvironment
from autograder.running.sandbox.tiers import ZYGOTE_COMMANDS, LaunchSpec

BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


class ZygoteError(Exception):
    """The warm parent could not start or stopped answering."""


class Zygote:
    def __init__(self, environment: SandboxEnvironment, tier: str, startup_timeout: float = 120.0):
        self.environment, self.tier, self.startup_timeout = environment, tier, startup_timeout
        self.process: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.home: str | None = None
        self.info: dict = {}  # the warm parent's "ready" message
        self._asking = threading.Lock()  # one request at a time: each reply is read by the thread that asked
        self.spec = LaunchSpec(python=str(environment.python), site=str(environment.site),
                               runner_dir=str(environment.runner_dir), env=dict(BASE_ENV))

    # --- lifetime ---------------------------------------------------------------------------------

    def start(self) -> "Zygote":
        """Launch and wait until it is warm."""
        return self.launch().wait_ready()

    def launch(self) -> "Zygote":
        """Start the warm parent without waiting for it (it imports torch meanwhile): see wait_ready."""
        root = os.geteuid() == 0
        cmd = ZYGOTE_COMMANDS[self.tier](self.spec, root)
        env = dict(self.spec.env)
        if self.tier != "bubblewrap":  # on the host: its own folder for matplotlib's font cache
            self.home = tempfile.mkdtemp(prefix="autograde-zygote-")
            env.update(HOME=self.home, MPLCONFIGDIR=self.home)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()
        config = {"site": self.spec.site if self.tier != "bubblewrap" else "/sandbox/site",
                  "control_fd": theirs.fileno()}
        try:
            self.process = subprocess.Popen(
                cmd + [json.dumps(config)], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=self._stderr, env=env, cwd="/", start_new_session=True,
            )
        finally:
            theirs.close()
        self.control = ours
        self.info = {}
        return self

    def wait_ready(self) -> "Zygote":
        if self.info.get("op") == "ready":
            return self
        if self.control is None:
            raise ZygoteError("the sandbox's warm parent is not running")
        try:
            self.info = self._receive(self.startup_timeout)
        except ZygoteError as exc:
            self.close()
            raise ZygoteError(f"the sandbox's warm parent did not start ({exc}): {self.errors()}") from None
        if self.info.get("op") != "ready":
            self.close()
            raise ZygoteError(f"the sandbox's warm parent did not start: {self.errors()}")
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def close(self) -> None:
        if self.control is not None:
            self.control.close()  # the warm parent sees EOF and exits; its children die with it
            self.control = None
        if self.process is not None:
            # nothing of it needs an orderly exit (its children are killed with it: PID namespace, parent-death
            # signal); Python's teardown with torch loaded would cost most of a second
            self.process.kill()
            self.process.wait()
            self.process = None
        if self.home:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
        uids.wait_for_releases()  # the uids its sandboxes had are empty and unlocked

    def errors(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read(4000).decode("utf-8", "replace").strip()[-2000:]
        except (OSError, ValueError, AttributeError):
            return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # --- requests ---------------------------------------------------------------------------------

    def spawn(self, child: dict, fds: tuple[int, int], timeout: float = 30.0) -> tuple[int, int | None]:
        """Fork a child that confines itself by `child` and serves on `fds` (requests in, replies out)."""
        if not self.alive():
            self.close()
            self.start()
        self.wait_ready()
        reply = self._ask({"op": "spawn", "spec": child}, timeout, fds)
        return int(reply["pid"]), reply.get("inner")

    def kill(self, pid: int) -> None:
        if self.alive():
            try:
                self._ask({"op": "kill", "pid": pid}, 10.0)
            except ZygoteError:
                pass

    def status(self, pid: int, timeout: float = 1.0) -> int | None:
        """The child's exit code (negative: killed by that signal), or None if it is still running or unknown."""
        if not self.alive():
            return None
        try:
            return self._ask({"op": "status", "pid": pid, "timeout": timeout}, timeout + 5.0).get("code")
        except ZygoteError:
            return None

    def usage(self) -> dict:
        """Peak resident memory (KiB) of the warm parent and of the largest sandbox it has reaped."""
        if not self.alive():
            return {}
        try:
            reply = self._ask({"op": "usage"}, 10.0)
        except ZygoteError:
            return {}
        return {k: v for k, v in reply.items() if k.endswith("_kib")}

    def _ask(self, message: dict, timeout: float, fds=()) -> dict:
        with self._asking:
            try:
                socket.send_fds(self.control, [json.dumps(message).encode()], list(fds))
            except OSError as exc:
                raise ZygoteError(f"the sandbox's warm parent is gone ({exc})") from None
            return self._receive(timeout)

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ZygoteError("no answer in time")
            ready, _, _ = select.select([self.control], [], [], min(remaining, 0.5))
            if ready:
                data = self.control.recv(1 << 16)
                if not data:
                    raise ZygoteError("it exited")
                return json.loads(data)
            if not self.alive():
                raise ZygoteError("it exited")
