"""How deep JSON text nests, found before json.loads parses it.

Python's C JSON parser recurses once per array or object, up to the interpreter's recursion limit
(about 1,000). A reply or notebook nested hundreds deep runs it there; if a garbage collection starts
at that depth (it starts after any allocation), the finalizers it calls run with a few frames of stack
left and fail (a file left unclosed, an error hook that cannot format its error). So text from a
student (a sandbox's reply, a submitted notebook) is measured first and refused past MAX_NESTING:
far above what the wire nests (about 100: three levels per value level, wire.MAX_DEPTH of them) or a
notebook (under 20), far below the parser's limit.

Standard library only: loaded inside the sandbox next to wire.py (environment.RUNNER_FILES).
"""

import re
from itertools import accumulate

MAX_NESTING = 200

_STRING = re.compile(rb'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)', re.DOTALL)  # a JSON string (an unterminated one runs to the end)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 / -1 as signed bytes


def nesting_within(raw: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON text `raw` nests at most `limit` arrays and objects deep (brackets inside strings do not
    count). Linear in len(raw); text with at most `limit` opening brackets in all is not scanned further."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    steps = memoryview(_STRING.sub(b"", raw).translate(_STEPS, _NOT_BRACKETS)).cast("b")
    return max(accumulate(steps), default=0) <= limit
