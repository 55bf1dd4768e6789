"""How a check is written: a pytest test with the `check` mark, fixtures, a probe and one expectation.

    @check("rmsnorm_function", points=2)
    def test_matches_reference(student, x, gamma):
        \"\"\"rms_norm 的输出与参考实现一致（float64，多个 batch 维）\"\"\"
        expect_close(student.call("rms_norm", x, gamma), ref.rms_norm(x, gamma), tol=F64)

The fixtures (`student`, `rng`, `hand_inputs`, ...) come from autograder.checks.plugin. The
docstring's first line tells the student what the check verifies; an expectation that fails
raises CheckFailed with a Chinese message that states shapes and errors, never the hidden inputs
or the expected values.
"""

import math

import pytest
import torch

from autograder.checks.diagnosis import PRECISION
from autograder.checks.probes import CheckFailed, ModuleRun, NotAnswered, StudentCodeFailed, describe_value, module_arg, probe_net_arg

__all__ = [
    "check", "CheckFailed", "NotAnswered", "StudentCodeFailed", "ModuleRun", "module_arg", "probe_net_arg",
    "Tol", "F32", "F64", "F32_ATTN", "HAND", "expect_close", "expect_number", "expect_int", "expect_numbers",
    "expect_module_matches", "expect_weights_loaded", "expect_true", "run_reference", "same_values", "causal_mask",
    "FLOAT32_ROUNDING", "expect_float64_precision", "PRECISION",
]


def check(grade_id: str, points: float):
    """Mark a test as a graded check of part `grade_id` worth `points`."""
    return pytest.mark.autograde_check(grade_id=grade_id, points=points)


class Tol:
    def __init__(self, rtol: float, atol: float):
        self.rtol, self.atol = rtol, atol

    def __repr__(self):
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


F32 = Tol(1e-5, 1e-5)
F32_ATTN = Tol(2e-5, 2e-5)
F64 = Tol(1e-10, 1e-10)
HAND = 5e-4  # relative: four significant figures
# "equal up to float32 rounding": what a right algorithm with float32 internals (LlamaRMSNorm's cast, a float32
# softmax, float32 angles) gives on float64 inputs. Every catalogued variant differs from the reference by far more
# (>= 100x this on the checks' inputs), so a float64 output within it is the right algorithm: it passes every
# check but the part's own precision check (expect_float64_precision), which names the precision.
FLOAT32_ROUNDING = Tol(2e-5, 2e-5)


def expect_true(condition: bool, message: str, details: dict | None = None):
    if not condition:
        raise CheckFailed(message, details)


def expect_close(actual, expected: torch.Tensor, tol: Tol, what: str = "输出", strict: bool = False):
    """`actual` is a tensor of the expected shape and dtype, finite, and within tolerance.

    A float64 output that misses `tol` only at the level of float32 rounding passes (the algorithm is right; the
    precision is judged once per part, by expect_float64_precision), unless `strict`."""
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{what}应该是 torch.Tensor，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    details = {"shape": list(actual.shape), "expected_shape": list(expected.shape), "dtype": str(actual.dtype)}
    if actual.shape != expected.shape:
        raise CheckFailed(f"{what}的形状应该是 {list(expected.shape)}，你的是 {list(actual.shape)}", details)
    if actual.dtype != expected.dtype:
        raise CheckFailed(f"{what}的 dtype 应该是 {expected.dtype}，你的是 {actual.dtype}", details)
    if not actual.dtype.is_floating_point:
        if not torch.equal(actual, expected):
            raise CheckFailed(f"{what}的值不对", details)
        return
    finite = torch.isfinite(actual)
    if not finite.all():
        nan, inf = int(torch.isnan(actual).sum()), int(torch.isinf(actual).sum())
        raise CheckFailed(f"{what}里有 {nan} 个 NaN、{inf} 个 inf", dict(details, nan=nan, inf=inf))
    error = (actual.double() - expected.double()).abs()
    allowed = tol.atol + tol.rtol * expected.double().abs()
    details.update(max_abs_error=float(error.max()) if error.numel() else 0.0, tolerance=repr(tol))
    if (error > allowed).any() and not strict and expected.dtype == torch.float64 and bool(
            (error <= FLOAT32_ROUNDING.atol + FLOAT32_ROUNDING.rtol * expected.double().abs()).all()):
        return  # float32 rounding, not a wrong algorithm
    if (error > allowed).any():
        share = float((error > allowed).double().mean())
        raise CheckFailed(
            f"{what}与参考实现不一致：最大绝对误差 {details['max_abs_error']:.3g}（容限 {tol!r}），"
            f"{share:.0%} 的元素超出容限",
            dict(details, share_outside=share),
        )


