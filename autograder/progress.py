"""Progress of a long run (`grade`, `selftest`, `demo`, `bench`): a bar on a terminal; otherwise (a log file, CI, a
pipe) one plain line every `interval` seconds, so that a log shows the run is alive and how far it is.

The interval: the caller's (`--progress-interval`), else $AUTOGRADE_PROGRESS_INTERVAL, else 10 s; 0 prints no lines.
"""

import os
import sys
import threading
import time
from typing import Callable, TextIO

ENV = "AUTOGRADE_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 10.0


def default_interval() -> float:
    """$AUTOGRADE_PROGRESS_INTERVAL (seconds), else 10; a value that is not a number >= 0 is ignored."""
    try:
        value = float(os.environ.get(ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value >= 0 and value == value else DEFAULT_INTERVAL


def clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


class Progress:
    """`with Progress(total, "grading") as advance: ... advance("alice/rmsnorm")` once per finished item.

    Disabled (`enabled=False`, or nothing to do): nothing is printed."""

    def __init__(self, total: int, what: str = "grading", interval: float | None = None,
                 stream: TextIO | None = None, enabled: bool = True):
        self.total, self.what, self.enabled = total, what, enabled
        self.interval = default_interval() if interval is None else interval
        self.stream = stream
        self.done, self.last = 0, ""
        self.bar = self.thread = None
        self.stop = threading.Event()

    def _terminal(self) -> bool:
        stream = self.stream or sys.stdout
        try:
            return stream.isatty()
        except (AttributeError, ValueError):
            return False

    def line(self) -> str:
        share = f" ({100 * self.done // self.total}%)" if self.total else ""
        last = f", last: {self.last}" if self.last else ""
        return (f"{self.what}: {self.done}/{self.total} done{share}, "
                f"{clock(time.monotonic() - self.started)} elapsed{last}")

    def _lines(self) -> None:
        while not self.stop.wait(self.interval):
            stream = self.stream or sys.stdout
            try:
                print(self.line(), file=stream, flush=True)
            except (OSError, ValueError):  # the log went away: the run goes on
                return

    def __enter__(self) -> Callable[[str], None]:
        self.started = time.monotonic()
        if not self.enabled or self.total == 0:
            return lambda label="": None
        if self._terminal():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as Bar, TextColumn, TimeRemainingColumn

            self.bar = Bar(TextColumn(self.what), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                           TextColumn("{task.description}"))
            self.bar.start()
            task = self.bar.add_task("", total=self.total)

            def advance(label: str = "") -> None:
                self.done += 1
                self.bar.update(task, advance=1, description=label)

            return advance
        if self.interval > 0:
            self.thread = threading.Thread(target=self._lines, name="autograde-progress", daemon=True)
            self.thread.start()

        def advance(label: str = "") -> None:
            self.done, self.last = self.done + 1, label

        return advance

    def __exit__(self, *exc) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        if self.bar is not None:
            self.bar.stop()
