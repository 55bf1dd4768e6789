"""One sandboxed process running one student's code: start, request with a deadline, kill.

The grader talks to runner.py over two pipes in wire.py's format. Every read has a deadline; a
process that misses it, dies, or sends a malformed frame is killed as a whole (its process group,
its PID namespace where the tier has one, and every process of its uid).
"""

import json
import os
import select
import shutil
import signal
import struct
import tempfile
import time
from dataclasses import dataclass, field

from autograder.running import memory_pressure
from autograder.running.sandbox import memory, tiers, uids, wire
from autograder.running.sandbox.reply import Reply, ReplyError, check_reply, decode_values, parse_json_header  # noqa: F401
from autograder.running.sandbox.limits import Limits  # noqa: F401 (part of this module's interface)
from autograder.running.sandbox.environment import SandboxEnvironment
from autograder.running.sandbox.zygote import BASE_ENV, Zygote, ZygoteError
from autograder.intake.validate import safe_text


class SandboxError(Exception):
    """The sandbox could not answer: it died, timed out or broke the protocol."""

    kind = "error"


class SandboxDied(SandboxError):
    kind = "died"


class SandboxTimeout(SandboxError):
    kind = "timeout"


class SandboxProtocolError(SandboxError):
    kind = "protocol"


class GraderOutOfMemory(SandboxError):
    """This process ran out of its own memory (its RLIMIT_DATA: jobs.worker.limit_memory) starting a sandbox,
    sending a request or reading a reply: what the submission's code returned (and the checks still hold) leaves
    the grader no room. The sandbox is ended (its pipes may be mid-frame): the caller may start another later."""

    kind = "grader_memory"


class SandboxMemoryExceeded(SandboxError):
    """The submission's processes together passed its memory budget (Limits.submission_memory_bytes): all killed."""

    kind = "memory"


