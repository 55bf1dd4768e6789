"""The warm parent: one per grading worker and tier, torch imported once, a confined fork per submission.

    with Zygote(environment.locate(), "bubblewrap", Limits()) as zygote:
        box = Sandbox(environment, "bubblewrap", limits, zygote=zygote)

The grader speaks to it over a Unix socket: `spawn` hands it the two pipe ends of a new sandbox
(SCM_RIGHTS) and the child's confinement (tiers.child_spec); `kill` ends a child and everything it
started; `status` tells how a child ended. The warm parent itself runs only runner.py's code and
never sees a student's pipe after the fork.
"""

import contextlib
import hashlib
import json
import os
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from autograder.running.sandbox import uids
from autograder.running.sandbox.environment import SandboxEnvironment
from autograder.running.sandbox.tiers import ZYGOTE_COMMANDS, LaunchSpec

BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}


class ZygoteError(Exception):
    """The warm parent could not start or stopped answering."""


# What matplotlib's list of fonts is made of: a change in any of these makes a kept list stale
FONT_SOURCES = ("/usr/share/fonts", "/usr/local/share/fonts", "/etc/fonts")
FONTLIST_MAX_BYTES = 80_000  # as runner.py sends it


class FontlistCache:
    """matplotlib's font list as the first warm parent of a tier built it, kept next to the sandbox's site folder,
    so that a later warm parent reads it instead of building it again (0.2-0.3 s of its start: fontconfig's scan,
    every font opened). Taken from the warm parent right after its start, before any sandbox was forked from it;
    kept under a key of the tier, the interpreter and what the list is made of (the font folders, fontconfig's
    settings, matplotlib's own fonts and code): anything changed there, and the next warm parent builds it anew."""

    def __init__(self, spec: "LaunchSpec", tier: str):
        self.spec, self.tier = spec, tier
        self.path = Path(spec.site).parent / "fontlists" / f"{tier}.json"
        self.current: str | None = None  # the key of the fonts as they were when the warm parent started (read)

    def key(self) -> str:
        digest = hashlib.sha256(f"{self.tier}\0{self.spec.python}\0{self.spec.site}".encode())
        matplotlib = Path(self.spec.site) / "matplotlib"
        for source in (*FONT_SOURCES, str(matplotlib / "mpl-data" / "fonts")):
            for folder, dirs, files in sorted(os.walk(source)):
                dirs.sort()
                for name in sorted(files):
                    try:
                        st = os.stat(os.path.join(folder, name))
                    except OSError:
                        continue
                    digest.update(f"{folder}/{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        for name in ("font_manager.py", "__init__.py", "_version.py"):
            try:
                st = os.stat(matplotlib / name)
                digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
            except OSError:
                pass
        return digest.hexdigest()

    def read(self) -> tuple[str, str] | None:
        """(file name, content) of the kept list, if it is there, well formed and of these fonts. The fonts as they
        are now are what a list kept by `write` after this start is said to be of (a font installed meanwhile makes
        it stale at the next start, never a list of other fonts kept under this key)."""
        self.current = self.key()
        try:
            if self.path.stat().st_size > 2 * FONTLIST_MAX_BYTES:
                return None
            record = json.loads(self.path.read_text(encoding="utf-8"))
            name, content = record["name"], record["content"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if record.get("key") != self.current or not _is_fontlist(name, content):
            return None
        return name, content

    def write(self, reply: dict) -> None:
        """Keep the list a warm parent sent (`fontlist` op), if it is one; silently nothing where it cannot be."""
        name, content = reply.get("name"), reply.get("content")
        if not _is_fontlist(name, content) or self.current is None:
            return
        temporary = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=".fontlist-", delete=False,
                                             encoding="utf-8") as f:
                temporary = f.name
                json.dump({"key": self.current, "name": name, "content": content}, f)
            os.replace(temporary, self.path)
        except OSError:
            if temporary is not None:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)


def _is_fontlist(name, content) -> bool:
    """A file name matplotlib gives its font list, and JSON of the list's shape."""
    if not isinstance(name, str) or not isinstance(content, str) or len(content) > FONTLIST_MAX_BYTES:
        return False
    if not (name.startswith("fontlist-v") and name.endswith(".json") and "/" not in name and ".." not in name):
        return False
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and isinstance(data.get("ttflist"), list) and "_version" in data


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
        self.fontlists = FontlistCache(self.spec, tier)

    # --- lifetime ---------------------------------------------------------------------------------

    def start(self) -> "Zygote":
        """Launch and wait until it is warm."""
        return self.launch().wait_ready()

    def launch(self) -> "Zygote":
        """Start the warm parent without waiting for it (it imports torch meanwhile): see wait_ready."""
        root = os.geteuid() == 0
        fontlist = self.fontlists.read()  # matplotlib's font list from an earlier start, if still true
        seed = tempfile.TemporaryFile() if fontlist is not None and self.tier == "bubblewrap" else None
        if seed is not None:  # copied by bwrap into the warm parent's own /tmp/matplotlib (MPLCONFIGDIR)
            seed.write(fontlist[1].encode("utf-8"))
            seed.seek(0)
        cmd = ZYGOTE_COMMANDS[self.tier](self.spec, root, {fontlist[0]: seed.fileno()} if seed is not None else {})
        env = dict(self.spec.env)
        if self.tier != "bubblewrap":  # on the host: its own folder for matplotlib's font cache
            self.home = tempfile.mkdtemp(prefix="autograde-zygote-")
            env.update(HOME=self.home, MPLCONFIGDIR=self.home)
            if fontlist is not None:
                Path(self.home, fontlist[0]).write_text(fontlist[1], encoding="utf-8")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._stderr = tempfile.TemporaryFile()
        config = {"site": self.spec.site if self.tier != "bubblewrap" else "/sandbox/site",
                  "control_fd": theirs.fileno()}
        try:
            self.process = subprocess.Popen(
                cmd + [json.dumps(config)], pass_fds=(theirs.fileno(), *([seed.fileno()] if seed else [])),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr, env=env, cwd="/",
                start_new_session=True,
            )
        finally:
            theirs.close()
            if seed is not None:
                seed.close()
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
        if self.info.get("fontlist") == "built":  # kept for the next start; asked before any sandbox is forked
            try:
                self.fontlists.write(self._ask({"op": "fontlist"}, 10.0))
            except ZygoteError:
                pass
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
                data = self.control.recv(1 << 18)
                if not data:
                    raise ZygoteError("it exited")
                return json.loads(data)
            if not self.alive():
                raise ZygoteError("it exited")
