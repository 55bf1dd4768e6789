"""JSON from a student (a sandbox's reply, a submitted notebook) nested too deep is refused before Python's
parser recurses into it (autograder.intake.validate.nesting_within): a garbage collection that starts inside the
parser runs other objects' finalizers with only the stack the parser left. In CI a 5000-deep reply once left
pytest's own unraisable-exception hook too little stack to format an error: the test of that reply failed."""

import gc
import json
import json.decoder
import json.scanner
import random
import struct
import tracemalloc

import pytest
import torch

from autograder.class_run import _notebook_facts
from conftest import release_notebook
from autograder.intake.reading import UnreadableNotebook, parse_notebook
from autograder.intake import validate
from autograder.intake.validate import MAX_JSON_NESTING, MAX_JSON_VALUES, nesting_within, values_within
from autograder.running.sandbox import wire
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
    assert _notebook_facts("rmsnorm", deep_notebook()) == (None, False)


def refused_facts_utf16(tmp_path):
    # json.loads(bytes) reads UTF-16 too, where U+2241 is the bytes 41 22: a lone quote to a measure of the bytes
    text = '{"nbformat": 4, "cells": [], "x": "\u2241", "deep": ' + DEEP.decode() + "}"
    assert _notebook_facts("rmsnorm", text.encode("utf-16-le")) == (None, False)


@pytest.mark.parametrize("refused", [refused_reply, refused_notebook, refused_facts, refused_facts_utf16])
def test_json_thousands_deep_is_refused_before_a_collection_can_start_deep_inside_the_parser(refused, tmp_path):
    thresholds = range(50, 1001, 25)  # a collection after this many allocations: some land deep in a parser
    Finalized.rooms = []
    old = gc.get_threshold()
    gc.collect()
    gc.freeze()  # what the process holds is walked by no collection below: each takes microseconds, not a second
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
        gc.unfreeze()
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


def reached_depth(text: str) -> int:
    """How deep Python's JSON parser goes into `text` before it succeeds or fails: its pure-Python twin (the same
    grammar as the C parser), counting."""
    now = deepest = 0

    def counted(parse):
        def parse_counted(*args, **kwargs):
            nonlocal now, deepest
            now += 1
            deepest = max(deepest, now)
            try:
                return parse(*args, **kwargs)
            finally:
                now -= 1
        return parse_counted

    decoder = json.JSONDecoder()
    decoder.parse_array, decoder.parse_object = counted(json.decoder.JSONArray), counted(json.decoder.JSONObject)
    decoder.parse_string = json.decoder.py_scanstring
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    try:
        decoder.decode(text)
    except (ValueError, RecursionError):
        pass
    return deepest


@pytest.mark.parametrize("chunk", [1, 3, 7, validate._NESTING_CHUNK])
def test_text_that_is_not_json_is_measured_at_least_as_deep_as_the_parser_goes(chunk, monkeypatch):
    """Bits of JSON in random order (escapes, lone backslashes and quotes, unterminated strings): nesting_within
    never says "within" of text the parser would go deeper into, whatever the chunks it is measured in."""
    monkeypatch.setattr(validate, "_NESTING_CHUNK", chunk)
    rng = random.Random(chunk)
    bits = ["[", "]", "{", "}", '"', "\\", ",", ":", "1", "a", "\\u0022", '{"a":', "é", " ", "\\\\", '\\"']
    weights = [8, 2, 1, 1, 3, 2, 2, 1, 2, 1, 1, 6, 1, 1, 2, 2]  # openers most: the parser must get somewhere
    deeper = 0
    for _ in range(4000):
        text = "".join(rng.choices(bits, weights, k=rng.randint(0, 30)))
        depth = reached_depth(text)
        deeper += depth > 2
        for limit in range(5):
            assert not (depth > limit and nesting_within(text.encode(), limit)), (text, limit, depth)
    assert deeper > 100  # the random texts do reach past the limits tried


@pytest.mark.parametrize("name, raw", [
    ("one string of escaped quotes", b"[" * 300 + b'"' + b'\\"' * (4 << 20)),
    ("empty strings between brackets", b'""[' * ((8 << 20) // 3)),
    ("empty strings and pairs", b'""[]' * (2 << 20)),
])
def test_measuring_8_mib_takes_bounded_memory(name, raw):
    """Memory does not grow with the text beyond its copies (a regex with a repeat inside a repeat took ~95 bytes
    a byte of escapes; one substitution over the whole text, ~50 bytes a byte of tiny strings)."""
    tracemalloc.start()
    try:
        nesting_within(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(raw) * 3 + 32 * 2**20, f"{name}: {peak / 2**20:.0f} MiB"


def test_the_deepest_value_the_wire_sends_is_well_within_the_cap():
    value = torch.arange(6.0).reshape(2, 3)
    for level in range(wire.MAX_DEPTH - 1):  # a dict costs JSON the most levels (an object, its item list, a pair)
        value = {f"level{level}": value}  # and {"result": value} is the last
    frame = encode_frame({"op": "call", "id": 7, "ok": True, "seconds": 0.0, "output": ""}, {"result": value})
    header = json.loads(frame[4:4 + struct.unpack(">I", frame[:4])[0]])
    assert 90 < json_depth(header) < MAX_JSON_NESTING / 2
    reply = parse_reply_frame(frame, 7)
    assert reply.ok and reply.error is None
    with pytest.raises(wire.WireError):
        wire.encode({"result": {"one more": value}}, [])  # deeper than this the wire itself refuses


# --- many values: what the grading run parses for a notebook's facts is bounded, not only its size ------------------

def test_values_are_counted_outside_strings_only():
    many = b"[" + b"{}," * 10 + b"{}]"  # separators: one [, eleven {, ten commas
    assert values_within(many, 22) and not values_within(many, 21)
    for text in ("1," * 5000 + "[{", '",[{' * 5000, "\\\\" + '",' * 5000):  # in strings, escaped quotes included
        raw = json.dumps({"cells": [{"source": text}]}).encode()
        assert values_within(raw, 10), text[:20]
    assert not values_within(b'["\\\\", ' + b"{}," * 100 + b"1]", 100)  # an escaped backslash ends no string


def test_the_run_does_not_parse_a_notebook_of_millions_of_empty_objects_for_its_facts():
    """22 million `{}` fit in a notebook under 64 MiB and parse into 1.7 GB, in the `autograde` process itself,
    which has no memory limit (its workers do, and say why they cannot grade it). Here two million: the facts are
    not read (None, False: the grading says why) and the measuring stays within a few copies of the text."""
    released = json.loads(release_notebook("rmsnorm").read_text())
    released["cells"][0]["metadata"]["x"] = [{}] * 2_000_000
    raw = json.dumps(released).encode()
    tracemalloc.start()
    try:
        facts = _notebook_facts("rmsnorm", raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert facts == (None, False)
    assert peak < len(raw) * 3 + 32 * 2**20, f"{peak / 2**20:.0f} MiB for {len(raw) / 2**20:.0f} MiB of text"


def test_a_notebook_with_more_commas_than_values_allowed_in_its_text_still_has_its_facts():
    """Commas in cells' text are not values: the released notebook with a markdown cell of over a million commas is
    still read (nothing answered), as a notebook with a million lines of saved output would be."""
    released = json.loads(release_notebook("rmsnorm").read_text())
    released["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "1," * (MAX_JSON_VALUES + 1)})
    assert _notebook_facts("rmsnorm", json.dumps(released).encode()) == (None, True)
