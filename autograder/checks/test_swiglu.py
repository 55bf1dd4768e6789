"""Checks of the swiglu assignment: swish, default_d_ff and FeedForward_SwiGLU, ffn_param_counts.

Inputs: swish sees negative and positive values, including large magnitudes (float32 up to |a| = 100,
where exp(a) overflows); the module gets random non-unit weights with W_gate != W_up, batch >= 2
with different rows, and d_model != d_ff with d_ff not the default; the d_model values for d_ff and
the parameter counts (fixed ones such as 64, 100, 512, 768, 4096 plus per-student random ones) are
chosen so that every catalogued slip (4·d_model, no rounding, rounding down or to the nearest
multiple, biases counted or forgotten) gives a different integer on at least one of them. The
messages never name the d_model values: "the k-th d_model".

When a comparison fails, the same inputs go through known-wrong variants (written here, from the
formulas); a match names the mistake in the message and in `diagnosis`.
"""

import math

import torch
import torch.nn.functional as F

from autograder.checks import (
    F32, F64, CheckFailed, check, expect_close, expect_int, expect_module_matches, expect_true,
    expect_weights_loaded, run_reference,
)
from autograder.probes import describe_value
from solutions import swiglu as ref

WEIGHTS = ("W_gate.weight", "W_up.weight", "W_down.weight")


# --- helpers --------------------------------------------------------------------------------------


def _is_float_tensor(value, shape) -> bool:
    return isinstance(value, torch.Tensor) and value.shape == shape and value.dtype.is_floating_point


def _close(actual, expected: torch.Tensor, tol) -> bool:
    if not _is_float_tensor(actual, expected.shape):
        return False
    actual, expected = actual.double(), expected.double()
    allowed = tol.atol + tol.rtol * expected.abs()
    return bool(torch.isfinite(actual).all() and ((actual - expected).abs() <= allowed).all())


def _matches_slip(message: str, text: str) -> str:
    return f"{message}。你的结果与一个常见错误一致：{text}"


def _named(exc: CheckFailed, actual, variants: dict, tol) -> CheckFailed:
    """`exc`, with the catalogued mistake `actual` matches (if any) named in the message and the diagnosis."""
    for key, (text, value) in variants.items():
        if _close(actual, value, tol):
            return CheckFailed(_matches_slip(exc.message, text), exc.details, diagnosis=key)
    return exc


def _expect_close_or_name(actual, expected, tol, variants, what="输出"):
    try:
        expect_close(actual, expected, tol, what)
    except CheckFailed as exc:
        raise _named(exc, actual, variants, tol) from None


def _swish_variants(a: torch.Tensor) -> dict:
    a = a.double()
    return {
        "relu_instead_of_swish": ("用了 ReLU，而不是 swish(a) = a·sigmoid(a)", torch.relu(a)),
        "gelu_instead_of_swish": ("用了 GELU，而不是 swish(a) = a·sigmoid(a)", F.gelu(a)),
        "gelu_tanh_instead_of_swish": ("用了 GELU（tanh 近似），而不是 swish(a) = a·sigmoid(a)",
                                       F.gelu(a, approximate="tanh")),
        "sigmoid_instead_of_swish": ("只算了 sigmoid(a)，少乘了 a", torch.sigmoid(a)),
    }


def _expect_swish(actual, a: torch.Tensor, tol):
    try:
        _expect_close_or_name(actual, ref.swish(a), tol, _swish_variants(a))
    except CheckFailed as exc:
        if _is_float_tensor(actual, a.shape) and not torch.isfinite(actual).all():
            raise CheckFailed(f"{exc.message}。绝对值很大的输入上算出了 NaN 或 inf：直接算 exp(a) 会溢出，"
                              f"用 torch.sigmoid 计算更稳定", exc.details, diagnosis="swish_overflow") from None
        raise


def _ffn_variants(x: torch.Tensor, state: dict) -> dict:
    """The module's output under the catalogued slips, computed from the formula with the given weights."""
    x = x.double()
    w_gate, w_up, w_down = (state[k].double() for k in WEIGHTS)
    gate, up = x @ w_gate.T, x @ w_up.T
    down = lambda h: h @ w_down.T  # noqa: E731
    silu = lambda a: a * torch.sigmoid(a)  # noqa: E731
    return {
        "relu_gate": ("门控通道用了 ReLU，而不是 swish", down(torch.relu(gate) * up)),
        "gelu_gate": ("门控通道用了 GELU，而不是 swish", down(F.gelu(gate) * up)),
        "sigmoid_gate": ("门控通道用了 sigmoid（原始 GLU 的门），而不是 swish", down(torch.sigmoid(gate) * up)),
        "no_activation": ("门控通道没有经过 swish", down(gate * up)),
        "gate_up_swapped": ("swish 用在了 W_up 上（门控通道和信息通道弄反了），应该用在 W_gate 上",
                            down(gate * silu(up))),
        "activation_after_product": ("swish 用在了两路相乘之后，应该只作用在 W_gate x 上",
                                     down(silu(gate * up))),
        "plus_instead_of_times": ("两路是相加，而不是逐元素相乘", down(silu(gate) + up)),
    }


