"""The confinement of each submission's process, in the fork runner.py (the fork server) makes for it.

In order (runner.py's `_child`): into the submission's cgroups; a new session and fresh namespaces
(`enter_namespaces`); every descriptor closed but the two pipes (`keep_only`); then `confine`: a private /tmp,
/dev/shm and /proc, the resource limits, every capability dropped and the pool uid (`drop_to`), the uid's key rings
emptied, Landlock and seccomp, a clean environment. Only then does the probe server read the first cell.
Standard library only (ctypes for the system calls Python has no wrapper for).
"""

import ctypes
import os
import signal

# --- Landlock (the fallback tier's file-system, network and signal fence) -------------------------

_LANDLOCK_SYSCALLS = (444, 445, 446)  # create_ruleset, add_rule, restrict_self (same on all arches)
_FS_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read_file, read_dir
_FS_ALL_V1 = (1 << 13) - 1


def apply_landlock(read_paths, write_paths):
    """Allow reading `read_paths` and writing `write_paths` only; no TCP; no signals out (ABI >= 6)."""
    libc = ctypes.CDLL(None, use_errno=True)
    create, add_rule, restrict = _LANDLOCK_SYSCALLS
    abi = libc.syscall(create, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        raise OSError(ctypes.get_errno(), "Landlock is not available")
    handled_fs = _FS_ALL_V1
    if abi >= 2:
        handled_fs |= 1 << 13  # refer
    if abi >= 3:
        handled_fs |= 1 << 14  # truncate
    handled_net = 0b11 if abi >= 4 else 0  # bind and connect TCP: nothing allowed
    scoped = 0b11 if abi >= 6 else 0  # abstract unix sockets and signals stay inside the domain

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    attr = RulesetAttr(handled_fs, handled_net, scoped)
    size = ctypes.sizeof(RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(create, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    for paths, access in ((read_paths, _FS_READ), (write_paths, handled_fs)):
        for path in paths:
            if not os.path.exists(path):
                continue
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            allowed = access if os.path.isdir(path) else access & ((1 << 0) | (1 << 1) | (1 << 2) | (1 << 14))
            rule = PathBeneath(allowed, fd)
            if libc.syscall(add_rule, ruleset, 1, ctypes.byref(rule), 0) != 0:
                raise OSError(ctypes.get_errno(), f"landlock_add_rule failed for {path}")
            os.close(fd)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    if libc.syscall(restrict, ruleset, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    os.close(ruleset)
    return abi


# --- seccomp: no Unix-domain sockets (the landlock tier), no per-uid kernel state (every tier) -----
#
# Landlock (up to the ABI this kernel has) does not mediate connect() on a pathname Unix socket, and a
# network namespace does not cover pathname sockets: a filter refuses socket(AF_UNIX, ...) instead.
# socketpair() stays allowed (it reaches nothing outside). Foreign-ABI system calls (i386 on x86_64, x32)
# are refused as a whole: nothing in the sandbox uses them, and they would bypass the numbers checked here.
#
# Kernel key rings belong to the uid and are in no namespace that bubblewrap run as root unshares: a key
# added by one submission would be readable by the next one on the same pool uid (and by anyone, with "other"
# permissions), and it outlives the sandbox. So add_key, request_key and keyctl are refused in every tier:
# nothing is ever stored. In a tier without an IPC namespace of its own, SysV IPC and POSIX message queues
# are refused the same way ("sysv_ipc").

_SECCOMP_ARCH = {"x86_64": (0xC000003E, 41), "aarch64": (0xC00000B7, 198)}  # AUDIT_ARCH_*, __NR_socket
_REFUSED_SYSCALLS = {
    "x86_64": {"keys": (248, 249, 250),  # add_key, request_key, keyctl
               "sysv_ipc": (29, 30, 31, 67, 64, 65, 66, 220, 68, 69, 70, 71,  # shm*, sem*, msg*
                            240, 241, 242, 243, 244, 245)},  # mq_open ... mq_getsetattr
    "aarch64": {"keys": (217, 218, 219),
                "sysv_ipc": tuple(range(180, 198))},  # mq_open ... shmdt
}
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_RET_ALLOW, _RET_EACCES, _RET_EPERM = 0x7FFF0000, 0x00050000 | 13, 0x00050000 | 1
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06


def seccomp_program(machine, no_unix_sockets, refuse=()):
    """The filter: foreign ABIs refused; the system calls of the groups in `refuse` fail with EPERM;
    with `no_unix_sockets`, socket(AF_UNIX, ...) fails with EACCES; anything else is allowed."""
    if machine not in _SECCOMP_ARCH:
        raise OSError(0, f"no seccomp filter for {machine}")
    arch, socket_nr = _SECCOMP_ARCH[machine]
    refused = sorted({nr for group in refuse for nr in _REFUSED_SYSCALLS[machine][group]})
    # (code, jump if true, jump if false, k): a jump is a label ("allow", "eacces", "eperm") or 0 (the next one)
    program = [
        (_LD_ABS_W, 0, 0, 4),  # A = seccomp_data.arch
        (_JEQ_K, "abi", "eperm", arch),  # any foreign-ABI system call: refused
        ("abi",),
        (_LD_ABS_W, 0, 0, 0),  # A = seccomp_data.nr
        (_JGE_K, "eperm", 0, 0x40000000),  # x32 numbers: refused
    ]
    program += [(_JEQ_K, "eperm", 0, nr) for nr in refused]
    if no_unix_sockets:
        program += [
            (_JEQ_K, 0, "allow", socket_nr),  # socket(): look at the address family
            (_LD_ABS_W, 0, 0, 16),  # A = low 32 bits of args[0]
            (_JEQ_K, "eacces", "allow", 1),  # AF_UNIX: refused
        ]
    program += [("allow",), (_RET_K, 0, 0, _RET_ALLOW), ("eacces",), (_RET_K, 0, 0, _RET_EACCES),
                ("eperm",), (_RET_K, 0, 0, _RET_EPERM)]
    labels, code = {}, []
    for op in program:
        if len(op) == 1:
            labels[op[0]] = len(code)
        else:
            code.append(op)
    resolved = []
    for i, (op, jt, jf, k) in enumerate(code):
        jt, jf = (labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf))
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise OSError(0, "seccomp filter too long")
        resolved.append((op, jt, jf, k))
    return resolved


def apply_seccomp(no_unix_sockets=False, refuse=()):
    """Install `seccomp_program` in this process and every child (no_new_privs is set first)."""
    program = seccomp_program(os.uname().machine, no_unix_sockets, refuse)

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    filters = (SockFilter * len(program))(*[SockFilter(*op) for op in program])
    prog = SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    _libc_call(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
    _libc_call(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "installing seccomp")


# --- namespaces, descriptors, mounts, capabilities and the uid, key rings, resource limits ---------

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACE_FLAGS = {"mount": _CLONE_NEWNS, "uts": _CLONE_NEWUTS, "ipc": _CLONE_NEWIPC, "pid": _CLONE_NEWPID,
                   "net": _CLONE_NEWNET}
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38
_RLIMITS = {"memory_bytes": "RLIMIT_AS", "cpu_seconds": "RLIMIT_CPU", "file_bytes": "RLIMIT_FSIZE",
            "open_files": "RLIMIT_NOFILE", "core_bytes": "RLIMIT_CORE", "processes": "RLIMIT_NPROC"}
FD_IN, FD_OUT = 3, 4


def _libc_call(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def keep_only(fd_in, fd_out):
    """fd_in and fd_out become 3 and 4; every other descriptor above 2 is closed; 0-2 go to /dev/null."""
    import fcntl

    high_in, high_out = fcntl.fcntl(fd_in, fcntl.F_DUPFD, 100), fcntl.fcntl(fd_out, fcntl.F_DUPFD, 100)
    os.dup2(high_in, FD_IN)
    os.dup2(high_out, FD_OUT)
    os.closerange(FD_OUT + 1, 65536)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def private_tmp(libc, size, uid, workdir):
    """A fresh mount view: private propagation, our own /tmp (size-capped) and /dev/shm, a /proc of our PID namespace."""
    _libc_call(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    options = f"size={int(size)},nr_inodes=65536,mode=0755".encode()
    _libc_call(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", _MS_NOSUID | _MS_NODEV, options), "mounting /tmp")
    if os.path.isdir("/dev/shm"):
        _libc_call(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC,
                              b"size=1048576,mode=0755"), "mounting /dev/shm")
    _libc_call(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, None), "mounting /proc")
    os.makedirs(workdir, mode=0o700, exist_ok=True)
    if uid is not None:
        os.chown(workdir, uid, uid)


def drop_to(libc, uid):
    """No capability left, not even in the bounding set; the pool uid and gid; no way back (no_new_privs).

    Without a pool uid (a grader that is not root: the warm parent holds capabilities only inside its
    own user namespace), the capabilities are dropped all the same."""
    for cap in range(64):
        if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: past the last
            break
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another uid: the permitted and effective sets are emptied
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice 32 bits, all zero
    _libc_call(libc.capset(header, data), "dropping capabilities")
    _libc_call(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "setting no_new_privs")
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change: set it after


_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_GET_KEYRING_ID, _KEYCTL_DESCRIBE, _KEYCTL_CLEAR, _KEYCTL_LINK, _KEYCTL_READ, _KEYCTL_INVALIDATE = 0, 6, 7, 8, 11, 21
_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING = -4, -5
_MAX_KEYS = 4096  # more than a uid's key quota (200 by default: /proc/sys/kernel/keys/maxkeys)


def _keyctl(libc, nr, *args):
    return libc.syscall(ctypes.c_long(nr), *(ctypes.c_long(a) for a in args))


def _keys_in(libc, nr, keyring):
    """The ids a keyring links (KEYCTL_READ of a keyring: an array of 32-bit ids); [] when it cannot be read."""
    size = 4 * 256
    for _ in range(2):  # the second read with room for all of them (a ring past _MAX_KEYS: its first _MAX_KEYS)
        buf = ctypes.create_string_buffer(size)
        n = _keyctl(libc, nr, _KEYCTL_READ, keyring, ctypes.addressof(buf), size)
        if n < 0:
            return []
        if n <= size:
            break
        size = min(n, 4 * _MAX_KEYS)
    n = min(n, size)
    return [int.from_bytes(buf.raw[i:i + 4], "little", signed=True) for i in range(0, n - n % 4, 4)]


def _is_keyring(libc, nr, key):
    buf = ctypes.create_string_buffer(4096)
    n = _keyctl(libc, nr, _KEYCTL_DESCRIBE, key, ctypes.addressof(buf), 4096)
    return 0 < n <= 4096 and buf.raw[:n].split(b";", 1)[0] == b"keyring"


def clear_key_rings(libc):
    """Empty the uid's user and user-session key rings (kept by the kernel per uid, across sandboxes): what a
    sandbox of an older grader, or anything else on the machine run as this uid, left there is gone before
    the student's code runs (this sandbox's seccomp filter then refuses every key-ring call).

    Unlinking alone is not enough: a key unlinked from every ring lives on until the kernel's key collector runs,
    and meanwhile anyone whose permissions allow finds it by its id in /proc/keys and reads it. So every key the
    two rings reach (nested rings too) is invalidated first: unreadable at once, collected soon after."""
    nr = _KEYCTL.get(os.uname().machine)
    if nr is None:
        return
    libc.syscall.restype = ctypes.c_long
    user_ring = _keyctl(libc, nr, _KEYCTL_GET_KEYRING_ID, _KEY_SPEC_USER_KEYRING, 0)
    session_ring = _keyctl(libc, nr, _KEYCTL_GET_KEYRING_ID, _KEY_SPEC_USER_SESSION_KEYRING, 0)
    found, todo = [], [_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING]
    seen = {user_ring, session_ring}
    while todo and len(seen) < _MAX_KEYS:  # every key the two rings reach, nested rings read before any is touched
        for key in _keys_in(libc, nr, todo.pop()):
            if key not in seen:
                seen.add(key)
                found.append(key)
                if _is_keyring(libc, nr, key):
                    todo.append(key)
    for key in reversed(found):  # the innermost first
        _keyctl(libc, nr, _KEYCTL_INVALIDATE, key)
    for ring in (_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING):
        _keyctl(libc, nr, _KEYCTL_CLEAR, ring)
    # as the kernel makes them: the user-session ring links the user ring (the uid's other processes possess it)
    _keyctl(libc, nr, _KEYCTL_LINK, _KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING)


def set_limits(limits):
    import resource

    for key, name in _RLIMITS.items():
        if key in limits:
            value = int(limits[key])
            resource.setrlimit(getattr(resource, name), (value, value))


def enter_namespaces(libc, spec, in_pid_namespace=False):
    """A new session and the namespaces the tier asks for; True when a new PID namespace was entered (the next
    process forked is then its PID 1). `in_pid_namespace`: this process was forked as PID 1 of a new one already
    (runner.py's `_spawn`), so none is entered here."""
    os.setsid()
    flags = 0
    for name in spec.get("namespaces", []):
        flags |= NAMESPACE_FLAGS[name]
    if in_pid_namespace:
        flags &= ~_CLONE_NEWPID
    if flags:
        _libc_call(libc.unshare(flags), "unshare")
    return bool(flags & _CLONE_NEWPID)


def confine(libc, spec):
    """After `keep_only`: private mounts, limits, no capability and the pool uid, empty key rings, Landlock, seccomp,
    the submission's folder and environment. Returns Landlock's ABI where it was applied, else None."""
    uid = spec.get("uid")
    if spec.get("private_tmp"):
        private_tmp(libc, spec["private_tmp"], uid, spec["workdir"])
    set_limits(spec.get("limits", {}))
    drop_to(libc, uid)
    if uid is not None:
        clear_key_rings(libc)
    abi = None
    if spec.get("landlock"):
        abi = apply_landlock(spec["landlock"]["read"], spec["landlock"]["write"])
    if spec.get("no_unix_sockets") or spec.get("refuse_syscalls"):
        apply_seccomp(bool(spec.get("no_unix_sockets")), spec.get("refuse_syscalls", ()))
    os.chdir(spec["workdir"])
    os.environ.clear()
    os.environ.update(spec.get("env", {}))
    return abi
