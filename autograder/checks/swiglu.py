"""Checks of the swiglu assignment: swish, default_d_ff and FeedForward_SwiGLU, ffn_param_counts.

Inputs: swish sees negative and positive values, including large magnitudes (float32 up to |a| = 100,
where exp(a) overflows); the module gets random non-unit weights with W_gate != W_up, batch >= 2
with different rows, and d_model != d_ff with d_ff not the default nor any value a catalogued slip
derives from d_model; the d_model values for d_ff and the parameter counts (fixed ones such as 64,
100, 512, 768, 4096 plus per-student random ones drawn where every slip gives its own integer) are
chosen so that every catalogued slip (4·d_model, no rounding, rounding down or to the nearest
multiple, biases counted or forgotten) gives a different integer on at least one of them, whatever
the student's seed. The messages never name the d_model values: "the k-th d_model".

When a comparison fails, the same inputs and weights go through the variants of VARIANTS (written
here, from the formulas); a match names the mistake (autograder.checks, one matching rule). Otherwise the
message localises the fault where a cheap property can: the inputs where swish goes wrong, the
module's structure against the student's own swish, per-token independence, linearity in W_up,
default_d_ff's multiple of 256, the student's own default_d_ff behind the module or the count.
"""

import torch
import torch.nn.functional as F

from autograder.catalogue.swiglu import VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (
    F32, F64, CheckFailed, attempt, check, expect_close, expect_equal, expect_call_precision,
    expect_ints, expect_module, expect_module_precision, expect_parameters, is_float_tensor, randint,
    random_weights, same_values,
)
from autograder.checks.probes import describe_value
from solutions import swiglu as ref

WEIGHTS = ("W_gate.weight", "W_up.weight", "W_down.weight")
BIASES = ("W_gate.bias", "W_up.bias", "W_down.bias")


# --- helpers --------------------------------------------------------------------------------------


def _within(actual, expected: torch.Tensor, tol, factor: float = 10.0) -> torch.Tensor:
    """Elementwise: `actual` is finite and within `factor` times `tol` of `expected`."""
    a, e = actual.detach().double(), expected.detach().double()
    return torch.isfinite(a) & ((a - e).abs() <= factor * (tol.atol + tol.rtol * e.abs()))


# --- swish ----------------------------------------------------------------------------------------


def _activations() -> list[tuple[str, object]]:
    """The catalogued wrong activations of the gate, as functions of a float64 tensor."""
    return [
        ("relu_gate", torch.relu),
        ("gelu_gate", F.gelu),
        ("gelu_gate", lambda a: F.gelu(a, approximate="tanh")),
        ("sigmoid_gate", torch.sigmoid),
        ("no_activation", lambda a: a),
        ("exp_sign_flipped", lambda a: a * torch.sigmoid(-a)),
    ]