def expect_float64_precision(actual, expected: torch.Tensor, what: str = "输出"):
    """The part's precision check: a float64 output equals the float64 reference to float64 precision. One that is
    right only to float32 rounding is named as the precision (PRECISION); any other difference fails without a
    name (the part's other checks name the mistake)."""
    try:
        expect_close(actual, expected, F64, what, strict=True)
    except CheckFailed as failure:
        if isinstance(actual, torch.Tensor) and actual.shape == expected.shape and actual.dtype == torch.float64 \
                and same_values(actual, expected, Tol(FLOAT32_ROUNDING.rtol / 10, FLOAT32_ROUNDING.atol / 10)):
            raise CheckFailed(f"{what}只有 float32 的精度：最大绝对误差 {failure.details.get('max_abs_error', 0):.2g}"
                              f"（float64 容限 {F64!r}）。{PRECISION.explanation}", failure.details,
                              diagnosis=PRECISION.name) from None
        raise CheckFailed(f"{what}与参考实现不一致（float64 精度检查；错在哪里见本题的其他检查）",
                          failure.details) from None


def expect_number(actual, expected: float, what: str, rel: float = HAND):
    """A typed answer: a real number within relative tolerance `rel` (four significant figures)."""
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        raise CheckFailed(f"`{what}` 应该是一个数，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    if not math.isfinite(actual):
        raise CheckFailed(f"`{what}` 不是有限的数（{actual}）")
    error = abs(actual - expected) / max(abs(expected), 1e-300)
    if error > rel:
        # no error figure here: with the typed value it would give the answer away
        precision = "，即 4 位有效数字" if rel == HAND else ""
        raise CheckFailed(f"`{what}` 不对（超出相对误差容限 {rel:g}{precision}）", {"tolerance": rel})


def expect_int(actual, expected: int, what: str):
    if isinstance(actual, bool) or not isinstance(actual, int):
        if isinstance(actual, float) and actual.is_integer():
            actual = int(actual)
        else:
            raise CheckFailed(f"`{what}` 应该是整数，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    if actual != expected:
        raise CheckFailed(f"`{what}` 不对")


def expect_numbers(actual, expected: list[float], what: str, rel: float = HAND):
    """A typed list of numbers, each within relative tolerance."""
    if not isinstance(actual, (list, tuple)):
        raise CheckFailed(f"`{what}` 应该是一个 list，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    if len(actual) != len(expected):
        raise CheckFailed(f"`{what}` 应该有 {len(expected)} 个数，你的有 {len(actual)} 个")
    for i, (a, e) in enumerate(zip(actual, expected)):
        expect_number(a, e, f"{what}[{i}]", rel)


def expect_module_matches(run: ModuleRun, reference: dict, tol: Tol, class_name: str,
                          outputs: str = "输出"):
    """The module loaded the reference weights, and its forward, input gradient and parameter gradients agree.

    `reference` holds "outputs" (a tensor or tuple), "input_grads" (list) and "param_grads" (dict).
    """
    expect_weights_loaded(run, class_name)
    expected_out = reference["outputs"]
    if isinstance(expected_out, tuple):
        if not isinstance(run.outputs, (tuple, list)) or len(run.outputs) != len(expected_out):
            raise CheckFailed(f"`{class_name}.forward` 应该返回 {len(expected_out)} 个值的 tuple，你的返回 "
                              f"{describe_value(run.outputs)}")
        for i, (a, e) in enumerate(zip(run.outputs, expected_out)):
            expect_close(a, e, tol, f"forward 返回的第 {i + 1} 个值")
    else:
        expect_close(run.outputs, expected_out, tol, outputs)
    # the forward is right from here on: a gradient that disagrees is localised as such
    try:
        for i, (a, e) in enumerate(zip(run.input_grads, reference["input_grads"])):
            if a is None:
                raise CheckFailed("输入没有得到梯度：forward 里是否用了 detach、no_grad 或 .data？")
            expect_close(a, e, tol, "输入的梯度")
        for name, expected_grad in reference["param_grads"].items():
            actual = run.param_grads.get(name)
            if actual is None:
                raise CheckFailed(f"参数 `{name}` 没有得到梯度：它是否参与了 forward？", {"parameter": name})
            expect_close(actual, expected_grad, tol, f"参数 `{name}` 的梯度")
    except CheckFailed as failure:
        raise CheckFailed(f"forward 的输出正确，但反向传播不对：{failure.message}"
                          "（是否在 forward 里用了 .data、.detach()、.item() 或 torch.no_grad()？）",
                          dict(failure.details, forward_correct=True)) from None


def expect_weights_loaded(run: ModuleRun, class_name: str):
    if run.load_error:
        shapes = "，".join(f"{name} {shape}" for name, shape in sorted(run.param_shapes.items()))
        raise CheckFailed(f"无法把权重加载进你的 `{class_name}`：参数的形状与约定不一致（你的参数：{shapes}）。"
                          "请对照题目里的参数名和形状", {"param_shapes": run.param_shapes})
    if run.unexpected_keys or run.missing_keys:
        parts = []  # load_state_dict's view: "missing" keys are the module's own, absent from the weights
        if run.missing_keys:
            parts.append(f"你的模块有约定之外的参数 {sorted(run.missing_keys)}")
        if run.unexpected_keys:
            parts.append(f"你的模块缺少约定的参数 {sorted(run.unexpected_keys)}")
        raise CheckFailed(
            f"`{class_name}` 的参数名与约定不一致：{'；'.join(parts)}。参数名是固定的，评分时按名字加载权重",
            {"missing": sorted(run.missing_keys), "unexpected": sorted(run.unexpected_keys)},
        )


def run_reference(module: torch.nn.Module, args=(), kwargs=None, grad_outputs=None, requires_grad=()) -> dict:
    """What the reference module gives for the probe the student's module gets: outputs and gradients."""
    args = list(args)
    for i in requires_grad:
        args[i] = args[i].detach().clone().requires_grad_(True)
    module.zero_grad(set_to_none=True)
    outputs = module(*args, **(kwargs or {}))
    produced = outputs if isinstance(outputs, tuple) else (outputs,)
    if grad_outputs is not None:
        pairs = [(o, g) for o, g in zip(produced, grad_outputs) if g is not None]
        torch.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
    detach = lambda t: t.detach() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return {
        "outputs": tuple(detach(o) for o in outputs) if isinstance(outputs, tuple) else detach(outputs),
        "input_grads": [args[i].grad for i in requires_grad],
        "param_grads": {name: p.grad for name, p in module.named_parameters()} if grad_outputs is not None else {},
    }


def causal_mask(seq_len: int, dtype=torch.float32) -> torch.Tensor:
    """The pinned causal mask: additive, -inf above the diagonal."""
    return torch.triu(torch.full((seq_len, seq_len), float("-inf"), dtype=dtype), diagonal=1)


def same_values(actual, candidate: torch.Tensor, tol: Tol) -> bool:
    """`actual` equals a known-wrong `candidate` within ten times `tol`, NaN and inf where the candidate has them.

    Used to name a mistake: the student's output is compared with what a catalogued variant gives.
    """
    if not isinstance(actual, torch.Tensor) or actual.shape != candidate.shape or not actual.dtype.is_floating_point:
        return False
    a, c = actual.detach().double(), candidate.detach().double()
    if not torch.equal(torch.isnan(a), torch.isnan(c)):
        return False
    keep = ~torch.isnan(c)
    a, c = a[keep], c[keep]
    if not torch.equal(torch.isinf(a), torch.isinf(c)) or not torch.equal(a[torch.isinf(c)], c[torch.isinf(c)]):
        return False
    finite = torch.isfinite(c)
    return bool(((a[finite] - c[finite]).abs() <= 10 * (tol.atol + tol.rtol * c[finite].abs())).all())
