"""Ways one submission could leave data for the next one on the same uid, as code a student could write.

Each channel has a writer (stores `SECRET`, whatever it is, where the next sandbox might find it; never raises:
a refusal is the sandbox working) and a reader (sets `found` to what it finds there, or None). They are plain
standard-library Python, run as notebook cells in a sandbox, or by /usr/bin/python3 directly on the host as the
pool uid (the control that shows the channel is real when nothing isolates it).
"""

PRELUDE = r'''
import ctypes, os, socket, time
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_NAME = b"autograde-h21-channel"
_KEY = 0x41470021  # the SysV IPC key both sides use
_X86 = os.uname().machine == "x86_64"
_NR = {"add_key": 248 if _X86 else 217, "keyctl": 250 if _X86 else 219}
'''

WRITERS = {
    "key_ring": r'''
try:  # a key in the uid's user key ring (@u), readable by anyone (possessor/user/group/other: all), no timeout
    _data = SECRET.encode()
    _kid = _libc.syscall(_NR["add_key"], b"user", _NAME, _data, ctypes.c_size_t(len(_data)), ctypes.c_int(-4))
    if _kid > 0:
        _libc.syscall(_NR["keyctl"], 5, _kid, ctypes.c_uint32(0x3F3F3F3F))  # KEYCTL_SETPERM
except Exception:
    pass
''',
    "sysv_shm": r'''
try:  # a SysV shared memory segment, world-readable, left in place
    _data = SECRET.encode()
    _libc.shmat.restype = ctypes.c_void_p
    _id = _libc.shmget(_KEY, 4096, 0o1000 | 0o666)  # IPC_CREAT
    if _id >= 0:
        _at = _libc.shmat(_id, None, 0)
        if _at not in (None, ctypes.c_void_p(-1).value):
            ctypes.memmove(_at, _data + b"\0", len(_data) + 1)
            _libc.shmdt(ctypes.c_void_p(_at))
except Exception:
    pass
''',
    "sysv_msg": r'''
try:  # a SysV message queue with one message in it
    _data = SECRET.encode()
    _id = _libc.msgget(_KEY, 0o1000 | 0o666)
    if _id >= 0:
        _buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + len(_data))
        ctypes.c_long.from_buffer(_buf).value = 1
        ctypes.memmove(ctypes.addressof(_buf) + ctypes.sizeof(ctypes.c_long), _data, len(_data))
        _libc.msgsnd(_id, _buf, ctypes.c_size_t(len(_data)), 0o4000)  # IPC_NOWAIT
except Exception:
    pass
''',
    "posix_mq": r'''
try:  # a POSIX message queue with one message in it
    _data = SECRET.encode()
    _q = _libc.mq_open(b"/" + _NAME, os.O_CREAT | os.O_RDWR, 0o666, None)
    if _q >= 0:
        _libc.mq_send(_q, _data, ctypes.c_size_t(len(_data)), 0)
        _libc.mq_close(_q)
except Exception:
    pass
''',
    "shared_files": r'''
for _folder in ("/tmp", "/var/tmp", "/dev/shm"):  # files where any user may write, world-readable
    try:
        with open(os.path.join(_folder, _NAME.decode()), "w") as _f:
            _f.write(SECRET)
        os.chmod(os.path.join(_folder, _NAME.decode()), 0o644)
    except Exception:
        pass
''',
    "abstract_socket": r'''
try:  # a daemon (setsid, double fork) serving the secret on an abstract Unix socket
    _srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _srv.bind(b"\0" + _NAME)
    _srv.listen(8)
    _pid = os.fork()
    if _pid == 0:
        os.setsid()
        if os.fork() == 0:
            _null = os.open(os.devnull, os.O_RDWR)
            for _fd in (0, 1, 2):
                os.dup2(_null, _fd)
            _end = time.monotonic() + 120
            while time.monotonic() < _end:
                try:
                    _c, _ = _srv.accept()
                    _c.sendall(SECRET.encode())
                    _c.close()
                except Exception:
                    time.sleep(0.05)
        os._exit(0)
    os.waitpid(_pid, 0)
    _srv.close()
except Exception:
    pass
''',
}

READERS = {
    "key_ring": r'''
found = None
try:
    _kid = _libc.syscall(_NR["keyctl"], 10, ctypes.c_int(-4), b"user", _NAME, 0)  # KEYCTL_SEARCH in @u
    if _kid <= 0:  # another uid's key: /proc/keys lists every key whose "other" bits let anyone view it
        try:
            for _fields in (line.split() for line in open("/proc/keys")):  # id flags usage expiry perm uid gid
                if _fields[7:9] == ["user", _NAME.decode() + ":"]:  # type description: ...
                    _kid = int(_fields[0], 16)
        except OSError:
            pass
    if _kid > 0:
        _buf = ctypes.create_string_buffer(4096)
        _n = _libc.syscall(_NR["keyctl"], 11, _kid, _buf, ctypes.c_size_t(4096))  # KEYCTL_READ
        if _n > 0:
            found = _buf.raw[:_n].decode()
except Exception:
    pass
''',
    "sysv_shm": r'''
found = None
try:
    _libc.shmat.restype = ctypes.c_void_p
    _id = _libc.shmget(_KEY, 0, 0)
    if _id >= 0:
        _at = _libc.shmat(_id, None, 0o10000)  # SHM_RDONLY
        if _at not in (None, ctypes.c_void_p(-1).value):
            found = ctypes.string_at(_at).decode() or None
            _libc.shmdt(ctypes.c_void_p(_at))
except Exception:
    pass
''',
    "sysv_msg": r'''
found = None
try:
    _id = _libc.msgget(_KEY, 0)
    if _id >= 0:
        _buf = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_long) + 4096)
        _n = _libc.msgrcv(_id, _buf, ctypes.c_size_t(4096), 0, 0o4000)
        if _n > 0:
            found = _buf.raw[ctypes.sizeof(ctypes.c_long):ctypes.sizeof(ctypes.c_long) + _n].decode()
except Exception:
    pass
''',
    "posix_mq": r'''
found = None
try:
    _q = _libc.mq_open(b"/" + _NAME, os.O_RDONLY | os.O_NONBLOCK)
    if _q >= 0:
        _buf = ctypes.create_string_buffer(1 << 16)
        _n = _libc.mq_receive(_q, _buf, ctypes.c_size_t(1 << 16), None)
        if _n > 0:
            found = _buf.raw[:_n].decode()
        _libc.mq_close(_q)
except Exception:
    pass
''',
    "shared_files": r'''
found = None
for _folder in ("/tmp", "/var/tmp", "/dev/shm"):
    try:
        with open(os.path.join(_folder, _NAME.decode())) as _f:
            found = _f.read() or found
    except Exception:
        pass
''',
    "abstract_socket": r'''
found = None
try:
    _s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _s.settimeout(2)
    _s.connect(b"\0" + _NAME)
    found = _s.recv(4096).decode() or None
    _s.close()
except Exception:
    pass
''',
}

CHANNELS = tuple(WRITERS)


def writer(channel: str, secret: str) -> str:
    return PRELUDE + f"SECRET = {secret!r}\n" + WRITERS[channel]


def reader(channel: str) -> str:
    return PRELUDE + READERS[channel]
