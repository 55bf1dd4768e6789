"""What a check may ask of the student's code, and the failures it gets back as Chinese messages.

A check never touches the student's objects: it sends plain tensors and numbers through the
sandbox and receives plain data (autograder.running.sandbox.wire), already checked for size and dtype.
"""

import re
from dataclasses import dataclass, field

import torch

from autograder.checks.exception_text import WITHHELD, known_type, shown_message, shown_shape_mismatch, sizes_of
from autograder.running.sandbox.process import SandboxError
from autograder.running.sandbox.wire import Unsupported
from autograder.intake.validate import OddValue


# the grading process ran out of its own memory (its limit), on what the submission returned
GRADER_OUT_OF_MEMORY = "评分程序的内存不够用了（你的代码返回的数据太大？）"

class CheckFailed(Exception):
    """A check did not pass. `message` is for the student (Chinese); `details` are plain facts."""

    def __init__(self, message: str, details: dict | None = None, diagnosis: str | None = None):
        super().__init__(message)
        self.message = message
        self.details = details or {}
        self.diagnosis = diagnosis


class NotAnswered(CheckFailed):
    """The answer is missing: the name is not defined, or it still raises NotImplementedError."""


class StudentCodeFailed(CheckFailed):
    """The student's code raised, hung, or took the process down."""


@dataclass
class ModuleRun:
    """What one module probe brought back."""

    param_shapes: dict[str, list[int]]
    missing_keys: list[str]
    unexpected_keys: list[str]
    load_error: str | None
    state: dict[str, torch.Tensor] | None = None
    outputs: object = None
    input_grads: list = field(default_factory=list)
    param_grads: dict = field(default_factory=dict)


def module_arg(class_name: str, *init_args, state_dict=None, dtype=None, **init_kwargs) -> dict:
    """An argument that stands for the student's `class_name(*init_args)` loaded with `state_dict`.

    The weights must fit the module's parameters exactly. (No rule about what the student's code may call
    is enforced inside its process: it could undo it. Checks grade what the code computes.)
    """
    return {"$module": {"class": class_name, "init_args": list(init_args), "init_kwargs": init_kwargs,
                        "state_dict": state_dict, "dtype": _dtype_name(dtype)}}


def probe_net_arg(state_dict: dict, d_model: int, num_layers: int, dtype=torch.float64) -> dict:
    """An argument that stands for a small tanh MLP with a `layers` ModuleList and the given weights."""
    return {"$probe_net": {"d_model": d_model, "num_layers": num_layers, "dtype": _dtype_name(dtype),
                           "state_dict": state_dict}}


def _dtype_name(dtype):
    return None if dtype is None else str(dtype).removeprefix("torch.")