def _weights(rng, d_model: int, d_ff: int, dtype) -> dict:
    """Random non-unit weights; pre-activations of order 1, where swish, ReLU and GELU differ."""
    def draw(rows, cols, scale):
        return scale / math.sqrt(cols) * torch.randn(rows, cols, generator=rng, dtype=dtype)
    return {"W_gate.weight": draw(d_ff, d_model, 1.5), "W_up.weight": draw(d_ff, d_model, 1.0),
            "W_down.weight": draw(d_model, d_ff, 1.0)}


def _reference(d_model: int, d_ff: int, state: dict, dtype) -> torch.nn.Module:
    module = ref.FeedForward_SwiGLU(d_model, d_ff).to(dtype)
    module.load_state_dict(state)
    return module


def _d_model_not_multiple_of_32(rng, low: int, high: int) -> int:
    """A d_model in [low, high) where 4·d_model, int(8/3·d_model) and its rounding down all miss the default d_ff."""
    while True:
        d = int(torch.randint(low, high, (1,), generator=rng))
        if d % 32:
            return d


D_FF_TEXTS = {
    "d_ff_4x": "默认 d_ff 用了 4·d_model（那是 ReLU FFN 的隐藏维度）",
    "d_ff_no_rounding": "默认 d_ff 没有向上取整到 256 的倍数",
    "d_ff_round_down": "默认 d_ff 向下取整到了 256 的倍数，应该向上取整",
    "d_ff_round_nearest": "默认 d_ff 取整到了最近的 256 的倍数，应该向上取整",
}


