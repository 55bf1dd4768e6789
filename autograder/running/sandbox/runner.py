"""The sandbox side: run one student's notebook code, then answer the grader's probes.

Started by the grader as `python -I -S runner.py CONFIG_JSON` inside the tier's view (nothing of
the course in it), as a warm parent (the zygote, see `zygote`): it imports torch once and forks a
confined child per submission, which gets two pipes (requests in, replies out). It imports only
the standard library, torch, what the notebooks import, and wire.py (which sits next to it).
Everything it sends is plain data in wire.py's format; pass/fail is never decided here, so whatever
the student's code does to this process (monkeypatching, exiting, forging output) can at most make
its own answers wrong.

Requests (op):
    exec_cell  {"source", "cell", "timeout"}          run one code cell in the notebook's namespace
    call       {"name", "timeout"} + values {"args", "kwargs"}
    module     {"class", "dtype", "method" (e.g. "forward", or a sub-module's "attn.forward"), "timeout", "backward",
                "return_state"}
               + values {"init_args", "init_kwargs", "state_dict", "args", "kwargs", "grad_outputs",
                         "requires_grad"}: build, load weights, run forward and backward
    variable   {"name"}
    exit       {}
"""

import builtins
import ctypes
import io
import json
import os
import signal
import sys
import time
import traceback

OUTPUT_CAP = 16 * 1024


class Timeout(BaseException):
    """The time budget of one cell or probe ran out (a BaseException: `except Exception` can't swallow it)."""


class NotDefined(Exception):
    pass


class ShapeMismatch(Exception):
    """An output the grader wants a gradient for does not have the shape the gradient has."""


class CappedWriter(io.TextIOBase):
    """Stands in for stdout/stderr: keeps the first OUTPUT_CAP characters, counts the rest."""

    def __init__(self):
        self.parts, self.kept, self.dropped = [], 0, 0

    def write(self, text):
        text = str(text)
        room = OUTPUT_CAP - self.kept
        if room > 0:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.dropped += max(0, len(text) - max(room, 0))
        return len(text)

    def text(self):
        tail = f"\n[... {self.dropped} more characters not shown]" if self.dropped else ""
        return "".join(self.parts) + tail


def _on_alarm(signum, frame):
    raise Timeout()


def _with_timeout(seconds, fn, *args, **kwargs):
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, max(float(seconds), 0.001))
    try:
        return fn(*args, **kwargs)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _describe(exc):
    """Type, message and the student's part of the traceback, defensively (their __str__ may misbehave)."""
    try:
        message = str(exc)[:2000]
    except BaseException:
        message = "<unprintable exception>"
    try:
        frames = traceback.extract_tb(exc.__traceback__)
        student = [f for f in frames if f.filename.startswith("<cell")]
        lines = traceback.format_list(student[-6:])
        trace = "".join(lines)[:4000]
    except BaseException:
        trace = ""
    return {"type": type(exc).__name__, "message": message, "traceback": trace}


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


def apply_seccomp_no_unix_sockets():
    """Refuse socket(AF_UNIX, ...) with EACCES from now on, in this process and every child."""
    apply_seccomp(no_unix_sockets=True)


# --- the notebook and the probes ------------------------------------------------------------------


