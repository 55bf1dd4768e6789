"""The grader's side of a sandbox reply: one schema, checked before anything uses a reply.

A reply is whatever the student's process chose to write on its pipe: the runner's code can be
patched, replaced or bypassed by the student's code. So a reply is parsed as hostile data: its frame
by wire.py (sizes, dtypes, shapes), then here its header against the schema below, and every value in
it through autograder.intake.validate (text re-encoded, numbers that cannot be compared typed, depth bounded).
Anything that does not fit is a protocol error of that one sandbox, never an exception elsewhere.

    {"op": str, "id": int, "ok": bool, "seconds": finite number >= 0, "output": str,
     "error": null | {"type": str, "message": str, "traceback": str}}     + values {"result": ...}
"""

import json
import math
import struct
from dataclasses import dataclass

from autograder.running.sandbox import wire
from autograder.intake.validate import MAX_JSON_NESTING, clipped, nesting_within, plain_value

MAX_ERROR_TYPE = 100
MAX_ERROR_MESSAGE = 2000
MAX_TRACEBACK = 4000
MAX_OUTPUT = 20000


class ReplyError(Exception):
    """A reply that breaks the format or the schema."""


@dataclass
class Reply:
    ok: bool
    result: object = None
    error: dict | None = None
    output: str = ""
    seconds: float = 0.0


def parse_json_header(raw: bytes, max_total_bytes: int) -> tuple[dict, list[int]]:
    """wire.parse_header, with every way JSON can fail (deep nesting, huge integers) a ReplyError."""
    if not nesting_within(raw):  # measured before the parser recurses into it (nesting_within says why)
        raise ReplyError(f"header nested deeper than {MAX_JSON_NESTING} levels")
    try:
        return wire.parse_header(raw, max_total_bytes)
    except wire.WireError as exc:
        raise ReplyError(str(exc)) from None
    except (RecursionError, MemoryError, OverflowError, TypeError) as exc:
        raise ReplyError(f"header is not usable JSON ({type(exc).__name__})") from None


def decode_values(header: dict, buffers: list[bytes], max_elements: int):
    if "values" not in header:
        return None
    try:
        return wire.decode(header["values"], buffers, max_elements)
    except wire.WireError as exc:
        raise ReplyError(str(exc)) from None
    except (RecursionError, MemoryError, OverflowError, TypeError, ValueError, RuntimeError) as exc:
        raise ReplyError(f"values are not decodable ({type(exc).__name__})") from None


def check_reply(header: dict, values, expected_id: int | None) -> Reply:
    """The Reply a decoded frame stands for, or ReplyError."""
    if expected_id is not None and (type(header.get("id")) is not int or header["id"] != expected_id):
        raise ReplyError("the reply does not answer the request")
    ok = header.get("ok")
    if type(ok) is not bool:
        raise ReplyError("the reply has no ok flag")
    seconds = header.get("seconds", 0.0)
    if type(seconds) not in (int, float) or not math.isfinite(seconds) or seconds < 0 or seconds > 1e7:
        seconds = 0.0
    output = header.get("output", "")
    output = clipped(output, MAX_OUTPUT) if isinstance(output, str) else ""
    error = header.get("error")
    if ok:
        error = None
    else:
        if not isinstance(error, dict):
            error = {}
        error = {"type": _text(error.get("type"), MAX_ERROR_TYPE) or "Error",
                 "message": _text(error.get("message"), MAX_ERROR_MESSAGE),
                 "traceback": _text(error.get("traceback"), MAX_TRACEBACK)}
    if values is not None and not isinstance(values, dict):
        raise ReplyError("the reply's values are not an object")
    result = plain_value(values.get("result")) if isinstance(values, dict) else None
    return Reply(ok=ok, result=result if ok else None, error=error, output=output, seconds=float(seconds))


def _text(value, limit: int) -> str:
    return clipped(value, limit) if isinstance(value, str) else ""


def parse_reply_frame(frame: bytes, expected_id: int | None, max_total_bytes: int = 256 * 1024**2,
                      max_elements: int = 32 * 1024**2) -> Reply:
    """A whole frame as bytes (length, header, buffers) to a Reply: what the sandbox's pipe reader does, in one
    call (for tests and tools that hold a frame)."""
    if len(frame) < 4:
        raise ReplyError("frame shorter than its length prefix")
    (length,) = struct.unpack(">I", frame[:4])
    if length > wire.MAX_HEADER_BYTES:
        raise ReplyError(f"reply header of {length} bytes")
    if len(frame) < 4 + length:
        raise ReplyError("frame cut short")
    header, sizes = parse_json_header(frame[4:4 + length], max_total_bytes)
    buffers, at = [], 4 + length
    for n in sizes:
        if len(frame) < at + n:
            raise ReplyError("frame cut short")
        buffers.append(frame[at:at + n])
        at += n
    return check_reply(header, decode_values(header, buffers, max_elements), expected_id)


def encode_frame(header: dict, values=None) -> bytes:
    """A frame as the runner writes it (for tests)."""
    buffers: list[bytes] = []
    header = dict(header)
    if values is not None:
        header["values"] = wire.encode(values, buffers)
    header["buffers"] = [len(b) for b in buffers]
    raw = json.dumps(header).encode("utf-8")
    return struct.pack(">I", len(raw)) + raw + b"".join(buffers)
