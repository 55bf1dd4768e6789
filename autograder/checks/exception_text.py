"""What a student is shown of an exception their code raised inside a probe: its type, their own line, and its
message only when the grader can write that message itself.

A probe runs the student's code on the check's hidden inputs, so the exception's text is the student's to choose:
`raise ValueError(f"{x.tolist()}")`, or the same values spelled out in words ("one point two five"). No scrub of
such text is safe. So the message is shown only when it is one of a fixed set of torch's shape and dtype errors
(`TEMPLATES`), and then it is written again here from what the pattern allows: sizes, dimension indices and dtype
names, never a word of the original. A size is shown only when it is one the grader can account for (a size of a
tensor it sent in this probe, a product of such sizes, an integer it sent, or a small dimension index); any other
number is shown as "?". Every other message is withheld with a fixed sentence (`WITHHELD`). The exception's type is
shown when it is one of Python's or torch's own (`KNOWN_TYPES`); a class the student named is not.

    shown_message("mat1 and mat2 shapes cannot be multiplied (15x24 and 16x32)", sizes_of(values))
    -> "mat1 and mat2 shapes cannot be multiplied (15x24 and 16x32)"   (when the probe sent a [3, 5, 24] tensor ...)
    shown_message("one point two five", ...) -> WITHHELD
"""

import builtins
import math
import re

import torch

WITHHELD = "（异常信息不显示：它可能含有检查用的隐藏输入）"
UNKNOWN_TYPE = "一个自定义的异常"  # shown instead of a class name the student chose (the name could spell values)

KNOWN_TYPES = frozenset(
    [name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)]
    + ["OutOfMemoryError", "LinAlgError", "_LinAlgError", "AcceleratorError", "Timeout", "ShapeMismatch",
       "NotDefined"])

DTYPE_NAMES = frozenset({
    "Float", "Double", "Half", "BFloat16", "Long", "Int", "Short", "Char", "Byte", "Bool", "ComplexFloat",
    "ComplexDouble", "float", "double", "c10::Half", "c10::BFloat16", "long int", "int", "short int", "signed char",
    "unsigned char", "bool", "c10::complex<float>", "c10::complex<double>", "long", "short",
})
MAX_DIM_INDEX = 16  # a tensor has at most this many dimensions (the wire's cap): indices -16..16 are not data

_N = r"-?\d{1,12}"  # a size
_T = r"long int|short int|signed char|unsigned char|c10::complex<(?:float|double)>|[A-Za-z0-9_:]{1,20}"  # a dtype
_S = r"[-\d, ]{0,200}"  # the inside of a shape's brackets

# (pattern matched against the whole message, the grader's own text with the groups filled in). A group's name
# says its kind: n a size, d a dimension index, t a dtype name, s a shape, w one of the words the pattern lists.
TEMPLATES = [(re.compile(pattern), text) for pattern, text in [
    (rf"mat1 and mat2 shapes cannot be multiplied \((?P<n1>{_N})x(?P<n2>{_N}) and (?P<n3>{_N})x(?P<n4>{_N})\)",
     "mat1 and mat2 shapes cannot be multiplied ({n1}x{n2} and {n3}x{n4})"),
    (rf"The size of tensor a \((?P<n1>{_N})\) must match the size of tensor b \((?P<n2>{_N})\) at non-singleton "
     rf"dimension (?P<d1>{_N})",
     "The size of tensor a ({n1}) must match the size of tensor b ({n2}) at non-singleton dimension {d1}"),
    (rf"The expanded size of the tensor \((?P<n1>{_N})\) must match the existing size \((?P<n2>{_N})\) at "
     rf"non-singleton dimension (?P<d1>{_N})\.  Target sizes: \[(?P<s1>{_S})\]\.  Tensor sizes: \[(?P<s2>{_S})\]",
     "The expanded size of the tensor ({n1}) must match the existing size ({n2}) at non-singleton dimension {d1}.  "
     "Target sizes: [{s1}].  Tensor sizes: [{s2}]"),
    (rf"expected (?P<w1>m1 and m2|mat1 and mat2) to have the same dtype, but got: (?P<t1>{_T}) != (?P<t2>{_T})",
     "expected {w1} to have the same dtype, but got: {t1} != {t2}"),
    (rf"(?P<w1>mat1 and mat2|self and mat2|self and mat1|mat1 and self|self and other|input and weight) must have "
     rf"the same dtype, but got (?P<t1>{_T}) and (?P<t2>{_T})",
     "{w1} must have the same dtype, but got {t1} and {t2}"),
    (rf"expected scalar type (?P<t1>{_T}) but found (?P<t2>{_T})", "expected scalar type {t1} but found {t2}"),
    (rf"Found dtype (?P<t1>{_T}) but expected (?P<t2>{_T})", "Found dtype {t1} but expected {t2}"),
    (rf"shape '\[(?P<s1>{_S})\]' is invalid for input of size (?P<n1>{_N})",
     "shape '[{s1}]' is invalid for input of size {n1}"),
    (rf"Dimension out of range \(expected to be in range of \[(?P<d1>{_N}), (?P<d2>{_N})\], but got (?P<d3>{_N})\)",
     "Dimension out of range (expected to be in range of [{d1}, {d2}], but got {d3})"),
    (rf"Sizes of tensors must match except in dimension (?P<d1>{_N})\. Expected size (?P<n1>{_N}) but got size "
     rf"(?P<n2>{_N}) for tensor number (?P<d2>{_N}) in the list\.",
     "Sizes of tensors must match except in dimension {d1}. Expected size {n1} but got size {n2} for tensor number "
     "{d2} in the list."),
    (rf"size mismatch, got input \((?P<n1>{_N})\), mat \((?P<n2>{_N})x(?P<n3>{_N})\), vec \((?P<n4>{_N})\)",
     "size mismatch, got input ({n1}), mat ({n2}x{n3}), vec ({n4})"),
    (rf"Given normalized_shape=\[(?P<s1>{_S})\], expected input with shape \[\*, (?P<s2>{_S})\], but got input of "
     rf"size\[(?P<s3>{_S})\]",
     "Given normalized_shape=[{s1}], expected input with shape [*, {s2}], but got input of size[{s3}]"),
    (rf"Expected size for first two dimensions of (?P<w1>batch1|batch2) tensor to be: \[(?P<s1>{_S})\] but got: "
     rf"\[(?P<s2>{_S})\]\.",
     "Expected size for first two dimensions of {w1} tensor to be: [{s1}] but got: [{s2}]."),
    (rf"stack expects each tensor to be equal size, but got \[(?P<s1>{_S})\] at entry (?P<d1>{_N}) and "
     rf"\[(?P<s2>{_S})\] at entry (?P<d2>{_N})",
     "stack expects each tensor to be equal size, but got [{s1}] at entry {d1} and [{s2}] at entry {d2}"),
    (rf"index (?P<n1>{_N}) is out of bounds for dimension (?P<d1>{_N}) with size (?P<n2>{_N})",
     "index {n1} is out of bounds for dimension {d1} with size {n2}"),
    (r"(?P<w1>batch1|batch2|self|mat1|mat2|input) must be a (?P<w2>1D|2D|3D|4D) tensor", "{w1} must be a {w2} tensor"),
    (r"element 0 of tensors does not require grad and does not have a grad_fn",
     "element 0 of tensors does not require grad and does not have a grad_fn"),
    (r"a leaf Variable that requires grad is being used in an in-place operation\.",
     "a leaf Variable that requires grad is being used in an in-place operation."),
    (r"index out of range in self", "index out of range in self"),
    (r"Trying to backward through the graph a second time.*",
     "Trying to backward through the graph a second time (specify retain_graph=True if you need to)"),
]]