class Runner:
    def __init__(self, torch, wire, limits):
        self.torch, self.wire, self.limits = torch, wire, limits
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}

    def lookup(self, name):
        if name not in self.namespace:
            raise NotDefined(name)
        return self.namespace[name]

    def exec_cell(self, header, values):
        source = header["source"]
        code = compile(source, f"<cell {header.get('cell', '?')}>", "exec")
        _with_timeout(header["timeout"], exec, code, self.namespace)
        return None

    def call(self, header, values):
        """Call a function; with "repeat": n, call it n times on the same arguments and return every result."""
        fn = self.lookup(header["name"])
        args = [self.materialise(a) for a in values.get("args", [])]
        kwargs = {k: self.materialise(v) for k, v in values.get("kwargs", {}).items()}
        self.torch.manual_seed(0)
        repeat = int(header.get("repeat", 1))
        if repeat == 1:
            return _with_timeout(header["timeout"], fn, *args, **kwargs)
        return tuple(_with_timeout(header["timeout"] / repeat, fn, *args, **kwargs) for _ in range(repeat))

    def variable(self, header, values):
        return self.lookup(header["name"])

    def materialise(self, value):
        """Arguments that stand for objects built here: the student's module with given weights, or a probe net."""
        if isinstance(value, dict) and "$module" in value:
            spec = value["$module"]
            module, load = self.build_module(spec["class"], spec.get("init_args", []), spec.get("init_kwargs", {}),
                                             spec.get("dtype"), spec.get("state_dict"))
            if load["error"] or load["missing"] or load["unexpected"]:
                raise ValueError(load["error"] or f"{spec['class']}: the weights do not fit its parameters "
                                 f"(its own but not given: {load['missing']}; given but not its own: {load['unexpected']})")
            return module
        if isinstance(value, dict) and "$probe_net" in value:
            return self.probe_net(**value["$probe_net"])
        return value

    def build_module(self, class_name, init_args, init_kwargs, dtype, state_dict):
        cls = self.lookup(class_name)
        module = cls(*init_args, **init_kwargs)
        if not isinstance(module, self.torch.nn.Module):
            raise TypeError(f"{class_name}(...) is not an nn.Module")
        if dtype:
            module = module.to(getattr(self.torch, dtype))
        load = {"missing": [], "unexpected": [], "error": None}
        if state_dict is not None:
            try:
                result = module.load_state_dict(state_dict, strict=False)
                load["missing"], load["unexpected"] = list(result.missing_keys), list(result.unexpected_keys)
            except Exception as exc:  # e.g. a shape mismatch
                load["error"] = _describe(exc)["message"][:1000]
        return module, load

    def module(self, header, values):
        torch = self.torch
        timeout = header["timeout"]
        start = time.monotonic()

        def remaining():
            return max(timeout - (time.monotonic() - start), 0.001)

        torch.manual_seed(0)
        module, load = _with_timeout(remaining(), self.build_module, header["class"], values.get("init_args", []),
                                     values.get("init_kwargs", {}), header.get("dtype"), values.get("state_dict"))
        result = {"load": load, "param_shapes": {k: list(v.shape) for k, v in module.state_dict().items()}}
        if header.get("return_state"):
            result["state"] = {k: v.detach().clone() for k, v in module.state_dict().items()}
        if load["error"] or not header.get("method"):
            return result
        args = [self.materialise(a) for a in values.get("args", [])]
        kwargs = {k: self.materialise(v) for k, v in values.get("kwargs", {}).items()}
        for index in values.get("requires_grad", []):
            args[index] = args[index].detach().clone().requires_grad_(True)
        module.zero_grad(set_to_none=True)
        outputs = _with_timeout(remaining(), _method(module, header["method"]), *args, **kwargs)
        result["outputs"] = outputs
        grad_outputs = values.get("grad_outputs")
        if grad_outputs is not None:
            produced = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
            pairs = [(o, g) for o, g in zip(produced, grad_outputs) if g is not None]
            for out, grad in pairs:
                if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(grad.shape):
                    raise ShapeMismatch(f"{list(getattr(out, 'shape', []))} vs {list(grad.shape)}")
                if not out.requires_grad:
                    raise TypeError("the output does not carry a gradient (was it detached or computed with no_grad?)")
            _with_timeout(remaining(), torch.autograd.backward, [o for o, _ in pairs], [g for _, g in pairs])
            result["input_grads"] = [args[i].grad for i in values.get("requires_grad", [])]
            result["param_grads"] = {name: p.grad for name, p in module.named_parameters()}
        return result

    def probe_net(self, d_model, num_layers, dtype, state_dict):
        """A small tanh MLP with a `layers` ModuleList: an input for model-generic functions (not reference code)."""
        torch = self.torch

        class ProbeNet(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = torch.nn.ModuleList([torch.nn.Linear(d_model, d_model) for _ in range(num_layers)])

            def forward(self, x):
                for layer in self.layers:
                    x = torch.tanh(layer(x))
                return x

        net = ProbeNet().to(getattr(torch, dtype))
        net.load_state_dict(state_dict)
        return net


def _method(module, path):
    """The method `path` names on the module: "forward", or a sub-module's, "attn.forward" (by attribute names)."""
    *owners, name = str(path).split(".")
    target = module
    for owner in owners:
        target = getattr(target, owner)
    return getattr(target, name)


def _restore(namespace, snapshot):
    for key in [k for k in namespace if k not in snapshot]:
        del namespace[key]
    namespace.update(snapshot)


def serve(torch, wire, fd_in, fd_out, config, landlock_abi):
    """Answer the grader's requests on fd_in/fd_out until it says exit or closes the pipe."""
    builtins_snapshot = dict(vars(builtins))  # restored after every request: patches to builtins don't last
    runner = Runner(torch, wire, config)
    wire.write_frame(fd_out, {"op": "ready", "torch": torch.__version__, "python": sys.version.split()[0],
                              "uid": os.getuid(), "pid": os.getpid(), "landlock_abi": landlock_abi})
    handlers = {"exec_cell": runner.exec_cell, "call": runner.call, "module": runner.module,
                "variable": runner.variable}
    while True:
        try:
            header, values = wire.read_frame_blocking(fd_in, config["max_request_bytes"], config["max_elements"])
        except EOFError:
            return
        op = header.get("op")
        if op == "exit":
            return
        output = CappedWriter()
        sys.stdout = sys.stderr = output
        started = time.monotonic()
        reply, reply_values = {"op": op, "id": header.get("id")}, None
        try:
            result = handlers[op](header, values or {})
            reply["ok"] = True
            reply_values = {"result": result}
        except (NotDefined, ShapeMismatch) as exc:
            reply.update(ok=False, error={"type": type(exc).__name__, "message": str(exc), "traceback": ""})
        except Timeout:
            reply.update(ok=False, error={"type": "Timeout", "message": "", "traceback": ""})
        except BaseException as exc:  # the student's SystemExit, KeyboardInterrupt, anything
            reply.update(ok=False, error=_describe(exc))
        finally:
            _restore(vars(builtins), builtins_snapshot)
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        reply["seconds"] = time.monotonic() - started
        reply["output"] = output.text()
        try:
            wire.write_frame(fd_out, reply, reply_values)
        except BaseException as exc:  # a result that cannot be sent (e.g. too deep): say so instead
            reply.update(ok=False, error={"type": "Unsendable", "message": _describe(exc)["message"], "traceback": ""})
            wire.write_frame(fd_out, reply, None)


# --- the warm parent (zygote) and the confinement of each child -----------------------------------
#
# The zygote imports torch (and what the notebooks import) once, runs nothing parallel, and then
# only forks: one child per submission. It never runs student code and holds nothing of any
# student: each child closes every descriptor but its own two pipes, enters fresh namespaces,
# drops to its pool uid without capabilities, sets its limits and only then reads the first cell.

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWPID, _CLONE_NEWNET = 0x20000000, 0x40000000
NAMESPACE_FLAGS = {"mount": _CLONE_NEWNS, "uts": _CLONE_NEWUTS, "ipc": _CLONE_NEWIPC, "pid": _CLONE_NEWPID,
                   "net": _CLONE_NEWNET}
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 0x4000, 0x40000
_PR_SET_PDEATHSIG, _PR_CAPBSET_DROP, _PR_SET_CHILD_SUBREAPER, _PR_SET_NO_NEW_PRIVS = 1, 24, 36, 38
_RLIMITS = {"memory_bytes": "RLIMIT_AS", "cpu_seconds": "RLIMIT_CPU", "file_bytes": "RLIMIT_FSIZE",
            "open_files": "RLIMIT_NOFILE", "core_bytes": "RLIMIT_CORE", "processes": "RLIMIT_NPROC"}
FD_IN, FD_OUT = 3, 4


def _libc_call(result, what):
    if result != 0:
        raise OSError(ctypes.get_errno(), f"{what}: {os.strerror(ctypes.get_errno())}")


def _keep_only(fd_in, fd_out):
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


def _private_tmp(libc, size, uid, workdir):
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


def _drop_to(libc, uid):
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
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # cleared by the uid change: set it after


_KEYCTL = {"x86_64": 250, "aarch64": 219}
_KEYCTL_CLEAR, _KEYCTL_LINK, _KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING = 7, 8, -4, -5


def _clear_key_rings(libc):
    """Empty the uid's user and user-session key rings (kept by the kernel per uid, across sandboxes): what a
    sandbox of an older grader, or anything else on the machine run as this uid, left there is gone before
    the student's code runs (this sandbox's seccomp filter then refuses every key-ring call)."""
    nr = _KEYCTL.get(os.uname().machine)
    if nr is None:
        return
    libc.syscall.restype = ctypes.c_long
    for ring in (_KEY_SPEC_USER_KEYRING, _KEY_SPEC_USER_SESSION_KEYRING):
        libc.syscall(ctypes.c_long(nr), ctypes.c_long(_KEYCTL_CLEAR), ctypes.c_long(ring))
    # as the kernel makes them: the user-session ring links the user ring (the uid's other processes possess it)
    libc.syscall(ctypes.c_long(nr), ctypes.c_long(_KEYCTL_LINK), ctypes.c_long(_KEY_SPEC_USER_KEYRING),
                 ctypes.c_long(_KEY_SPEC_USER_SESSION_KEYRING))


def _set_limits(limits):
    import resource

    for key, name in _RLIMITS.items():
        if key in limits:
            value = int(limits[key])
            resource.setrlimit(getattr(resource, name), (value, value))


def _child(torch, wire, spec, fd_in, fd_out, report_fd, cgroup_fds=()):
    """In the fork of the zygote: confine, then serve. Never returns."""
    libc = ctypes.CDLL(None, use_errno=True)
    status, out = 70, fd_out
    try:
        # first of all, into the submission's cgroups (memory, pids): everything it starts is counted there
        for fd in cgroup_fds:
            os.write(fd, b"0")
            os.close(fd)
        os.setsid()
        flags = 0
        for name in spec.get("namespaces", []):
            flags |= NAMESPACE_FLAGS[name]
        if flags:
            _libc_call(libc.unshare(flags), "unshare")
        if flags & _CLONE_NEWPID:
            # the next process is PID 1 of the new namespace: when it dies, everything in it dies
            inner = os.fork()
            if inner:
                os.write(report_fd, f"{inner}\n".encode())
                os.close(report_fd)
                os.close(fd_in)
                os.close(fd_out)
                libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
                _, code = os.waitpid(inner, 0)
                os._exit(os.waitstatus_to_exitcode(code) & 0xFF if os.WIFEXITED(code) else 128 + os.WTERMSIG(code))
        else:
            os.write(report_fd, f"{os.getpid()}\n".encode())
        os.close(report_fd)
        _keep_only(fd_in, fd_out)
        out = FD_OUT
        uid = spec.get("uid")
        if spec.get("private_tmp"):
            _private_tmp(libc, spec["private_tmp"], uid, spec["workdir"])
        _set_limits(spec.get("limits", {}))
        _drop_to(libc, uid)
        if uid is not None:
            _clear_key_rings(libc)
        abi = None
        if spec.get("landlock"):
            abi = apply_landlock(spec["landlock"]["read"], spec["landlock"]["write"])
        if spec.get("no_unix_sockets") or spec.get("refuse_syscalls"):
            apply_seccomp(bool(spec.get("no_unix_sockets")), spec.get("refuse_syscalls", ()))
        os.chdir(spec["workdir"])
        os.environ.clear()
        os.environ.update(spec.get("env", {}))
        serve(torch, wire, FD_IN, FD_OUT, spec, abi)
        status = 0
    except BaseException as exc:  # confinement failed: say why on the reply pipe, if it is there
        try:
            wire.write_frame(out, {"op": "failed", "error": _describe(exc)})
        except BaseException:
            pass
    finally:
        os._exit(status)


def warm_up(site):
    """Import torch and what the notebooks import, once; run nothing parallel (children are forked from here)."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [here, site]
    os.environ["MPLBACKEND"] = "Agg"
    import torch  # noqa: E402  (after sys.path is set)

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    # the first backward with given output gradients imports much of torch (sympy among it, ~0.6 s):
    # pay that here, once, as the module probes do it (both dtypes), and not in every child's budget
    for dtype in (torch.float32, torch.float64):
        _layer = torch.nn.Linear(4, 4).to(dtype)
        _x = torch.ones(2, 4, dtype=dtype, requires_grad=True)
        _y = torch.nn.functional.softmax(_layer(_x), dim=-1)
        torch.autograd.backward([_y], [torch.ones_like(_y)])
    del _layer, _x, _y
    import wire  # noqa: E402

    for name in ("numpy", "matplotlib.pyplot", "hashlib", "math", "random"):
        try:
            __import__(name)
        except Exception:  # a notebook that needs it will say so itself
            pass
    return torch, wire


def _spawn(control, torch, wire, request, fds, children):
    """Fork one confined child (it never returns here: `_child` ends it) and wait for its inner pid."""
    fd_in, fd_out, *cgroup_fds = fds
    report_read, report_write = os.pipe()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})  # until the child is in `children`
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        control.close()
        os.close(report_read)
        _child(torch, wire, request["spec"], fd_in, fd_out, report_write, cgroup_fds)
    for fd in (fd_in, fd_out, *cgroup_fds):
        os.close(fd)
    os.close(report_write)
    with os.fdopen(report_read, "rb") as report:
        line = report.readline().strip()
    inner = int(line) if line.isdigit() else None
    children[pid] = inner
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
    return {"op": "spawned", "pid": pid, "inner": inner}


def _kill(pid, children):
    """SIGKILL a child's process group, its inner process and itself."""
    inner = children.get(pid)
    for target, group in ((pid, True), (inner, False), (pid, False)):
        if target:
            try:
                (os.killpg if group else os.kill)(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return {"op": "killed", "pid": pid}


def zygote(config):
    """Fork one confined child per `spawn` request on the control socket; kill and reap them on request."""
    import socket

    torch, wire = warm_up(config["site"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the grader died: so do we
    control = socket.socket(fileno=config["control_fd"])
    threads = len(os.listdir(f"/proc/{os.getpid()}/task")) if os.path.isdir("/proc/self/task") else None
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    children, exited = {}, {}  # monitor pid -> inner pid; monitor pid -> exit code

    def reap(*_):
        """Collect every child that ended: our children, and the orphans we adopt as subreaper (a killed fork
        bomb's, a `setsid` daemon's), at once: a zombie would still count against its uid's process limit."""
        while True:
            try:
                pid, code = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in children:
                children.pop(pid)
                exited[pid] = os.waitstatus_to_exitcode(code)
                while len(exited) > 256:
                    exited.pop(next(iter(exited)))

    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGCHLD, reap)

    def send(message):
        control.sendall(json.dumps(message).encode())

    send({"op": "ready", "pid": os.getpid(), "threads": threads, "torch": torch.__version__})
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, 1 << 20, 4)
        except OSError:
            return
        if not data:
            return  # the grader closed its end
        request = json.loads(data)
        op = request.get("op")
        reap()
        if op == "spawn":
            send(_spawn(control, torch, wire, request, fds, children))
        elif op == "kill":
            send(_kill(int(request["pid"]), children))
        elif op == "status":
            pid, deadline = int(request["pid"]), time.monotonic() + float(request.get("timeout", 0))
            while pid in children and time.monotonic() < deadline:
                time.sleep(0.01)
                reap()
            send({"op": "status", "pid": pid, "code": exited.get(pid), "running": pid in children})
        elif op == "usage":
            import resource

            send({"op": "usage", "zygote_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "sandbox_maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss})
        else:
            for fd in fds:
                os.close(fd)
            send({"op": "error", "message": f"unknown op {op!r}"})


def main():
    config = json.loads(sys.argv[1])
    zygote(config)


if __name__ == "__main__":
    main()
