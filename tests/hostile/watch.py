"""What the hostile tests watch from outside the sandbox: files, processes, the loopback listeners."""

import fcntl
import hashlib
import os
import secrets
import select
import socket
import threading
import time

from autograder import REPO_ROOT
from autograder.running.sandbox import uids


def tree_fingerprint(*roots) -> dict[str, str]:
    """The hash of every file under the roots (caches and the virtualenv left out); links by their target."""
    hashes = {}
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d not in {".venv", "__pycache__", ".pytest_cache", ".git"}]
            for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    hashes[path] = "link:" + os.readlink(path)
                    continue
                with open(path, "rb") as f:
                    hashes[path] = hashlib.file_digest(f, "sha256").hexdigest()
    return hashes


def changed_files(before: dict, after: dict) -> list[str]:
    """Files added, removed or changed between two fingerprints. The repository's tests/ folder counts only for
    added or removed files: its contents are what developers edit while a suite runs."""
    tests = str(REPO_ROOT / "tests") + os.sep
    return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p)
                  and not (p.startswith(tests) and p in before and p in after))


def live_children(pid: int) -> set[int]:
    """Processes whose parent is `pid` and that are not zombies."""
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] not in ("Z", "X"):
            found.add(int(entry.name))
    return found


def leftover_pool_processes() -> dict[int, list[int]]:
    """Processes of sandbox uids that no live sandbox holds (uids held right now by another grader are left out)."""
    if os.geteuid() != 0:
        return {}
    leftovers = {}
    for uid in range(uids.FIRST_UID, uids.FIRST_UID + uids.POOL_SIZE):
        lock = uids.LOCK_DIR / f"{uid}.lock"
        if not lock.exists():
            continue
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            if uids.processes_of(uid):
                leftovers[uid] = uids.processes_of(uid)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    return leftovers


class Listeners:
    """A TCP and a UDP listener on 127.0.0.1, Unix stream and datagram sockets and FIFOs under /tmp and /run
    (world-writable, so that nothing but the sandbox stops a pool uid), that record whatever reaches them."""

    def __enter__(self):
        self.received = []
        self._paths = []
        self._unix, self._fifos = [], []
        token = secrets.token_hex(4)
        for folder in ("/tmp", "/run"):
            if not os.access(folder, os.W_OK):
                continue
            for kind, name in ((socket.SOCK_STREAM, "stream"), (socket.SOCK_DGRAM, "dgram")):
                path = os.path.join(folder, f"autograde-test-{token}-{name}.sock")
                sock = socket.socket(socket.AF_UNIX, kind)
                sock.bind(path)
                os.chmod(path, 0o777)
                if kind == socket.SOCK_STREAM:
                    sock.listen(8)
                sock.settimeout(0.2)
                self._unix.append((kind, sock))
                self._paths.append(path)
            fifo = os.path.join(folder, f"autograde-test-{token}.fifo")
            os.mkfifo(fifo, 0o666)
            os.chmod(fifo, 0o666)
            self._fifos.append((fifo, os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)))
            self._paths.append(fifo)
        self.unix_paths = tuple(p for p in self._paths if p.endswith(".sock"))
        self.fifo_paths = tuple(f for f, _ in self._fifos)
        self.tcp = socket.socket()
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(8)
        self.tcp.settimeout(0.2)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.tcp_port, self.udp_port = self.tcp.getsockname()[1], self.udp.getsockname()[1]
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True),
                         threading.Thread(target=self._receive, daemon=True),
                         threading.Thread(target=self._local, daemon=True)]
        for t in self._threads:
            t.start()
        return self

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, peer = self.tcp.accept()
            except (TimeoutError, OSError):
                continue
            conn.settimeout(1)
            try:
                data = conn.recv(1024)
            except OSError:
                data = b""
            self.received.append(("tcp", peer, data))
            conn.close()

    def _local(self):
        """Whatever reaches the Unix sockets and the FIFOs."""
        while not self._stop.is_set():
            ready, _, _ = select.select([sock for _, sock in self._unix] + [fd for _, fd in self._fifos], [], [], 0.2)
            for item in ready:
                if isinstance(item, int):
                    try:
                        data = os.read(item, 1024)
                    except OSError:
                        data = b""
                    if data:
                        self.received.append(("fifo", None, data))
                    continue
                kind = next(k for k, sock in self._unix if sock is item)
                try:
                    if kind == socket.SOCK_STREAM:
                        conn, _ = item.accept()
                        conn.settimeout(1)
                        data = conn.recv(1024)
                        conn.close()
                    else:
                        data = item.recv(1024)
                except OSError:
                    data = b""
                self.received.append(("unix", None, data))
            time.sleep(0.01)

    def _receive(self):
        while not self._stop.is_set():
            try:
                data, peer = self.udp.recvfrom(1024)
            except (TimeoutError, OSError):
                continue
            self.received.append(("udp", peer, data))

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join()
        self.tcp.close()
        self.udp.close()
        for _, sock in self._unix:
            sock.close()
        for _, fd in self._fifos:
            os.close(fd)
        for path in self._paths:
            try:
                os.unlink(path)
            except OSError:
                pass


def machine_tiers() -> list[str]:
    """The tiers this machine runs (probed as the sandbox would run: as an unprivileged uid when root)."""
    from autograder.running.sandbox import tiers

    try:
        return tiers.available(65534 if os.geteuid() == 0 else None)
    except TypeError:  # a sandbox that probes on its own
        return tiers.available()