@dataclass
class Sandbox:
    environment: SandboxEnvironment
    tier: str
    limits: Limits
    env: dict = field(default_factory=dict)  # extra environment for the student's code (JUPYTERHUB_USER)
    zygote: Zygote | None = None  # the worker's warm parent; None: one of its own for this sandbox

    def __post_init__(self):
        self.pid = None
        self.lease = None
        self.scratch = None
        self.info = {}
        self._own_zygote = None
        self._requests = self._replies = None
        self._next_id = 0
        self._failure = ""
        self.guard: memory.MemoryGuard | None = None

    # --- lifetime ---------------------------------------------------------------------------------

    def start(self) -> dict:
        try:
            if self.zygote is None:
                self._own_zygote = self.zygote = Zygote(self.environment, self.tier, self.limits.startup_timeout).start()
            if os.geteuid() == 0:
                self.lease = uids.acquire()
            return self._start(self.lease.uid if self.lease else None)
        except ZygoteError as exc:
            self.close()
            raise SandboxDied(str(exc)) from None
        except MemoryError:  # this process's own limit (a thread that could not start: threads.ThreadStartFailed)
            memory_pressure.note()
            self._broken_stream()
            raise GraderOutOfMemory("the grading process ran out of memory starting a sandbox") from None
        except BaseException:
            self.close()
            raise

    def _start(self, uid):
        if self.tier != "bubblewrap":
            self.scratch = tempfile.mkdtemp(prefix="autograde-scratch-")
            if uid is not None:
                os.chown(self.scratch, uid, uid)
            os.chmod(self.scratch, 0o700)
        child = tiers.child_spec(self.tier, self.zygote.spec, uid, self.scratch, self.limits.scratch_bytes)
        workdir = child["workdir"]
        child.update(
            env={**BASE_ENV, "HOME": workdir, "MPLCONFIGDIR": workdir, "TMPDIR": workdir, **self.env},
            limits=self._rlimits(uid), max_request_bytes=self.limits.max_reply_bytes,
            max_elements=self.limits.max_elements,
        )
        self.guard, cgroup_fds = self._memory_guard(uid)
        req_read, req_write = os.pipe()
        rep_read, rep_write = os.pipe()
        self._requests, self._replies = req_write, rep_read
        try:
            self.pid, _ = self.zygote.spawn(child, (req_read, rep_write, *cgroup_fds),
                                            timeout=self.limits.startup_timeout)
        finally:
            os.close(req_read)
            os.close(rep_write)
        self.guard.start()
        os.set_blocking(self._requests, False)
        header, _ = self._read(time.monotonic() + self.limits.startup_timeout)
        if header.get("op") == "failed":
            error = header.get("error") if isinstance(header.get("error"), dict) else {}
            self._failure = safe_text(f"{error.get('type')}: {error.get('message')}", 500)
            raise SandboxProtocolError(f"the sandbox could not confine itself ({self._failure})")
        if header.get("op") != "ready":
            raise SandboxProtocolError("the sandbox did not start properly")
        self.info = header
        return header

    def _memory_guard(self, uid) -> tuple[memory.MemoryGuard, list[int]]:
        """The submission's memory budget, for all its processes together: its pool uid's cgroup where the grader
        can make one (the kernel enforces it), else a watchdog over its processes. And the descriptors of the
        cgroup's `cgroup.procs` files for its first process to enter."""
        budget = self.limits.submission_memory_bytes
        if uid is not None and memory.resolve(self.limits.memory_guard) == "cgroup":
            cgroup = memory.UidCgroup(memory.cgroup_layout(), uid, budget, self.limits.processes + 8).create()
            self.lease.cgroup = cgroup  # removed when the uid is released, once its processes are gone
            return memory.MemoryGuard(budget, lambda: (), lambda: uids.kill_all(uid), cgroup), cgroup.procs_fds()
        if self.limits.memory_guard == "cgroup":
            memory.resolve("cgroup")  # says why there is none
            raise memory.MemoryGuardUnavailable("a memory cgroup needs a pool uid (a grader running as root)")
        if uid is not None:
            return memory.MemoryGuard(budget, lambda: uids.processes_of(uid), lambda: uids.kill_all(uid)), []
        # no pool uid: the warm parent's descendants that were not there before this sandbox
        root = self.zygote.process.pid
        before = memory.descendants(root)

        def processes():
            return memory.descendants(root) - before

        def kill():
            for pid in processes():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

        return memory.MemoryGuard(budget, processes, kill), []

    def _rlimits(self, uid) -> dict:
        # RLIMIT_NPROC counts every process of the uid: without a pool uid, the grader's own count too
        base = 0 if uid is not None else len(uids.processes_of(os.getuid()))
        limits = self.limits
        return {"memory_bytes": limits.memory_bytes, "cpu_seconds": limits.cpu_seconds,
                "file_bytes": limits.file_bytes, "open_files": limits.open_files, "core_bytes": 0,
                "processes": base + limits.processes}

    def close(self) -> None:
        """Kill everything the sandbox started and give its uid back."""
        if self.guard is not None:
            self.guard.stop()
        if self.pid is not None:
            if self.zygote is not None:
                self.zygote.kill(self.pid)
            self.pid = None
        for fd in (self._requests, self._replies):
            if fd is not None:
                os.close(fd)
        self._requests = self._replies = None
        if self.lease is not None:  # kills whatever is left under the uid (double-forked daemons)
            self.lease.release_in_background()
            self.lease = None
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
        if self._own_zygote is not None:
            self._own_zygote.close()
            self._own_zygote = self.zygote = None

    def startup_errors(self) -> str:
        return self._failure or (self.zygote.errors() if self.zygote is not None else "")

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    # --- requests ---------------------------------------------------------------------------------

    def request(self, header: dict, values: dict | None, timeout: float) -> Reply:
        """Send one request and wait for its reply; the runner's own timer gets `timeout`."""
        if self.pid is None:
            raise SandboxDied("the sandbox is not running")
        self._over_memory()
        self._next_id += 1
        header = dict(header, id=self._next_id, timeout=timeout)
        deadline = time.monotonic() + timeout + self.limits.grace
        try:
            self._write(header, values, deadline)
            reply, reply_values = self._read(deadline)
        except SandboxError:
            self._over_memory(look=True)
            raise
        except MemoryError as exc:
            memory_pressure.note()
            memory_pressure.release(exc)  # what was read of the reply so far, before anything else is allocated
            self._broken_stream()
            raise GraderOutOfMemory("the grading process ran out of memory on this request's data") from None
        try:
            return check_reply(reply, reply_values, self._next_id)
        except ReplyError as exc:
            raise SandboxProtocolError(str(exc)) from None

    def _broken_stream(self) -> None:
        """The pipes are mid-frame: nothing more is read from this sandbox (a next request would read the rest of
        this frame as its reply); it is killed, its uid given back."""
        try:
            self.close()
        except Exception:  # noqa: BLE001 (out of memory still: the restart, or the batch's end, cleans up)
            pass

    def _over_memory(self, look: bool = False) -> None:
        """SandboxMemoryExceeded if the submission is over its memory budget (the guard has killed it, or does now)."""
        if self.guard is None:
            return
        if look and not self.guard.exceeded.is_set():
            try:
                self.guard.check()  # a last look: the kernel may have OOM-killed it a moment ago
            except Exception:  # noqa: BLE001
                pass
        if self.guard.exceeded.is_set():
            raise SandboxMemoryExceeded(
                f"the submission's processes together passed its memory budget of "
                f"{self.limits.submission_memory_bytes / 1024**3:g} GiB ({self.guard.path})")

    def _write(self, header, values, deadline):
        buffers: list[bytes] = []
        header = dict(header)
        if values is not None:
            header["values"] = wire.encode(values, buffers)
        header["buffers"] = [len(b) for b in buffers]
        raw = json.dumps(header, allow_nan=False).encode()
        for chunk in [struct.pack(">I", len(raw)) + raw, *buffers]:
            view = memoryview(chunk)
            while view:
                self._wait(self._requests, deadline, writable=True)
                try:
                    view = view[os.write(self._requests, view):]
                except BrokenPipeError:
                    raise SandboxDied("the sandbox closed its end of the pipe") from None
                except BlockingIOError:
                    continue

    def _read(self, deadline):
        (length,) = struct.unpack(">I", self._read_exact(4, deadline))
        if length > wire.MAX_HEADER_BYTES:
            raise SandboxProtocolError(f"reply header of {length} bytes")
        try:
            header, sizes = parse_json_header(self._read_exact(length, deadline), self.limits.max_reply_bytes)
            buffers = [self._read_exact(n, deadline) for n in sizes]
            values = decode_values(header, buffers, self.limits.max_elements)
        except ReplyError as exc:
            raise SandboxProtocolError(str(exc)) from None
        return header, values

    def _read_exact(self, n, deadline) -> bytes:
        chunks, remaining = [], n
        while remaining:
            self._wait(self._replies, deadline)
            chunk = os.read(self._replies, min(remaining, 1 << 20))
            if not chunk:
                raise SandboxDied(self._death_reason())
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    def _wait(self, fd, deadline, writable=False):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SandboxTimeout("no answer within the time budget")
        ready = select.select([], [fd], [], remaining) if writable else select.select([fd], [], [], remaining)
        if not (ready[1] if writable else ready[0]):
            raise SandboxTimeout("no answer within the time budget")

    def _death_reason(self) -> str:
        code = self.zygote.status(self.pid, timeout=1.0) if (self.zygote is not None and self.pid) else None
        if code is None:
            return "the sandbox closed its pipe"
        if code < 0:
            return f"the sandbox was killed by signal {signal.Signals(-code).name}"
        if code > 128 and code - 128 in signal.Signals._value2member_map_:
            return f"the sandbox was killed by signal {signal.Signals(code - 128).name}"
        return f"the sandbox exited with status {code}"