_SHAPE_MISMATCH = re.compile(rf"\[(?P<s1>{_S})\] vs \[(?P<s2>{_S})\]")


def known_type(kind: str) -> str:
    """The exception's type name as shown: Python's and torch's own names; UNKNOWN_TYPE for any other."""
    return kind if kind in KNOWN_TYPES else UNKNOWN_TYPE


def sizes_of(*values) -> frozenset[int]:
    """The sizes a shape error may name in a probe that sent `values`: the sizes of every tensor sent, the products of
    adjacent sizes (a flattened batch), the integers sent (a module's configuration), the tensors' numbers of
    dimensions, 1 and 2, and products and exact quotients of two of those (heads x head size, size / heads)."""
    shapes, ints = [], set()
    _collect(values, shapes, ints, 0)
    base = {1, 2} | ints | {len(shape) for shape in shapes}
    for shape in shapes:
        for i in range(len(shape)):
            for j in range(i + 1, len(shape) + 1):
                base.add(math.prod(shape[i:j]))
    found = set(base)
    small = sorted(n for n in base if 0 < n <= 1 << 20)
    if len(small) <= 200:
        for a in small:
            for b in small:
                found.add(a * b)
                if a % b == 0:
                    found.add(a // b)
    return frozenset(found)


def _collect(value, shapes: list, ints: set, depth: int) -> None:
    if depth > 40:
        return
    if isinstance(value, torch.Tensor):
        shapes.append(tuple(int(n) for n in value.shape))
    elif isinstance(value, bool):
        return
    elif isinstance(value, int):
        if 0 <= value <= 1 << 20:
            ints.add(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, shapes, ints, depth + 1)
    elif isinstance(value, dict):
        for v in value.values():
            _collect(v, shapes, ints, depth + 1)


def shown_message(message: str, sizes: frozenset[int]) -> str:
    """The grader's own rendering of `message` when it matches a template, else WITHHELD."""
    text = str(message).strip()
    for pattern, template in TEMPLATES:
        match = pattern.fullmatch(text)
        if match is not None:
            filled = {name: _slot(name, value, sizes) for name, value in match.groupdict().items()}
            if None not in filled.values():
                return template.format(**filled)
    return WITHHELD


def shown_shape_mismatch(message: str) -> str | None:
    """The runner's "[your output's shape] vs [the gradient's shape]" written again, or None (not of that form).
    The output's shape is the student's, as in every check's details."""
    match = _SHAPE_MISMATCH.fullmatch(str(message).strip())
    if match is None:
        return None
    shapes = [_shape(match.group(g), None) for g in ("s1", "s2")]
    return None if None in shapes else f"[{shapes[0]}] vs [{shapes[1]}]"


def _slot(name: str, value: str, sizes: frozenset[int]) -> str | None:
    kind = name[0]
    if kind == "w":  # one of the words the pattern itself lists
        return value
    if kind == "t":
        return value if value in DTYPE_NAMES else None
    if kind == "s":
        return _shape(value, sizes)
    number = int(value)
    if kind == "d":
        return str(number) if -MAX_DIM_INDEX <= number <= MAX_DIM_INDEX else "?"
    return str(number) if number in sizes or number == -1 else "?"


def _shape(text: str, sizes: frozenset[int] | None) -> str | None:
    """The inside of a shape's brackets ("3, 5"), written again; sizes not in `sizes` shown as "?" (None: any)."""
    items = [item.strip() for item in text.split(",")] if text.strip() else []
    if len(items) > MAX_DIM_INDEX or not all(re.fullmatch(r"-?\d{1,12}", item) for item in items):
        return None
    return ", ".join(str(int(item)) if sizes is None or int(item) in sizes or int(item) == -1 else "?"
                     for item in items)
