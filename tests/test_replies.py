"""Malformed sandbox replies, sent straight to the parser (no sandbox): each is a protocol error or plain, typed
data, never an exception of another kind; and the validator where student data enters."""

import json
import math
import struct

import pytest
import torch

from autograder.running.sandbox.reply import ReplyError, encode_frame, parse_reply_frame
from autograder.intake.validate import InvalidNumber, OddValue, plain_value, safe_text, safe_tree, student_id_from_name

OK = {"op": "call", "id": 7, "ok": True, "seconds": 0.1, "output": ""}


def frame(header: dict, buffers=(), raw: bytes | None = None) -> bytes:
    header = dict(header, buffers=[len(b) for b in buffers])
    data = raw if raw is not None else json.dumps(header).encode()
    return struct.pack(">I", len(data)) + data + b"".join(buffers)


def test_a_good_reply_parses():
    reply = parse_reply_frame(encode_frame(OK, {"result": (1.5, [2, "x"], torch.ones(2, 3))}), 7)
    assert reply.ok and reply.result[0] == 1.5 and reply.result[1] == [2, "x"]
    assert torch.equal(reply.result[2], torch.ones(2, 3))


@pytest.mark.parametrize("name, data", [
    ("empty", b""),
    ("cut length", b"\x00\x00"),
    ("cut header", struct.pack(">I", 100) + b"{}"),
    ("not json", frame({}, raw=b"{nope")),
    ("not utf-8", frame({}, raw=b'{"op": "\xff"}')),
    ("a list", frame({}, raw=b"[1, 2]")),
    ("5000 deep", frame({}, raw=b'{"values": ' + b"[" * 5000 + b"]" * 5000 + b"}")),
    ("huge int literal", frame({}, raw=b'{"id": ' + b"9" * 5000 + b"}")),
    ("header too large", struct.pack(">I", 2**31)),
    ("buffers lie", frame({"buffers": [10**15]}, raw=json.dumps({"buffers": [10**15]}).encode())),
    ("wrong id", encode_frame(dict(OK, id=8))),
    ("id is a string", encode_frame(dict(OK, id="7"))),
    ("no ok", encode_frame({"op": "call", "id": 7})),
    ("ok is a string", encode_frame(dict(OK, ok="yes"))),
    ("values a list", frame(dict(OK, values=[1]))),
    ("tensor without buffer", frame(dict(OK, values={"$dict": [["result", {"$tensor": 0, "dtype": "float32",
                                                                           "shape": [2]}]]}))),
    ("tensor shape lies", frame(dict(OK, values={"$dict": [["result", {"$tensor": 0, "dtype": "float32",
                                                                       "shape": [3]}]]}), [b"\0" * 8])),
    ("tensor of a bad dtype", frame(dict(OK, values={"$dict": [["result", {"$tensor": 0, "dtype": "object",
                                                                           "shape": [1]}]]}), [b"\0" * 8])),
    ("negative shape", frame(dict(OK, values={"$dict": [["result", {"$tensor": 0, "dtype": "uint8",
                                                                    "shape": [-1]}]]}), [b""])),
    ("unknown tag", frame(dict(OK, values={"$pickle": "cos\nsystem"}))),
    ("bad special float", frame(dict(OK, values={"$dict": [["result", {"$float": "1e999"}]]}))),
    ("dict key a list", frame(dict(OK, values={"$dict": [[[1], 2]]}))),
])
def test_a_malformed_reply_is_a_reply_error(name, data):
    with pytest.raises(ReplyError):
        parse_reply_frame(data, 7)


@pytest.mark.parametrize("value, kind", [
    (10**400, InvalidNumber), (-(2**60), InvalidNumber), (float("nan"), InvalidNumber),
    (float("inf"), InvalidNumber), (2**53, int), (-(2**53), int), (1e308, float), (True, bool),
])
def test_numbers_that_cannot_be_compared_are_typed(value, kind):
    reply = parse_reply_frame(encode_frame(OK, {"result": [value]}), 7)
    assert isinstance(reply.result[0], kind)
    if kind is InvalidNumber:
        assert isinstance(reply.result[0], OddValue) and "无法比较的数" in reply.result[0].type_name


