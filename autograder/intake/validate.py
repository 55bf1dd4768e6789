"""Where student-derived data enters the grader: text, numbers, nested values and ids, made safe to use.

Everything that comes out of a submission (its file names, its cells, its replies, the numbers its code
returns, the text of its exceptions) passes through here before anything stores, renders, compares or
sends it on. Nothing here raises on odd data: odd data becomes plain, typed data.

    safe_text("\\udc80 bad")           -> "? bad"   (encodable as UTF-8, always)
    plain_value(10**400)               -> InvalidNumber  (a number no float holds exactly)
    student_id_from_name("bad\\udcff")  -> ("bad%FF", True)  (an escaped id, to be flagged)
    nesting_within(b"[[1]]", 1)        -> False  (JSON text measured before json.loads parses it)
"""

import math
import re
from itertools import accumulate
import unicodedata
from urllib.parse import quote
from dataclasses import fields, is_dataclass

MAX_EXACT_INT = 2**53  # beyond this a float no longer holds every integer: a comparison would be wrong or raise
MAX_DEPTH = 32  # nested containers in a student's value (the wire's own cap)
CUT = "…（已截断）"  # what every cut text and container ends with: the student sees that something is left out
MAX_FIELD_CHARS = 20000  # one text field of a stored result (a message, an answer, a path)
MAX_ITEMS = 100  # entries of one list or dict in a check's details
# JSON text from a student (a sandbox's reply, a submitted notebook) nests at most this deep: far above what the wire
# nests (about 100: up to three levels per value level, MAX_DEPTH of them) or a notebook (under 20), far below the
# interpreter's recursion limit (about 1,000), where Python's C parser, recursing once per level, would stop
MAX_JSON_NESTING = 200
# Values in the JSON text of a notebook the grading run reads for its facts (autograder.class_run): a course notebook
# holds a few thousand, one with a million lines of saved output about a million; parsed, a million is ~100 MB
MAX_JSON_VALUES = 1_000_000


