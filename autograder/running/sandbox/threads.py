"""Threads whose start never waits on the new thread.

`threading.Thread.start()` waits, with no timeout, for the new thread to say that it runs. When the new thread fails
before it says so (a MemoryError in its bootstrap: a grading worker at its memory limit, RLIMIT_DATA, because a
submission's replies filled it), `start()` never returns, and the worker hangs with that submission (CPython 3.11;
seen as a class run that never ended). A `Background` starts its function with `_thread.start_new_thread`, which
returns once the OS thread exists, or raises here (ThreadStartFailed, a MemoryError: the caller's error, as any
failed allocation); if the function then cannot run at all, `join` says so when its timeout is over, instead of waiting
forever.

    watcher = Background(watch, "memory-guard").start(wait=10.0)  # ThreadStartFailed if it is not running by then
    ...
    watcher.join(timeout=2.0)  # True: the function has returned
"""

import _thread
import threading
from collections.abc import Callable


class ThreadStartFailed(MemoryError):
    """A thread that was created did not start running (its bootstrap failed: the process is out of memory)."""


class Background:
    """One function on a thread of its own (always a daemon: nothing waits for it at exit but `join`)."""

    def __init__(self, target: Callable[[], object], name: str):
        self.target, self.name = target, name
        self._running, self._done = threading.Event(), threading.Event()
        self._once = threading.Lock()  # whoever holds it runs the function: the thread, or `run_here`
        self._ident: int | None = None
        self.started = False

    def start(self, wait: float | None = None) -> "Background":
        """Start the function; with `wait`, make sure it runs: ThreadStartFailed if it has not begun within `wait`
        seconds (a watchdog that would not watch)."""
        try:
            _thread.start_new_thread(self._run, ())
        except RuntimeError as exc:  # "can't start new thread": no memory for its stack (or no thread left)
            raise ThreadStartFailed(f"the {self.name} thread could not be created ({exc})") from None
        self.started = True
        if wait is not None and not self._running.wait(wait):
            raise ThreadStartFailed(f"the {self.name} thread did not start within {wait:g} s (out of memory?)")
        return self

    def _run(self) -> None:
        if not self._once.acquire(blocking=False):  # run_here took it: this thread came too late
            return
        try:
            self._ident = _thread.get_ident()
            self._running.set()
            self.target()
        finally:
            self._done.set()

    def run_here(self, wait: float, timeout: float | None = None) -> bool:
        """Make sure the function runs: if its thread has not begun within `wait` seconds (it never will, when its
        bootstrap failed), run it on the caller's thread; else wait `timeout` for it to return. Whether it has."""
        if self._running.wait(wait) or not self._once.acquire(blocking=False):
            return self._done.wait(timeout)
        try:
            self.target()
        finally:
            self._done.set()
        return True

    def join(self, timeout: float | None = None) -> bool:
        """Wait (at most `timeout` seconds) for the function to return; whether it has."""
        return not self.started or self._done.wait(timeout)

    def is_alive(self) -> bool:
        return self.started and not self._done.is_set()

    def is_current(self) -> bool:
        """Whether the caller runs on this thread."""
        return self._ident is not None and self._ident == _thread.get_ident()
