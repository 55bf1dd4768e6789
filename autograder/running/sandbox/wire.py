"""The one format in which data crosses the sandbox boundary, in both directions.

A frame is a 4-byte big-endian length, a UTF-8 JSON header of that length, then the raw bytes of
the tensors the header names, in order. Values in the header are JSON, with tagged objects for
what JSON lacks:

    {"$tensor": i, "dtype": "float32", "shape": [2, 3]}   the i-th buffer after the header (named once)
    {"$tuple": [...]}, {"$dict": [[key, value], ...]}, {"$float": "nan" | "inf" | "-inf"}, {"$dtype": "float64"}
    {"$other": "numpy.ndarray"}                            an object that is none of these (reply side)

Nothing here unpickles, evals or imports anything named by the data: a reply is plain data whose
sizes, dtypes and shapes are checked before a tensor is built from it. This module must import
only the standard library and torch: it is also loaded inside the sandbox, next to runner.py.
"""

import json
import math
import os
import struct

import torch

# Bound once, at import, before any student code runs in the sandbox: monkeypatching torch.Tensor,
# json, os or builtins later cannot change how a reply is encoded.
_json_dumps, _json_loads, _pack, _unpack, _os_write, _os_read = json.dumps, json.loads, struct.pack, struct.unpack, os.write, os.read
_Tensor = torch.Tensor
_as_subclass, _detach, _cpu = torch.Tensor.as_subclass, torch.Tensor.detach, torch.Tensor.cpu
_reshape, _view, _numpy, _numel = torch.Tensor.reshape, torch.Tensor.view, torch.Tensor.numpy, torch.Tensor.numel
_clone, _contiguous_format = torch.Tensor.clone, torch.contiguous_format
_DisableTorchFunction = torch._C.DisableTorchFunction
_dtype_t = torch.dtype
_isinstance, _len, _type, _list_t, _tuple_t, _dict_t, _int_t, _float_t, _str_t, _bool_t = (
    isinstance, len, type, list, tuple, dict, int, float, str, bool)