class OddValue:
    """Stands for a value from a submission that cannot be used as it is (described to the student by type_name).
    Like the wire's Unsupported, it is no number, text or container: every check that wants one fails on it."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self):
        return f"<{self.type_name}>"

    def __eq__(self, other):
        return type(other) is type(self) and other.type_name == self.type_name


class InvalidNumber(OddValue):
    """A number from a submission that cannot be compared: too large for a float, or not finite."""

    def __init__(self, text: str):
        super().__init__(f"无法比较的数（{text}）")
        self.text = text


def safe_text(value, limit: int | None = None) -> str:
    """`value` as text that encodes as UTF-8 whatever it held (lone surrogates, odd bytes), cut to `limit`."""
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    else:
        try:
            text = value if isinstance(value, str) else str(value)
        except Exception:  # a student's __str__ may raise
            text = "<unprintable>"
        text = str.__str__(text) if isinstance(text, str) else "<unprintable>"
        text = text.encode("utf-8", "replace").decode("utf-8", "replace")
        text = text.replace("\0", "\ufffd")
    return text if limit is None else text[:limit]


def clipped(value, limit: int) -> str:
    """safe_text(value), cut to at most `limit` characters with a visible CUT at the end when it is longer."""
    text = safe_text(value)
    if len(text) <= limit:
        return text
    return text[:max(limit - len(CUT), 0)] + CUT


def _number_text(value) -> str:
    if isinstance(value, float):
        return repr(value)
    digits = len(str(abs(value))) if abs(value) < 10**4000 else 4000
    return f"{'-' if value < 0 else ''}约 {digits} 位的整数"


def plain_value(value, depth: int = 0):
    """A decoded reply value with its leaves made safe: text re-encoded, numbers that cannot be compared typed
    as InvalidNumber, nesting deeper than MAX_DEPTH cut (an OddValue). Tensors stay as they
    are (the wire has checked their dtype, shape and size; NaN inside a tensor is the comparison's business)."""
    if depth > MAX_DEPTH:
        return OddValue("嵌套太深的值")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= MAX_EXACT_INT else InvalidNumber(_number_text(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else InvalidNumber(repr(value))
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [plain_value(v, depth + 1) for v in value]
    if isinstance(value, tuple):
        return tuple(plain_value(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {(safe_text(k) if isinstance(k, str) else k): plain_value(v, depth + 1) for k, v in value.items()}
    return value  # tensors, dtypes, the wire's Unsupported


def safe_tree(value, depth: int = 0):
    """A JSON-able tree (a stored result, a report's data) whose every string encodes as UTF-8, every float is
    finite (else None) and whose depth is bounded (deeper parts become a placeholder string)."""
    if depth > MAX_DEPTH:
        return "<nested too deeply>"
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) <= 2**63 else safe_text(_number_text(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, (list, tuple)):
        return [safe_tree(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {safe_text(k): safe_tree(v, depth + 1) for k, v in value.items()}
    return safe_text(value, 200)


def bounded_tree(value, items: int = MAX_ITEMS, chars: int = 2000, depth: int = 0):
    """safe_tree with every list cut to `items` entries (then a CUT entry saying how many there were), every dict
    to `items` keys (then a CUT key), every text to `chars` characters: for what a check reports about a student's
    values (their module's parameter names, shapes), which a submission can make as long as it likes."""
    if depth > MAX_DEPTH:
        return "<nested too deeply>"
    if isinstance(value, str):
        return clipped(value, chars)
    if isinstance(value, (list, tuple)):
        out = [bounded_tree(v, items, chars, depth + 1) for v in value[:items]]
        return out + [f"{CUT}共 {len(value)} 项"] if len(value) > items else out
    if isinstance(value, dict):
        out = {}
        for n, (k, v) in enumerate(value.items()):
            if n == items:
                out[CUT] = f"共 {len(value)} 项"
                break
            out[clipped(k, 200)] = bounded_tree(v, items, chars, depth + 1)
        return out
    return safe_tree(value, depth)


def sanitize_record(record):
    """Make a dataclass record (a SubmissionResult and what it holds) safe in place: every string field
    re-encoded and at most MAX_FIELD_CHARS long (cut visibly), every float finite, every dict or list field a safe
    tree. Returns the record."""
    for f in fields(record):
        value = getattr(record, f.name)
        if is_dataclass(value) and not isinstance(value, type):
            sanitize_record(value)
        elif isinstance(value, list) and value and all(is_dataclass(v) for v in value):
            for v in value:
                sanitize_record(v)
        elif isinstance(value, str):
            setattr(record, f.name, clipped(value, MAX_FIELD_CHARS))
        elif isinstance(value, float) and not math.isfinite(value):
            setattr(record, f.name, 0.0)
        elif isinstance(value, (dict, list, tuple)):
            setattr(record, f.name, safe_tree(value))
    return record


def _printable(char: str) -> bool:
    return char == " " or unicodedata.category(char)[0] not in ("C", "Z")


def student_id_from_name(name: str) -> tuple[str, bool]:
    """The student id for a name found on disk (os.fsdecode's text): itself when it is printable UTF-8,
    else an escaped id (%XX for each byte that is not) and True: the submission is graded under the escaped
    id and flagged. Empty names, `.` and `..` are escaped too."""
    raw = name.encode("utf-8", "surrogateescape") if isinstance(name, str) else bytes(name)
    try:
        text = raw.decode("utf-8")
        clean = bool(text) and text not in (".", "..") and all(_printable(c) for c in text)
    except UnicodeDecodeError:
        text, clean = None, False
    if clean:
        return text, False
    out = []
    for char in raw.decode("utf-8", "surrogateescape"):
        if "\udc80" <= char <= "\udcff":  # a byte that is not UTF-8
            out.append(f"%{ord(char) - 0xDC00:02X}")
        elif not _printable(char) or char == "%":
            out.append("".join(f"%{b:02X}" for b in char.encode("utf-8")))
        else:
            out.append(char)
    escaped = "".join(out) or "%00"
    return ("%2E" + escaped[1:] if escaped in (".", "..") else escaped), True


# --- a student's id as a file name ---------------------------------------------------------------------------


def safe_name(student_id: str) -> str:
    """A file name for any student id (spaces, unicode and `/` included), reversible and never `.` or `..`."""
    name = quote(student_id, safe=" -_.@+,=()[]{}~") if student_id not in (".", "..") else quote(student_id, safe="")
    if name in (".", "..") or name.startswith("."):
        name = "%2E" + name[1:]
    return name or "%00"


def nbgrader_folder_name(student_id: str) -> str:
    """The student's folder name in nbgrader's feedback/ and submitted/: the id itself, as nbgrader has it, unless
    the id is no single folder name (`/`, `..`: possible only through the API), which gets its escaped form."""
    plain = student_id not in ("", ".", "..") and "/" not in student_id and "\0" not in student_id
    return student_id if plain else safe_name(student_id)


_JSON_STRING = re.compile(rb'"[^"]*"?')  # once escaped quotes are gone (an unterminated one runs to the end)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_BRACKET_STEPS = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 / -1 as signed bytes
_NESTING_CHUNK = 1 << 18  # bytes measured at a time: the pieces a substitution makes of one chunk stay few


def _outside_strings(raw: bytes):
    """The JSON text `raw` less its strings, a chunk at a time: linear time, and memory of a few copies of `raw` plus a
    bounded chunk's. Escaped backslashes, then escaped quotes, are removed first (pairs taken left to right, as the
    parser takes them), so every quote left opens or closes a string; a string open at a chunk's end runs on into the
    next (an unterminated one to the end)."""
    bare = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    in_string = False
    for start in range(0, len(bare), _NESTING_CHUNK):
        chunk = bare[start:start + _NESTING_CHUNK]
        if in_string:  # a string open since an earlier chunk: it ends at the first quote
            end = chunk.find(b'"')
            if end < 0:
                continue
            chunk, in_string = chunk[end + 1:], False
        in_string = chunk.count(b'"') % 2 == 1
        yield _JSON_STRING.sub(b"", chunk)


def nesting_within(raw: bytes, limit: int = MAX_JSON_NESTING) -> bool:
    """Whether the JSON text `raw` (UTF-8) nests at most `limit` arrays and objects deep, brackets inside strings
    not counted; asked before json.loads. Its C parser recurses once per level: text nested hundreds deep runs it to
    the interpreter's recursion limit, and a garbage collection that starts there (after any allocation) runs other
    objects' finalizers with a few frames of stack left, which fail (a file left open, an error hook that cannot
    format its error). Text that is not JSON is measured as deep as the parser would go before it failed."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return True
    depth = 0
    for outside in _outside_strings(raw):
        steps = memoryview(outside.translate(_BRACKET_STEPS, _NOT_BRACKETS)).cast("b")
        if steps and max(accumulate(steps, initial=depth)) > limit:
            return False
        depth += sum(steps)
    return True


def _separators(text: bytes) -> int:
    return text.count(b",") + text.count(b"[") + text.count(b"{")


def values_within(raw: bytes, limit: int = MAX_JSON_VALUES) -> bool:
    """Whether the JSON text `raw` holds at most about `limit` values: its commas and opening brackets outside strings
    counted, asked before json.loads. What parsing makes is about a hundred bytes a value whatever the file's size:
    the 22 million empty objects that fit in a notebook of 64 MiB parse into 1.7 GB."""
    if _separators(raw) <= limit:
        return True
    total = 0
    for outside in _outside_strings(raw):
        total += _separators(outside)
        if total > limit:
            return False
    return True