def _swish_variants(a: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    wide = a.double()
    candidates = [(name, fn(wide)) for name, fn in _activations()]
    # e^a in the input's dtype: inf above log(max), then inf/inf = NaN (or inf where a·e^a overflows first)
    e = torch.exp(a)
    candidates += [("swish_overflow", a * e / (1 + e)), ("swish_overflow", a * (e / (1 + e)))]
    return candidates


def localise_swish(a: torch.Tensor, tol):
    """hint(actual, expected): where swish goes wrong: only on large |a|, only on a < 0, only on a > 0."""
    def hint(actual, expected) -> str | None:
        if not is_float_tensor(actual, a.shape, finite=False):
            return None
        wrong = ~_within(actual, expected, tol, factor=1.0)
        if not wrong.any():
            return None
        large = a.abs() > 10
        if not wrong[~large].any():
            return ("只在绝对值很大的输入上出错（a 很大时 swish(a) ≈ a，a 很负时 swish(a) 是趋近 0 的负数）："
                    "注意数值稳定性，例如 e^a 或 e^(−a) 的溢出")
        if not wrong[a < 0].any():
            return "只在 a > 0 的输入上出错"
        if not wrong[a > 0].any():
            return "只在 a < 0 的输入上出错（a < 0 时 swish(a) = a·sigmoid(a) 是一个小的负数）"
        return None
    return hint


def _expect_swish(actual, a: torch.Tensor, tol):
    expect_close(actual, ref.swish(a), tol, variants=lambda: _swish_variants(a), hint=localise_swish(a, tol))


@check("swish", points=0.5)
def test_swish_float64_precision(student, rng):
    """swish 对 float64 输入全程用 float64 计算：与参考实现一致到 float64 的精度"""
    a = 3 * torch.randn(4, 7, generator=rng, dtype=torch.float64)
    expect_call_precision(student, ref.swish, (a,), what="swish 的输出")


@check("swish", points=0.5)
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


# --- default d_ff ---------------------------------------------------------------------------------


D_FF_SLIPS = ("d_ff_4x", "d_ff_no_rounding", "d_ff_round_down", "d_ff_round_nearest")


def _wrong_d_ff(d: int) -> dict[str, int]:
    """The default d_ff under each catalogued slip."""
    base = 8 * d // 3
    return {"d_ff_4x": 4 * d, "d_ff_no_rounding": base, "d_ff_round_down": max(base // 256 * 256, d),
            "d_ff_round_nearest": max(round(base / 256) * 256, d)}


def _d_model_for_slips(rng, low: int, high: int, nearest_is_up: bool) -> int:
    """A d_model in [low, high) where the default d_ff, 4·d_model, int(8/3·d_model) and its rounding down are
    pairwise different, and rounding to the nearest multiple of 256 gives the default (`nearest_is_up`) or
    the rounding down: two such d_models, one of each kind, tell every slip of D_FF_SLIPS apart."""
    while True:
        d = randint(rng, low, high)
        slips = _wrong_d_ff(d)
        values = [ref.default_d_ff(d), slips["d_ff_4x"], slips["d_ff_no_rounding"], slips["d_ff_round_down"]]
        up = slips["d_ff_round_nearest"] == ref.default_d_ff(d)
        if len(set(values)) == len(values) and up == nearest_is_up:
            return d


def _expect_ints_per_d_model(actual: list, expected: list[int], what: str, slips: list[dict], localise=None):
    """Each actual[i] is the int expected[i] (the i-th d_model); a slip is named when it gives them all, else
    `localise(i)` (i: the first wrong one, when it is a whole number) says where."""
    def hint(values, right):
        i = next(i for i, (a, e) in enumerate(zip(values, right)) if not (a == e and not isinstance(a, bool)))
        a = values[i]
        whole = isinstance(a, int) and not isinstance(a, bool) or isinstance(a, float) and a.is_integer()
        return localise(i) if localise and whole else None

    expect_ints(actual, expected, [f"{what}（第 {i + 1} 个 d_model）" for i in range(len(actual))],
                variants=lambda: [(name, [s[name] for s in slips]) for name in slips[0]], hint=hint)


@check("swiglu_module", points=1)
def test_default_d_ff(student, rng):
    """default_d_ff 对多个 d_model 返回正确的整数（向上取整到 256 的倍数，再与 d_model 取较大者）"""
    ds = [1, 64, 100, 512, 4096] + [randint(rng, low, high) for low, high in ((2, 97), (97, 5000))]
    actual = [student.call("default_d_ff", d) for d in ds]

    def localise(i):
        value, d = actual[i], ds[i]
        if value < d:
            return "结果比 d_model 还小：最后要与 d_model 取较大者"
        if value % 256 and value != d:
            return "结果不是 256 的倍数（也不等于 d_model）"
        if value < 8 * d // 3:
            return "结果比 int(8/3·d_model) 还小：取整到 256 的倍数时应该向上取整"
        return None

    _expect_ints_per_d_model(actual, [ref.default_d_ff(d) for d in ds], "default_d_ff(d_model)",
                         [_wrong_d_ff(d) for d in ds], localise)


# --- FeedForward_SwiGLU ---------------------------------------------------------------------------


def _ffn_variants(x: torch.Tensor, state: dict) -> list[tuple[str, torch.Tensor]]:
    """The module's output under the catalogued slips, computed from the formula with the given weights."""
    x = x.double()
    w_gate, w_up, w_down = (state[k].double() for k in WEIGHTS)
    gate, up = x @ w_gate.T, x @ w_up.T
    down = lambda h: h @ w_down.T  # noqa: E731
    silu = F.silu
    return [(name, down(fn(gate) * up)) for name, fn in _activations()] + [
        ("gate_up_swapped", down(gate * silu(up))),
        ("activation_after_product", down(silu(gate * up))),
        ("plus_instead_of_times", down(silu(gate) + up)),
        ("swish_on_both_branches", down(silu(gate) * silu(up))),
        ("up_branch_unused", down(silu(gate))),
    ]


def _hidden_size_from_d_model(shapes: dict, d_model: int) -> bool:
    """The three weights are consistent with a hidden size computed from d_model alone (default or a slip)."""
    for n in {ref.default_d_ff(d_model), *_wrong_d_ff(d_model).values()}:
        if [shapes.get(k) for k in WEIGHTS] == [[n, d_model], [n, d_model], [d_model, n]]:
            return True
    return False


def key_mistakes(d_model: int) -> dict:
    """The parameter mistakes: biases the weights lack, or the d_ff argument not used (the weights' shapes follow a
    hidden size computed from d_model alone)."""
    return {
        "bias_true": lambda k: k.load_error is None and bool(k.extra) and not k.absent and k.extra <= set(BIASES),
        "d_ff_argument_ignored": lambda k: ((k.load_error is not None or (bool(k.wrong_shape) and not k.extra))
                                            and _hidden_size_from_d_model(k.shapes, d_model)),
    }


def _weights(rng, d_model: int, d_ff: int, dtype) -> dict:
    """Random non-unit weights; pre-activations of order 1, where swish, ReLU and GELU differ."""
    return {**random_weights(rng, {"W_gate.weight": (d_ff, d_model)}, dtype, gain=1.5),
            **random_weights(rng, {"W_up.weight": (d_ff, d_model), "W_down.weight": (d_model, d_ff)}, dtype)}


def _forward(student, d_model: int, d_ff: int, state: dict, x: torch.Tensor):
    run = attempt(student.module, "FeedForward_SwiGLU", (d_model, d_ff), state_dict=state, dtype=x.dtype,
                  method="forward", args=(x,))
    return run.outputs if run is not None and is_float_tensor(run.outputs, x.shape, finite=False) else None


def localise_module(student, x, state, d_model: int, d_ff: int, tol):
    """hint(outputs, expected): the forward is wrong and no variant matched: which property of the SwiGLU FFN does
    it break?"""
    def hint(outputs, _expected) -> str | None:
        if not is_float_tensor(outputs, x.shape):
            return None
        outputs = outputs.detach()
        w_gate, w_up, w_down = (state[k] for k in WEIGHTS)
        gate, up = x @ w_gate.T, x @ w_up.T
        # the structure is right, the student's own swish is not
        own = attempt(student.call, "swish", gate)
        if is_float_tensor(own, gate.shape, finite=False) and not _within(own, ref.swish(gate), tol).all() \
                and same_values(outputs, (own.double() * up.double()) @ w_down.double().T, tol):
            return ("FeedForward_SwiGLU 的结构是对的（与用你自己的 swish 按 W_down(swish(W_gate x) * W_up x) "
                    "算出的一致），错在 swish 函数本身：先通过 swish 的检查")
        # off by a constant factor
        expected = (F.silu(gate.double()) * up.double()) @ w_down.double().T
        factor = float((outputs.double() * expected).sum() / (expected * expected).sum())
        if abs(factor - 1) > 1e-3 and same_values(outputs, factor * expected, tol):
            return f"你的输出恰好是正确结果的 {factor:.4g} 倍：检查是否多乘或少乘了一个常数"
        # per-token independence: change one token, the others must not move
        x2 = x.clone()
        x2.view(-1, d_model)[0] = -2 * x2.view(-1, d_model)[0] + 0.5
        moved = _forward(student, d_model, d_ff, state, x2)
        if moved is not None:
            others = ~_within(moved.reshape(-1, d_model)[1:], outputs.reshape(-1, d_model)[1:], tol)
            if others.any():
                return ("FFN 应该对每个 token 独立计算，你的不是：只改变一个位置的输入，其他位置的输出也变了"
                        "（是否在 batch 或序列维上做了运算，或 reshape 错了？）")
        # everything goes through W_down: with W_down zero the output is zero (not x: a residual added inside)
        silenced = _forward(student, d_model, d_ff, dict(state, **{"W_down.weight": torch.zeros_like(w_down)}), x)
        if silenced is not None and not _within(silenced, torch.zeros_like(x), tol).all():
            if _within(silenced, x, tol).all():
                return ("把 W_down 的权重置零时，你的输出恰好是输入 x（应该全为 0）：FFN 里加了残差。FFN 只返回 "
                        "W_down(swish(W_gate x) * W_up x)，残差由 block 在外面加")
            return ("把 W_down 的权重置零时，你的输出不全为 0：输出里有不经过 W_down 的部分，"
                    "而 FFN 的输出应该是 W_down(swish(W_gate x) * W_up x)")
        # the information branch is linear: W_up times -2 gives the output times -2
        scaled = _forward(student, d_model, d_ff, dict(state, **{"W_up.weight": -2 * w_up}), x)
        if scaled is not None and not _within(scaled, -2 * outputs, tol).all():
            return ("信息通道 W_up x 应该是线性的、只被门逐元素地缩放：把 W_up 的权重乘以 −2，输出也应该乘以 −2，"
                    "你的不是。检查 swish 是否只用在 W_gate x 上、两路是否逐元素相乘")
        return None
    return hint


def expect_ffn(student, x, state: dict, d_model: int, d_ff: int, tol, dtype=None, **backward):
    """The module round trip of FeedForward_SwiGLU(d_model, d_ff) with `state` on `x` (`backward`: grad_outputs and
    requires_grad), diagnosed."""
    expect_module(student, ref, "FeedForward_SwiGLU", (d_model, d_ff), weights=state, args=(x,), dtype=dtype, tol=tol,
                  variants=lambda: _ffn_variants(x, state), hint=localise_module(student, x, state, d_model, d_ff, tol),
                  keys=key_mistakes(d_model), **backward)


@check("swiglu_module", points=0.5)
def test_module_parameters_explicit_d_ff(student, rng):
    """FeedForward_SwiGLU(d_model, d_ff=...) 恰好有 W_gate、W_up、W_down 三个权重，没有 bias，形状正确"""
    d_model = randint(rng, 8, 24)
    slips = {ref.default_d_ff(d_model), *_wrong_d_ff(d_model).values()}
    d_ff = randint(rng, 30, 90)
    while d_ff in slips:  # a module that ignores d_ff must not pass by accident
        d_ff = randint(rng, 30, 90)
    run = student.module("FeedForward_SwiGLU", (d_model,), {"d_ff": d_ff})
    expect_parameters(run.param_shapes, dict(zip(WEIGHTS, ([d_ff, d_model], [d_ff, d_model], [d_model, d_ff]))),
                      "FeedForward_SwiGLU(d_model, d_ff)（nn.Linear(in, out) 的权重形状是 [out, in]，给了 d_ff 时应该原样使用它）",
                      keys=key_mistakes(d_model))


@check("swiglu_module", points=0.5)
def test_module_default_d_ff(student, rng):
    """FeedForward_SwiGLU(d_model) 不给 d_ff 时，三个权重的形状用默认的 d_ff"""
    d_models = (_d_model_for_slips(rng, 97, 300, True), _d_model_for_slips(rng, 300, 700, False))
    shapes = [[student.module("FeedForward_SwiGLU", (d,)).param_shapes.get(k) for k in WEIGHTS] for d in d_models]

    def hidden(n, d):
        return [[n, d], [n, d], [d, n]]

    wrong = [i for i, d in enumerate(d_models) if shapes[i] != hidden(ref.default_d_ff(d), d)]
    i = wrong[0] if wrong else 0

    def own_default_d_ff(_shapes, _expected):
        own = attempt(student.call, "default_d_ff", d_models[i])
        if isinstance(own, int) and shapes[i] == hidden(own, d_models[i]):
            return "你的模块用的是你自己的 default_d_ff(d_model)，错在 default_d_ff 本身：先通过它的检查"
        return None

    expect_equal(shapes, [hidden(ref.default_d_ff(d), d) for d in d_models],
                 f"不给 d_ff 时（第 {i + 1} 个 d_model），W_gate、W_up、W_down 的权重形状没有用默认的 "
                 f"d_ff = default_d_ff(d_model)", {"param_shapes": shapes[i]},
                 variants=lambda: [(name, [hidden(_wrong_d_ff(d)[name], d) for d in d_models]) for name in D_FF_SLIPS],
                 hint=own_default_d_ff)


@check("swiglu_module", points=0.5)
def test_module_float64_precision(student, rng):
    """float64 的输入全程用 float64 计算：加载给定权重后 forward 与参考实现一致到 float64 的精度"""
    d_model, d_ff = 12, 40
    state = _weights(rng, d_model, d_ff, torch.float64)
    x = torch.randn(3, 5, d_model, generator=rng, dtype=torch.float64)
    expect_module_precision(student, ref, "FeedForward_SwiGLU", (d_model, d_ff), weights=state, args=(x,),
                            what="FeedForward_SwiGLU 的输出", keys=key_mistakes(d_model))


@check("swiglu_module", points=1.5)
def test_module_forward_backward_float64(student, rng):
    """加载给定权重后，forward 输出、输入的梯度和三个权重的梯度都与参考实现一致（float64，带 batch 维）"""
    d_model, d_ff = 12, 40
    state = _weights(rng, d_model, d_ff, torch.float64)
    x = torch.randn(3, 5, d_model, generator=rng, dtype=torch.float64)
    grad = torch.randn(3, 5, d_model, generator=rng, dtype=torch.float64)
    expect_ffn(student, x, state, d_model, d_ff, F64, torch.float64, grad_outputs=[grad], requires_grad=[0])


@check("swiglu_module", points=1)
def test_module_forward_float32(student, rng):
    """FeedForward_SwiGLU 在 float32、多个 batch 维的输入上 forward 与参考实现一致"""
    d_model, d_ff = 16, 56
    state = _weights(rng, d_model, d_ff, torch.float32)
    x = torch.randn(2, 3, 5, d_model, generator=rng)
    expect_ffn(student, x, state, d_model, d_ff, F32)


# --- swiglu_params --------------------------------------------------------------------------------


def _param_counts(student, d_model: int):
    counts = student.call("ffn_param_counts", d_model)
    if not isinstance(counts, (tuple, list)) or len(counts) != 2:
        raise CheckFailed(f"ffn_param_counts 应该返回长度为 2 的 tuple (relu_ffn_params, swiglu_params)，"
                          f"你的返回 {describe_value(counts)}"
                          + (f"（长度 {len(counts)}）" if isinstance(counts, (tuple, list)) else ""),
                          {"type": describe_value(counts)})
    return counts


def _relu_variants(d: int) -> dict[str, int]:
    weights = 2 * d * 4 * d
    return {"relu_ffn_without_biases": weights, "relu_ffn_fc2_bias_4d": weights + 8 * d,
            "relu_ffn_fc1_bias_only": weights + 4 * d}


def _swiglu_variants(d: int) -> dict[str, int]:
    d_ff = ref.default_d_ff(d)
    return {
        "bias_true": 3 * d * d_ff + 2 * d_ff + d,
        "swiglu_two_matrices": 2 * d * d_ff,
        **{name: 3 * d * value for name, value in _wrong_d_ff(d).items()},
    }


@check("swiglu_params", points=1)
def test_param_counts_relu(student, rng):
    """ffn_param_counts 返回 (int, int)，第一项 relu_ffn_params 对多个 d_model 都正确（两层都带 bias）"""
    ds = [64, 512, 4096, randint(rng, 10, 5000)]
    actual = [_param_counts(student, d)[0] for d in ds]

    def localise(i):
        if actual[i] < 8 * ds[i] ** 2:
            return ("比两个权重矩阵（d_model × 4·d_model 和 4·d_model × d_model）的元素数之和还少："
                    "隐藏维度是 4·d_model")
        return None

    _expect_ints_per_d_model(actual, [ref.ffn_param_counts(d)[0] for d in ds], "relu_ffn_params",
                         [_relu_variants(d) for d in ds], localise)


def _expect_swiglu_counts(student, ds: list[int]):
    actual = [_param_counts(student, d)[1] for d in ds]

    def localise(i):
        value, d = actual[i], ds[i]
        if value % (3 * d):
            return "它不能被 3·d_model 整除：SwiGLU 是三个 d_model × d_ff 的矩阵、没有 bias"
        own = attempt(student.call, "default_d_ff", d)
        if isinstance(own, int) and own != ref.default_d_ff(d) and value == 3 * d * own:
            return ("它与你自己的 default_d_ff 一致（3·d_model·default_d_ff(d_model)），"
                    "错在 default_d_ff 本身：先通过它的检查")
        return "它能被 3·d_model 整除，但商（隐藏维度）不是 default_d_ff(d_model)"

    _expect_ints_per_d_model(actual, [ref.ffn_param_counts(d)[1] for d in ds], "swiglu_params",
                         [_swiglu_variants(d) for d in ds], localise)


@check("swiglu_params", points=1)
def test_param_counts_swiglu_exact_multiple(student, rng):
    """第二项 swiglu_params 在 8/3·d_model 恰好是 256 的倍数（不需要取整）的 d_model 上正确：三个矩阵，没有 bias"""
    _expect_swiglu_counts(student, [768, 96 * randint(rng, 1, 40)])


@check("swiglu_params", points=1)
def test_param_counts_swiglu_rounded(student, rng):
    """第二项 swiglu_params 在需要把 d_ff 向上取整到 256 倍数的多个 d_model 上正确"""
    _expect_swiglu_counts(student, [64, 100, 512, 4096, randint(rng, 33, 3000)])
