"""JSON from a student (a sandbox's reply, a submitted notebook) nested too deep is refused before Python's
parser recurses into it (autograder.running.sandbox.json_nesting): a garbage collection that starts inside the
parser runs other objects' finalizers with only the stack the parser left. In CI a 5000-deep reply once left
pytest's own unraisable-exception hook too little stack to format an error: the test of that reply failed."""

import gc
import json
import random
import struct

import pytest
import torch

from autograder.class_run import _notebook_facts
from autograder.intake.discovery import FoundSubmission
from autograder.intake.reading import UnreadableNotebook, parse_notebook
from autograder.running.sandbox import wire
from autograder.running.sandbox.json_nesting import MAX_NESTING, nesting_within
from autograder.running.sandbox.reply import ReplyError, encode_frame, parse_reply_frame

DEEP = b"[" * 5000 + b"]" * 5000


def room(depth: int = 0) -> int:
    """How many more Python calls the stack has room for here."""
    try:
        return room(depth + 1)
    except RecursionError:
        return depth


class Finalized:
    rooms: list[int] = []

    def __del__(self):
        Finalized.rooms.append(room())


def deep_reply() -> bytes:
    raw = b'{"op": "call", "id": 7, "ok": true, "values": ' + DEEP + b"}"
    return struct.pack(">I", len(raw)) + raw


def deep_notebook() -> bytes:
    return b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {"deep": ' + DEEP + b'}, "cells": []}'


def refused_reply(tmp_path):
    with pytest.raises(ReplyError, match="nested deeper than 200 levels"):
        parse_reply_frame(deep_reply(), 7)


def refused_notebook(tmp_path):
    with pytest.raises(UnreadableNotebook, match="嵌套太深（超过 200 层）"):
        parse_notebook(deep_notebook())


def refused_facts(tmp_path):  # what the class run reads of a notebook before grading it
    path = tmp_path / "rmsnorm.ipynb"
    path.write_bytes(deep_notebook())
    assert _notebook_facts(FoundSubmission("alice", "rmsnorm", path, tmp_path)) == (None, False)


@pytest.mark.parametrize("refused", [refused_reply, refused_notebook, refused_facts])
def test_json_thousands_deep_is_refused_before_a_collection_can_start_deep_inside_the_parser(refused, tmp_path):
    thresholds = range(50, 1001, 25)  # a collection after this many allocations: some land deep in a parser
    Finalized.rooms = []
    old = gc.get_threshold()
    try:
        for threshold in thresholds:
            gc.collect()
            gc.disable()
            for _ in range(3):
                garbage = Finalized()
                garbage.cycle = garbage  # freed only by a collection
            del garbage
            gc.set_threshold(threshold)
            gc.enable()
            refused(tmp_path)
            gc.collect()
    finally:
        gc.set_threshold(*old)
        gc.enable()
    assert len(Finalized.rooms) == 3 * len(thresholds)
    # before: the parser recursed to the interpreter's limit and a finalizer got as few as 20 frames
    assert min(Finalized.rooms) > 500, sorted(Finalized.rooms)[:5]


def json_depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(json_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(json_depth, value.values()), default=0)
    return 0


def random_json(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([1, -2.5, None, True, "a[b{", 'q"\\[', "]]]}", "\\", "\\\\\"[", "王[芳"])
    if rng.random() < 0.5:
        return [random_json(rng, depth - 1) for _ in range(rng.randint(0, 3))]
    return {f"k[{i}\\\"{{": random_json(rng, depth - 1) for i in range(rng.randint(0, 3))}


def test_nesting_is_measured_as_the_parser_sees_it_brackets_in_strings_not_counted():
    rng = random.Random(20261207)
    for _ in range(2000):
        value = random_json(rng, rng.randint(0, 12))
        depth = json_depth(value)
        for raw in (json.dumps(value).encode(), json.dumps(value, ensure_ascii=False, indent=1).encode()):
            for limit in range(14):
                assert nesting_within(raw, limit) == (depth <= limit), (raw, limit, depth)
    # not JSON, yet as deep as the parser would go before it failed
    assert not nesting_within(b"[" * 300)
    assert not nesting_within(b'["\\\\", ' + b"[" * 300)  # an escaped backslash ends no string
    assert nesting_within(b'["' + b"[" * 300 + b'\\"]')  # an unterminated string runs to the end
    assert nesting_within(b'"\\' + b"[" * 300)  # so does a lone backslash's


def test_the_deepest_value_the_wire_sends_is_well_within_the_cap():
    value = torch.arange(6.0).reshape(2, 3)
    for level in range(wire.MAX_DEPTH - 1):  # a dict costs JSON the most levels (an object, its item list, a pair)
        value = {f"level{level}": value}  # and {"result": value} is the last
    frame = encode_frame({"op": "call", "id": 7, "ok": True, "seconds": 0.0, "output": ""}, {"result": value})
    header = json.loads(frame[4:4 + struct.unpack(">I", frame[:4])[0]])
    assert 90 < json_depth(header) < MAX_NESTING / 2
    reply = parse_reply_frame(frame, 7)
    assert reply.ok and reply.error is None
    with pytest.raises(wire.WireError):
        wire.encode({"result": {"one more": value}}, [])  # deeper than this the wire itself refuses