DTYPES = {
    "float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "bool": torch.bool,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}

MAX_HEADER_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 32


class WireError(Exception):
    """A frame that breaks the format, or exceeds a size cap."""


# --- values <-> (header tree, buffers) ------------------------------------------------------------


def encode(value, buffers: list, depth: int = 0):
    """A JSON-able tree for `value`; tensor bytes are appended to `buffers`."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    kind = _type(value)
    if value is None or kind is _bool_t or kind is _str_t:
        return value
    if kind is _int_t:
        return value
    if kind is _float_t:
        return value if math.isfinite(value) else {"$float": repr(value)}
    if _isinstance(value, _Tensor):
        return _encode_tensor(value, buffers)
    if kind is _dtype_t:
        return {"$dtype": DTYPE_NAMES[value]} if value in DTYPE_NAMES else {"$other": f"torch.dtype[{value}]"}
    if kind is _tuple_t:
        return {"$tuple": [encode(v, buffers, depth + 1) for v in value]}
    if kind is _list_t:
        return [encode(v, buffers, depth + 1) for v in value]
    if kind is _dict_t:
        return {"$dict": [[encode(k, buffers, depth + 1), encode(v, buffers, depth + 1)] for k, v in value.items()]}
    return {"$other": f"{kind.__module__}.{kind.__qualname__}"}


def _encode_tensor(tensor: torch.Tensor, buffers: list):
    # a subclass's __torch_function__ or overridden methods must not run here: use the plain tensor underneath
    with _DisableTorchFunction():
        # a fresh copy with standard strides: is_contiguous() is true of any one-element tensor, whatever its
        # stride, and viewing such a tensor as bytes would fail
        plain = _clone(_cpu(_detach(_as_subclass(tensor, _Tensor))), memory_format=_contiguous_format)
        if plain.dtype not in DTYPE_NAMES:
            return {"$other": f"torch.Tensor[{plain.dtype}]"}
        data = _numpy(_view(_reshape(plain, (-1,)), torch.uint8)).tobytes() if _numel(plain) else b""
        shape = [int(n) for n in plain.shape]
        dtype = DTYPE_NAMES[plain.dtype]
    buffers.append(data)
    return {"$tensor": _len(buffers) - 1, "dtype": dtype, "shape": shape}


def decode(tree, buffers: list, max_elements: int, depth: int = 0):
    """The value a header tree describes; every tensor is checked against its buffer and the caps. Each buffer
    may be named once: `buffers[i]` is set to None as it is decoded, so that what a frame decodes to is at most
    the size of its buffers (which the frame's cap bounds), and each buffer's bytes are freed as they are copied."""
    if depth > MAX_DEPTH:
        raise WireError("value nested too deeply")
    if tree is None or isinstance(tree, (bool, str, int, float)):
        return tree
    if isinstance(tree, list):
        return [decode(v, buffers, max_elements, depth + 1) for v in tree]
    if not isinstance(tree, dict) or len(tree) == 0:
        raise WireError(f"unexpected value {type(tree).__name__}")
    if "$tensor" in tree:
        return _decode_tensor(tree, buffers, max_elements)
    if "$tuple" in tree:
        return tuple(decode(v, buffers, max_elements, depth + 1) for v in _list(tree["$tuple"]))
    if "$dict" in tree:
        items = _list(tree["$dict"])
        return {_key(decode(k, buffers, max_elements, depth + 1)): decode(v, buffers, max_elements, depth + 1)
                for k, v in (_pair(item) for item in items)}
    if "$dtype" in tree:
        if tree["$dtype"] not in DTYPES:
            raise WireError(f"dtype {tree['$dtype']!r} is not allowed")
        return DTYPES[tree["$dtype"]]
    if "$float" in tree:
        text = tree["$float"]
        if text not in ("nan", "inf", "-inf"):
            raise WireError(f"bad special float {text!r}")
        return float(text)
    if "$other" in tree:
        return Unsupported(str(tree["$other"])[:200])
    raise WireError(f"unknown tag in {sorted(tree)[:3]}")


def _list(value):
    if not isinstance(value, list):
        raise WireError("expected a list")
    return value


def _pair(item):
    if not isinstance(item, list) or len(item) != 2:
        raise WireError("expected a [key, value] pair")
    return item


def _key(key):
    if not isinstance(key, (str, int)):
        raise WireError("dict keys must be strings or integers")
    return key


def _decode_tensor(tree, buffers, max_elements):
    index, dtype_name, shape = tree.get("$tensor"), tree.get("dtype"), tree.get("shape")
    if not isinstance(index, int) or not 0 <= index < len(buffers):
        raise WireError("tensor names a buffer that is not there")
    if dtype_name not in DTYPES:
        raise WireError(f"dtype {dtype_name!r} is not allowed")
    if not isinstance(shape, list) or len(shape) > 16 or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise WireError("bad tensor shape")
    numel = math.prod(shape)
    if numel > max_elements:
        raise WireError(f"tensor of {numel} elements exceeds the cap of {max_elements}")
    dtype = DTYPES[dtype_name]
    data = buffers[index]
    if data is None:
        # each buffer decodes once: a header naming one buffer many times would multiply what it decodes to
        # (the frame's size cap counts buffers, not references)
        raise WireError(f"tensor names buffer {index} a second time")
    if len(data) != numel * dtype.itemsize:
        raise WireError(f"tensor header says {numel} x {dtype_name} but the buffer holds {len(data)} bytes")
    buffers[index] = None  # decoded: its bytes are freed as the tensor's own copy is made
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    copy = bytearray(data)
    del data
    return torch.frombuffer(copy, dtype=dtype).reshape(shape)


class Unsupported:
    """Stands for an object the other side could not send as plain data (e.g. a numpy array)."""

    def __init__(self, type_name: str):
        self.type_name = type_name

    def __repr__(self):
        return f"<{self.type_name}>"

    def __eq__(self, other):
        return isinstance(other, Unsupported) and other.type_name == self.type_name


# --- frames on a file descriptor ------------------------------------------------------------------


def write_frame(fd: int, message: dict, values: dict | None = None) -> None:
    """Send `message` (JSON-able) with `values` (any encodable values) under the key "values"."""
    buffers: list[bytes] = []
    header = dict(message)
    if values is not None:
        header["values"] = encode(values, buffers)
    header["buffers"] = [len(b) for b in buffers]
    raw = _json_dumps(header, allow_nan=False).encode("utf-8")
    _write_all(fd, _pack(">I", _len(raw)) + raw)
    for b in buffers:
        _write_all(fd, b)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = _os_write(fd, view)
        view = view[written:]


def parse_header(raw: bytes, max_total_bytes: int) -> tuple[dict, list[int]]:
    """Check a frame's header and return it with its buffer sizes."""
    try:
        header = _json_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise WireError("header is not an object")
    sizes = header.get("buffers", [])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise WireError("bad buffer list")
    if sum(sizes) > max_total_bytes:
        raise WireError(f"reply of {sum(sizes)} bytes exceeds the cap of {max_total_bytes}")
    return header, sizes


def read_frame_blocking(fd: int, max_total_bytes: int, max_elements: int) -> tuple[dict, object]:
    """Read one frame (used inside the sandbox, where the grader is trusted)."""
    (length,) = _unpack(">I", _read_exact(fd, 4))
    if length > MAX_HEADER_BYTES:
        raise WireError("header too large")
    header, sizes = parse_header(_read_exact(fd, length), max_total_bytes)
    buffers = [_read_exact(fd, n) for n in sizes]
    values = decode(header.get("values"), buffers, max_elements) if "values" in header else None
    return header, values


def _read_exact(fd: int, n: int) -> bytes:
    chunks, remaining = [], n
    while remaining:
        chunk = _os_read(fd, min(remaining, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
