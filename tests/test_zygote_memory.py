"""The warm sandbox parent's memory in huge pages (runner.HugePages): collapsed while it waits, only its private
anonymous ranges, and nothing a child is charged changes (a child's write to a shared huge page copies 4 KiB)."""

import ctypes
import errno
import os
import platform
import time
from pathlib import Path

import pytest

from autograder.running.sandbox import environment, memory, tiers
from autograder.running.sandbox.runner import HUGE_PAGE, MADV_COLLAPSE, HugePages
from autograder.running.sandbox.zygote import Zygote
from grading_helpers import runner_processes

THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _kernel_can_collapse() -> str | None:
    """Why MADV_COLLAPSE cannot work here, or None."""
    release = tuple(int(n) for n in platform.release().split("-")[0].split(".")[:2] if n.isdigit())
    if release < (6, 1):
        return f"kernel {platform.release()} has no MADV_COLLAPSE (6.1+)"
    if not THP.exists() or "[never]" in THP.read_text():
        return "transparent huge pages are off on this machine"
    return None


class FakeLibc:
    """A libc whose madvise records its calls and answers `answer` (-1 with `error` set as ctypes' errno)."""

    def __init__(self, answer=0, error=0):
        self.calls = []

        def madvise(address, length, advice):
            self.calls.append((address, length, advice))
            if answer != 0:
                ctypes.set_errno(error)
            return answer

        self.madvise = madvise


MAPS = """\
00400000-00600000 r-xp 00000000 fe:00 123 /usr/bin/python3.11
00a01000-01400000 rw-p 00000000 00:00 0 [heap]
7f0000100000-7f0000900000 rw-p 00000000 00:00 0
7f0000900000-7f0000d00000 rw-p 00001000 fe:00 456 /sandbox/site/torch/lib/libtorch_cpu.so
7f0001000000-7f0001600000 r--p 00000000 00:00 0
7f0002000000-7f00021ff000 rw-p 00000000 00:00 0
7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0 [stack]
"""


def test_only_the_private_anonymous_writable_ranges_are_collapsed_whole_2_mib_pages_lowest_first(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    libc = FakeLibc()
    pages = HugePages(libc, maps=str(maps))
    # the heap from its first 2 MiB boundary (0xa01000 -> 0xc00000) to its last whole page (0x1400000), and the
    # unnamed mapping; not the program, a file's private copy, a read-only range, the stack, nor a range without a
    # whole aligned 2 MiB page
    heap = list(range(0xC00000, 0x1400000, HUGE_PAGE))
    unnamed = list(range(0x7F0000200000, 0x7F0000900000 - HUGE_PAGE + 1, HUGE_PAGE))
    assert heap == [0xC00000, 0xE00000, 0x1000000, 0x1200000] and len(unnamed) == 3
    while pages.pending:
        pages.step()
    assert libc.calls == [(a, HUGE_PAGE, MADV_COLLAPSE) for a in heap + unnamed]
    assert pages.collapsed == 7


@pytest.mark.parametrize("error", [errno.EINVAL, errno.ENOMEM])
def test_a_kernel_that_refuses_the_first_page_is_not_asked_again(tmp_path, error):
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    libc = FakeLibc(answer=-1, error=error)
    pages = HugePages(libc, maps=str(maps))
    pages.step()
    assert pages.pending == [] and len(libc.calls) == 1 and pages.collapsed == 0


def test_a_page_that_cannot_be_collapsed_now_is_passed_over(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(MAPS)
    pages = HugePages(FakeLibc(), maps=str(maps))
    pages.step()
    pages.madvise = FakeLibc(answer=-1, error=errno.EAGAIN).madvise  # a page in use for a moment
    pages.step()
    assert len(pages.pending) == 5 and pages.collapsed == 1


def _smaps_kib(pid: int, field: str) -> int:
    return memory.smaps_rollup(pid)[field]  # a field the kernel does not give fails here, loudly


def test_the_warm_parents_memory_is_in_huge_pages_once_it_has_waited():
    why = _kernel_can_collapse()
    if why:
        pytest.skip(why)
    tier = tiers.choose(None, False)
    zygote = Zygote(environment.locate(), tier, 120.0).launch().wait_ready()
    try:
        pid = runner_processes(zygote.process.pid)[0]  # the warm parent: no sandbox forked yet
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            huge, anonymous = _smaps_kib(pid, "AnonHugePages"), _smaps_kib(pid, "Anonymous")
            if huge >= anonymous // 2:
                break
            time.sleep(0.2)
        # torch's ~200 MiB: most of it in huge pages (without HugePages: none)
        assert huge >= anonymous // 2 and huge >= 64 * 1024, (huge, anonymous, tier)
    finally:
        zygote.close()


def test_a_childs_write_to_a_shared_huge_page_copies_4_kib_not_2_mib():
    """What the sandboxes' memory budget relies on once the warm parent's memory is in huge pages: the kernel splits a
    huge page a child writes to and copies only the 4 KiB written (Linux 5.8+), so a sandbox is charged what it
    touches, as before."""
    why = _kernel_can_collapse()
    if why:
        pytest.skip(why)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    pages = 32
    size = (pages + 1) * HUGE_PAGE
    raw = libc.mmap(None, size, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    assert raw not in (None, ctypes.c_void_p(-1).value)
    base = -(-raw // HUGE_PAGE) * HUGE_PAGE
    ctypes.memset(base, 1, pages * HUGE_PAGE)
    if libc.madvise(base, pages * HUGE_PAGE, MADV_COLLAPSE) != 0:
        pytest.skip(f"MADV_COLLAPSE refused here (errno {ctypes.get_errno()})")
    assert _smaps_kib(os.getpid(), "AnonHugePages") >= pages * HUGE_PAGE // 1024

    def child_dirty(written: int) -> int:
        """Private_Dirty of a child that writes `written` bytes at the start of each huge page (the same code
        either way: the child's own Python work dirties some pages of its own)."""
        ready_r, ready_w = os.pipe()
        child = os.fork()
        if child == 0:
            for i in range(pages):
                ctypes.memset(base + i * HUGE_PAGE, 2, written)
            os.write(ready_w, b"x")
            time.sleep(60)
            os._exit(0)
        try:
            os.close(ready_w)
            assert os.read(ready_r, 1) == b"x"
            return _smaps_kib(child, "Private_Dirty")
        finally:
            os.kill(child, 9)
            os.waitpid(child, 0)
            os.close(ready_r)

    copied = child_dirty(1) - child_dirty(0)
    # 32 pages of 4 KiB = 128 KiB; copying each huge page whole would be 64 MiB
    assert copied < 4 * 1024, copied
    libc.munmap(ctypes.c_void_p(raw), ctypes.c_size_t(size))
