"""The budgets and caps of one submission's sandbox (a plain record: importing it loads no torch)."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Budgets and caps for one submission's sandbox."""

    cell_timeout: float = 30.0  # seconds of wall clock per notebook cell
    probe_timeout: float = 30.0  # seconds per probe (a call, a module forward/backward)
    submission_timeout: float = 300.0  # seconds of wall clock for the whole submission: cells, restarts, replays, probes
    startup_timeout: float = 60.0  # starting Python and importing torch
    grace: float = 3.0  # beyond a budget, before the process is killed from outside
    memory_bytes: int = 4 * 1024**3  # RLIMIT_AS, per process
    submission_memory_bytes: int = 4 * 1024**3  # all of a submission's processes together (cgroup or watchdog)
    memory_guard: str = "auto"  # how that is enforced: auto (a cgroup where possible), cgroup, watchdog (memory.py)
    cpu_seconds: int = 900  # RLIMIT_CPU, for the whole process
    file_bytes: int = 64 * 1024**2  # RLIMIT_FSIZE, per file
    scratch_bytes: int = 256 * 1024**2  # the private tmpfs (bubblewrap tier)
    processes: int = 64  # RLIMIT_NPROC: processes and threads of the sandbox uid
    open_files: int = 256  # RLIMIT_NOFILE
    max_reply_bytes: int = 256 * 1024**2
    max_elements: int = 32 * 1024**2  # per tensor

    def to_dict(self) -> dict:
        return dict(self.__dict__)