class StudentCode:
    """The probes a check can send to the notebook running in the sandbox."""

    def __init__(self, run, student_id: str, assignment_id: str, seed: int, probe_timeout: float):
        self._run = run
        self._broken: dict[str, StudentCodeFailed] = {}  # names whose probe hung or killed the sandbox
        self.student_id = student_id
        self.assignment_id = assignment_id
        self.seed = seed
        self.probe_timeout = probe_timeout

    def call(self, name: str, *args, **kwargs):
        """`name(*args, **kwargs)` in the student's notebook; returns the (plain) result."""
        return self._ask({"op": "call", "name": name}, {"args": list(args), "kwargs": kwargs}, f"{name}(...)")

    def call_repeatedly(self, times: int, name: str, *args, **kwargs) -> tuple:
        """`name(*args)` called `times` times on the same argument objects (e.g. the same model): every result."""
        return self._ask({"op": "call", "name": name, "repeat": times}, {"args": list(args), "kwargs": kwargs},
                         f"{name}(...)")

    def variable(self, name: str):
        return self._ask({"op": "variable", "name": name}, None, name)

    def module(self, class_name: str, init_args=(), init_kwargs=None, *, state_dict=None, dtype=None,
               method=None, args=(), kwargs=None, grad_outputs=None, requires_grad=(),
               return_state=False) -> ModuleRun:
        """Build the student's module, load `state_dict`, run `method(*args)` and backward with `grad_outputs`.
        `method` may be a sub-module's, by attribute names ("attn.forward"): the parameters are still the module's."""
        header = {"op": "module", "class": class_name, "dtype": _dtype_name(dtype), "method": method,
                  "return_state": return_state}
        values = {"init_args": list(init_args), "init_kwargs": init_kwargs or {}, "state_dict": state_dict,
                  "args": list(args), "kwargs": kwargs or {}, "grad_outputs": grad_outputs,
                  "requires_grad": list(requires_grad)}
        result = self._ask(header, values, f"{class_name}(...)")
        if not isinstance(result, dict) or "load" not in result:
            raise StudentCodeFailed(f"`{class_name}` 的运行结果无法读取")
        load = result["load"]
        return ModuleRun(
            param_shapes=result.get("param_shapes", {}), missing_keys=load.get("missing", []),
            unexpected_keys=load.get("unexpected", []), load_error=load.get("error"), state=result.get("state"),
            outputs=result.get("outputs"), input_grads=result.get("input_grads", []),
            param_grads=result.get("param_grads", {}),
        )

    def _ask(self, header: dict, values, what: str):
        name = header.get("name") or header.get("class")
        if name in self._broken:  # it hung or took the process down before: don't pay for it again
            raise self._broken[name]
        try:
            reply = self._run.request(header, values, self.probe_timeout)
        except SandboxError as exc:
            if exc.kind == "budget" or getattr(self._run, "exhausted", False):
                seconds = self._run.limits.submission_timeout
                raise StudentCodeFailed(f"超时：这份提交用完了 {seconds:g} 秒的总时间预算，没有时间再运行 `{what}`",
                                        {"submission_timeout_seconds": seconds}) from None
            if exc.kind == "memory" or getattr(self._run, "memory_exceeded", False):
                raise StudentCodeFailed(f"内存超出限制：这份提交的所有进程加起来超出了内存预算，已被终止，"
                                        f"没有再运行 `{what}`", {"memory_exceeded": True}) from None
            if exc.kind == "grader_memory":  # the grading process's own limit, not the submission's budget
                failure = StudentCodeFailed(f"{GRADER_OUT_OF_MEMORY}，没能运行完 `{what}`，这一项记为未通过",
                                            {"grader_out_of_memory": True})
            elif exc.kind == "timeout":
                failure = StudentCodeFailed(f"运行 `{what}` 超时（超过 {self.probe_timeout:g} 秒），可能有死循环",
                                            {"timeout_seconds": self.probe_timeout})
            elif exc.kind == "protocol":  # a reply too large or not of the protocol's form: nothing exited
                failure = StudentCodeFailed(f"`{what}` 的结果没能取回：沙箱发回的回复超出了评分程序接收的大小或格式"
                                            f"（{exc}），例如值太大；这一项记为未通过", {"reply_refused": True})
            else:
                failure = StudentCodeFailed(f"运行 `{what}` 时你的代码让进程退出或崩溃了（{exc}）")
            self._broken[name] = failure
            raise failure from None
        if reply.ok:
            return reply.result
        error = reply.error or {}
        kind, message = error.get("type", "Error"), error.get("message", "")
        if kind == "NotDefined":
            # the name asked for (a message is the student's text: it names nothing but what the grader asked)
            missing = message if message in _names_asked(header, values) else name
            raise NotAnswered(f"未找到该题的答案：笔记本里没有定义 `{missing}`", {"missing": missing})
        if kind == "ShapeMismatch":
            shapes = shown_shape_mismatch(message)
            if shapes is not None:
                raise StudentCodeFailed(f"`{what}` 的输出形状不对（你的 vs 应该的：{shapes}）", {"shapes": shapes})
        if kind == "NotImplementedError":
            raise NotAnswered(f"这一题还没有作答：`{name}` 仍然是 raise NotImplementedError()")
        if kind == "Timeout":
            self._broken[name] = StudentCodeFailed(f"运行 `{what}` 超时（超过 {self.probe_timeout:g} 秒），可能有死循环",
                                                   {"timeout_seconds": self.probe_timeout})
            raise self._broken[name]
        # the message may carry the hidden inputs (f"x={x.tolist()}", or spelled in words): shown only when it is
        # one of torch's shape or dtype errors, written again by the grader (autograder.checks.exception_text)
        where = self._where(error.get("traceback", ""))
        shown_kind = known_type(kind)
        text = shown_message(message, sizes_of(values)) if message else ""
        detail = {"exception": shown_kind, "exception_message": text}
        if where:
            detail["where"] = where
        raise StudentCodeFailed(f"运行 `{what}` 时你的代码抛出了 {shown_kind}{'（' + where + '）' if where else ''}"
                                f"{'：' + text if text and text != WITHHELD else text}", detail)

    def _where(self, trace: str) -> str:
        """"第 N 个单元格第 M 行：<the line>" for the last frame of the student's own cells in a traceback."""
        frames = _CELL_FRAME.findall(trace or "")
        if not frames:
            return ""
        cell, line = (int(n) for n in frames[-1][:2])
        source = next((c.source for c in getattr(self._run, "cells", []) if c.index == cell), None)
        lines = source.split("\n") if source is not None else []
        if not 0 < line <= len(lines):  # a traceback is the student's text too: only a line of their own cells
            return ""
        code = lines[line - 1].strip()[:80]
        return f"第 {cell + 1} 个单元格第 {line} 行" + (f"：{code}" if code else "")