def test_text_with_lone_surrogates_is_re_encoded_everywhere():
    header = dict(OK, ok=False, output="print \udc80\ud800", error={"type": "Value\udcffError",
                                                                   "message": "bad \udc80", "traceback": 5})
    reply = parse_reply_frame(encode_frame(header, {"result": {"k\udc80": ["v\udc80"]}}), 7)
    for text in (reply.output, reply.error["type"], reply.error["message"]):
        text.encode("utf-8")  # never raises
    assert reply.error["traceback"] == "" and reply.result is None  # a failed reply carries no result
    good = parse_reply_frame(encode_frame(OK, {"result": {"k\udc80": ["v\udc80"]}}), 7)
    json.dumps(good.result, ensure_ascii=False).encode("utf-8")


def test_odd_header_fields_get_safe_defaults():
    reply = parse_reply_frame(encode_frame(dict(OK, seconds=-5, output=["x"],
                                                ok=False, error="boom")), 7)
    assert reply.seconds == 0.0 and reply.output == "" and reply.error == {"type": "Error", "message": "",
                                                                          "traceback": ""}


def test_nesting_deeper_than_the_cap_becomes_a_placeholder():
    value = []
    for _ in range(40):
        value = [value]
    assert "嵌套太深" in repr(plain_value(value, 0))
    deep = {"a": None}
    for _ in range(40):
        deep = {"a": deep}
    json.dumps(safe_tree(deep))


def test_safe_text_and_tree():
    assert safe_text("a\udc80b\0c") == "a?b\ufffdc"
    assert safe_text(b"\xff\xfe") == "\ufffd\ufffd"
    tree = safe_tree({"x": [float("nan"), 10**400, "\udc80"], "\udc81": (1, 2)})
    text = json.dumps(tree, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    assert tree["x"][0] is None and not math.isnan(tree["x"][1] if isinstance(tree["x"][1], float) else 0)


@pytest.mark.parametrize("name, expected, flagged", [
    ("alice", "alice", False),
    ("王芳", "王芳", False),
    ("wang fang", "wang fang", False),
    ("bad\udcffname", "bad%FFname", True),  # a non-UTF-8 byte, as os.fsdecode gives it
    ("new\nline", "new%0Aline", True),
    ("tab\tid", "tab%09id", True),
    ("esc\x1b[31m", "esc%1B[31m", True),
    ("", "%00", True),
    ("..", "%2E.", True),
])
def test_student_ids_that_are_not_printable_utf8_are_escaped_and_flagged(name, expected, flagged):
    assert student_id_from_name(name) == (expected, flagged)


def test_a_buffer_named_twice_is_refused():
    tensor = {"$tensor": 0, "dtype": "float32", "shape": [2]}
    with pytest.raises(ReplyError, match="second time"):
        parse_reply_frame(frame(dict(OK, values={"$dict": [["result", [tensor, tensor]]]}), [b"\0" * 8]), 7)


ALIASING = """
import json, resource, struct, sys
from autograder.running.sandbox.reply import ReplyError, parse_reply_frame
size = 64 * 1024**2
ref = {"$tensor": 0, "dtype": "float32", "shape": [size // 4]}  # 16 Mi elements: under the per-tensor cap
header = json.dumps({"op": "call", "id": 7, "ok": True, "buffers": [size],
                     "values": {"$dict": [["result", [ref] * 20]]}}).encode()
frame = struct.pack(">I", len(header)) + header + bytes(size)
try:
    parse_reply_frame(frame, 7)
    outcome = "decoded"
except ReplyError as exc:
    outcome = "refused: " + str(exc)
print(json.dumps({"outcome": outcome, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def test_a_forged_reply_naming_one_64_mib_buffer_20_times_is_refused_and_memory_stays_low():
    """Each reference would decode to a copy of its own: 1.25 GiB from a 64 MiB frame. Measured in a fresh process."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ALIASING], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["outcome"].startswith("refused") and "second time" in report["outcome"], report
    assert report["peak_kib"] < 1.25 * 1024**2, report  # KiB: under 1.25 GiB (about 0.5 GiB here)