def _wrong_d_ff(d: int) -> dict:
    """The default d_ff under each slip of D_FF_TEXTS."""
    base = 8 * d // 3
    return {"d_ff_4x": 4 * d, "d_ff_no_rounding": base, "d_ff_round_down": max(base // 256 * 256, d),
            "d_ff_round_nearest": max(round(base / 256) * 256, d)}


def _expect_ints_or_name(actual: list, expected: list[int], what: str, variants: list[dict], texts: dict):
    """Each actual[i] is the int expected[i]; on failure, name the slip whose values match them all."""
    names = [f"{what}（第 {i + 1} 个 d_model）" for i in range(len(actual))]
    try:
        for a, e, name in zip(actual, expected, names):
            expect_int(a, e, name)
    except CheckFailed as exc:
        for key, text in texts.items():
            if all(isinstance(a, (int, float)) and not isinstance(a, bool) and a == v[key]
                   for a, v in zip(actual, variants)):
                raise CheckFailed(_matches_slip(exc.message, text), exc.details, diagnosis=key) from None
        raise


# --- swish ----------------------------------------------------------------------------------------


@check("swish", points=1)
def test_swish_float64(student, rng):
    """swish 在 float64、正负数和绝对值较大的输入上与参考实现一致，输出仍是 float64"""
    a = 3 * torch.randn(3, 4, 6, generator=rng, dtype=torch.float64)
    big = 10 + 50 * torch.rand(4, 6, generator=rng, dtype=torch.float64)
    a[1] = torch.where(torch.rand(4, 6, generator=rng) < 0.5, -big, big)
    _expect_swish(student.call("swish", a), a, F64)


@check("swish", points=1)
def test_swish_float32(student, rng):
    """swish 在 float32 下（包括绝对值很大、exp 会溢出的输入）与参考实现一致，输出仍是 float32"""
    a = 4 * torch.randn(2, 5, 9, generator=rng)
    big = 20 + 80 * torch.rand(5, 9, generator=rng)
    big[0, :2] = 90 + 10 * torch.rand(2, generator=rng)  # exp(a) overflows float32 above 88.7: always test both signs
    sign = torch.where(torch.rand(5, 9, generator=rng) < 0.5, -1.0, 1.0)
    sign[0, :2] = torch.tensor([1.0, -1.0])
    a[1] = sign * big
    _expect_swish(student.call("swish", a), a, F32)


# --- swiglu_module --------------------------------------------------------------------------------


@check("swiglu_module", points=1)
def test_default_d_ff(student, rng):
    """default_d_ff 对多个 d_model 返回正确的整数（向上取整到 256 的倍数，再与 d_model 取较大者）"""
    ds = [1, 64, 100, 512, 4096, _d_model_not_multiple_of_32(rng, 2, 96), _d_model_not_multiple_of_32(rng, 97, 3000)]
    actual = [student.call("default_d_ff", d) for d in ds]
    _expect_ints_or_name(actual, [ref.default_d_ff(d) for d in ds], "default_d_ff(d_model)",
                         [_wrong_d_ff(d) for d in ds], D_FF_TEXTS)


@check("swiglu_module", points=0.5)
def test_module_parameters_explicit_d_ff(student, rng):
    """FeedForward_SwiGLU(d_model, d_ff=...) 恰好有 W_gate、W_up、W_down 三个权重，没有 bias，形状正确"""
    d_model = int(torch.randint(8, 24, (1,), generator=rng))
    d_ff = int(torch.randint(30, 90, (1,), generator=rng))
    run = student.module("FeedForward_SwiGLU", (d_model,), {"d_ff": d_ff})
    shapes = run.param_shapes
    extra, missing = sorted(set(shapes) - set(WEIGHTS)), sorted(set(WEIGHTS) - set(shapes))
    expect_true(not extra, f"FeedForward_SwiGLU 有约定之外的参数 {extra}"
                + ("：三个 nn.Linear 都应该是 bias=False" if any(k.endswith("bias") for k in extra) else ""),
                {"extra": extra})
    expect_true(not missing, f"FeedForward_SwiGLU 缺少约定的参数 {missing}（参数名是固定的：W_gate、W_up、W_down）",
                {"missing": missing})
    expected = dict(zip(WEIGHTS, ([d_ff, d_model], [d_ff, d_model], [d_model, d_ff])))
    for name, symbolic in (("W_gate.weight", "[d_ff, d_model]"), ("W_up.weight", "[d_ff, d_model]"),
                           ("W_down.weight", "[d_model, d_ff]")):
        expect_true(shapes[name] == expected[name],
                    f"`{name}` 的形状应该是 {symbolic}（nn.Linear(in, out) 的权重形状是 [out, in]），"
                    f"给了 d_ff 时应该原样使用它", {"parameter": name})


@check("swiglu_module", points=0.5)
def test_module_default_d_ff(student, rng):
    """FeedForward_SwiGLU(d_model) 不给 d_ff 时，三个权重的形状用默认的 d_ff"""
    d_models = (_d_model_not_multiple_of_32(rng, 33, 96), _d_model_not_multiple_of_32(rng, 97, 400))
    for i, d_model in enumerate(d_models):
        run = student.module("FeedForward_SwiGLU", (d_model,))
        d_ff = ref.default_d_ff(d_model)
        expected = dict(zip(WEIGHTS, ([d_ff, d_model], [d_ff, d_model], [d_model, d_ff])))
        actual = {k: run.param_shapes.get(k) for k in WEIGHTS}
        if actual != expected:
            message = (f"不给 d_ff 时（第 {i + 1} 个 d_model），W_gate、W_up、W_down 的权重形状没有用默认的 "
                       f"d_ff = default_d_ff(d_model)")
            for key, value in _wrong_d_ff(d_model).items():
                if value != d_ff and actual["W_gate.weight"] == [value, d_model]:
                    raise CheckFailed(_matches_slip(message, D_FF_TEXTS[key]), {"param_shapes": run.param_shapes},
                                      diagnosis=key)
            raise CheckFailed(message, {"param_shapes": run.param_shapes})


@check("swiglu_module", points=2)
def test_module_forward_backward_float64(student, rng):
    """加载给定权重后，forward 输出、输入的梯度和三个权重的梯度都与参考实现一致（float64，带 batch 维）"""
    d_model, d_ff = 12, 40
    state = _weights(rng, d_model, d_ff, torch.float64)
    x = torch.randn(3, 5, d_model, generator=rng, dtype=torch.float64)
    grad = torch.randn(3, 5, d_model, generator=rng, dtype=torch.float64)
    expected = run_reference(_reference(d_model, d_ff, state, torch.float64), (x,), grad_outputs=[grad],
                             requires_grad=[0])
    run = student.module("FeedForward_SwiGLU", (d_model, d_ff), state_dict=state, dtype=torch.float64,
                         method="forward", args=(x,), grad_outputs=[grad], requires_grad=[0])
    try:
        expect_module_matches(run, expected, F64, "FeedForward_SwiGLU")
    except CheckFailed as exc:
        raise _named(exc, run.outputs, _ffn_variants(x, state), F64) from None


@check("swiglu_module", points=1)
def test_module_forward_float32(student, rng):
    """FeedForward_SwiGLU 在 float32、多个 batch 维的输入上 forward 与参考实现一致"""
    d_model, d_ff = 16, 56
    state = _weights(rng, d_model, d_ff, torch.float32)
    x = torch.randn(2, 3, 5, d_model, generator=rng)
    run = student.module("FeedForward_SwiGLU", (d_model, d_ff), state_dict=state, method="forward", args=(x,))
    expect_weights_loaded(run, "FeedForward_SwiGLU")
    with torch.no_grad():
        expected = _reference(d_model, d_ff, state, torch.float32)(x)
    _expect_close_or_name(run.outputs, expected, F32, _ffn_variants(x, state))


# --- swiglu_params --------------------------------------------------------------------------------


def _param_counts(student, d_model: int):
    counts = student.call("ffn_param_counts", d_model)
    if not isinstance(counts, (tuple, list)) or len(counts) != 2:
        raise CheckFailed(f"ffn_param_counts 应该返回长度为 2 的 tuple (relu_ffn_params, swiglu_params)，"
                          f"你的返回 {describe_value(counts)}"
                          + (f"（长度 {len(counts)}）" if isinstance(counts, (tuple, list)) else ""),
                          {"type": describe_value(counts)})
    return counts


def _relu_variants(d: int) -> dict:
    weights = 2 * d * 4 * d
    return {"relu_no_bias": weights, "relu_bias_4d_twice": weights + 8 * d, "relu_fc1_bias_only": weights + 4 * d}


RELU_TEXTS = {
    "relu_no_bias": "没有算两层的 bias（nn.Linear 默认带 bias）",
    "relu_bias_4d_twice": "两层的 bias 都按 4·d_model 个算了：fc2 的 bias 只有 d_model 个",
    "relu_fc1_bias_only": "只算了 fc1 的 bias，漏了 fc2 的 bias",
}


def _swiglu_variants(d: int) -> dict:
    d_ff = ref.default_d_ff(d)
    return {
        "swiglu_with_bias": 3 * d * d_ff + 2 * d_ff + d,
        "swiglu_two_matrices": 2 * d * d_ff,
        **{key: 3 * d * value for key, value in _wrong_d_ff(d).items()},
    }


SWIGLU_TEXTS = {
    "swiglu_with_bias": "给 SwiGLU 的三个矩阵算了 bias：它们都是 bias=False",
    "swiglu_two_matrices": "只算了两个矩阵：SwiGLU 有 W_gate、W_up、W_down 三个",
    **D_FF_TEXTS,
}


@check("swiglu_params", points=1)
def test_param_counts_relu(student, rng):
    """ffn_param_counts 返回 (int, int)，第一项 relu_ffn_params 对多个 d_model 都正确（两层都带 bias）"""
    ds = [64, 512, 4096, int(torch.randint(10, 5000, (1,), generator=rng))]
    actual = [_param_counts(student, d)[0] for d in ds]
    _expect_ints_or_name(actual, [ref.ffn_param_counts(d)[0] for d in ds], "relu_ffn_params",
                         [_relu_variants(d) for d in ds], RELU_TEXTS)


@check("swiglu_params", points=1)
def test_param_counts_swiglu_exact_multiple(student, rng):
    """第二项 swiglu_params 在 8/3·d_model 恰好是 256 的倍数（不需要取整）的 d_model 上正确：三个矩阵，没有 bias"""
    ds = [768, 96 * int(torch.randint(1, 40, (1,), generator=rng))]
    actual = [_param_counts(student, d)[1] for d in ds]
    _expect_ints_or_name(actual, [ref.ffn_param_counts(d)[1] for d in ds], "swiglu_params",
                         [_swiglu_variants(d) for d in ds], SWIGLU_TEXTS)


@check("swiglu_params", points=1)
def test_param_counts_swiglu_rounded(student, rng):
    """第二项 swiglu_params 在需要把 d_ff 向上取整到 256 倍数的多个 d_model 上正确"""
    ds = [64, 100, 512, 4096, _d_model_not_multiple_of_32(rng, 33, 3000)]
    actual = [_param_counts(student, d)[1] for d in ds]
    _expect_ints_or_name(actual, [ref.ffn_param_counts(d)[1] for d in ds], "swiglu_params",
                         [_swiglu_variants(d) for d in ds], SWIGLU_TEXTS)