_CELL_FRAME = re.compile(r'File "<cell (\d+)>", line (\d+)')


def _names_asked(header: dict, values) -> set:
    """The names a probe asked the sandbox for: the function or class, and the classes of its module arguments."""
    names = {header.get("name"), header.get("class")}
    stack = [values]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            spec = value.get("$module")
            if isinstance(spec, dict):
                names.add(spec.get("class"))
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return {n for n in names if isinstance(n, str)}


# The type names of values the wire cannot carry that a report may show (the name is the student's code's to choose:
# a class named after the hidden inputs is "一个自定义类型的对象").
KNOWN_OTHER_TYPES = frozenset({
    "numpy.ndarray", "numpy.float64", "numpy.float32", "numpy.float16", "numpy.int64", "numpy.int32", "numpy.bool_",
    "numpy.bool", "builtins.complex", "builtins.set", "builtins.frozenset", "builtins.bytes", "builtins.bytearray",
    "builtins.range", "builtins.function", "builtins.builtin_function_or_method", "builtins.generator",
    "builtins.type", "builtins.module", "builtins.map", "builtins.zip", "builtins.filter", "builtins.object",
    "builtins.method", "builtins.ellipsis", "builtins.NotImplementedType", "builtins.slice",
    "torch.nn.parameter.Parameter", "torch.Size", "torch.device", "torch.Generator", "fractions.Fraction",
    "decimal.Decimal", "collections.OrderedDict", "collections.deque", "collections.Counter", "collections.defaultdict",
    "torch.Tensor[torch.complex64]", "torch.Tensor[torch.complex128]", "torch.Tensor[torch.complex32]",
    "torch.Tensor[torch.uint16]", "torch.Tensor[torch.uint32]", "torch.Tensor[torch.uint64]",
    "torch.Tensor[torch.float8_e4m3fn]", "torch.Tensor[torch.float8_e5m2]",
})
UNKNOWN_OTHER_TYPE = "一个自定义类型的对象"


def describe_value(value) -> str:
    if isinstance(value, OddValue):  # the grader's own words
        return value.type_name
    if isinstance(value, Unsupported):
        return value.type_name if value.type_name in KNOWN_OTHER_TYPES else UNKNOWN_OTHER_TYPE
    return type(value).__name__
