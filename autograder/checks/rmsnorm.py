"""Checks of the rmsnorm assignment: the hand computation, rms_norm, RMSNorm.

Inputs: batch >= 2 with different rows; random, non-unit gamma; small-scale inputs
(mean(x^2) ~ 1e-4) so that where eps sits changes the result by far more than the tolerance; a
non-default eps (1e-3) for the function and for the module's constructor.

Diagnosis (autograder.checks): the catalogued formula slips are computed here in float64 on the same inputs
(formula_variants); the hand answers are compared with the slips of `solutions.rmsnorm.hand_slips`. Module
mistakes in the parameters (an extra beta, gamma under another name, gamma not a Parameter) are named from the
parameter keys (key_mistakes); gamma not initialised to ones from behaviour (a fresh module's output against
gamma = ones), never from the values the module reports. When nothing matches, the message localises the fault
with a property of the output (is it x·gamma times one factor per token? does changing one token change the
others?).
"""

import pytest
import torch

from autograder.catalogue.rmsnorm import VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (
    F32, F64, HAND, ParamKeys, Tol, attempt, check, close_number, expect_call, expect_call_precision,
    expect_module, expect_module_precision, expect_number, expect_numbers, expect_parameters, expect_true, is_number,
    same_values,
)
from solutions import rmsnorm as ref
from solutions.student_params import student_params


HARD_CODED_EPS = (1e-5, 1e-6)  # what a student who ignores the eps argument typically writes


@pytest.fixture
def hand(student_id):
    """The student's hand inputs, right answers and the catalogued slips' answers."""
    inputs = student_params("rmsnorm", student_id)
    return inputs, ref.hand_answers(inputs), ref.hand_slips(inputs)


@pytest.fixture
def gamma64(rng):
    return 0.5 + torch.rand(24, generator=rng, dtype=torch.float64)


@pytest.fixture
def small_x64(rng):
    return 0.01 * torch.randn(3, 5, 24, generator=rng, dtype=torch.float64)


# --- the variants' formulas and the localisation -----------------------------------------------------


def formula_variants(x: torch.Tensor, gamma: torch.Tensor, eps: float) -> list[tuple[str, torch.Tensor]]:
    """(variant name, output) of the catalogued formula slips on these inputs, in float64."""
    x, g = x.double(), gamma.double()
    ms = (x * x).mean(dim=-1, keepdim=True)
    ss = (x * x).sum(dim=-1, keepdim=True)
    centred = x - x.mean(dim=-1, keepdim=True)
    return [
        ("no_sqrt", x / (ms + eps) * g),
        ("sum_not_mean", x / torch.sqrt(ss + eps) * g),
        ("sum_not_mean", x / torch.sqrt(ss) * g),  # x / x.norm(dim=-1), F.normalize
        ("layernorm", centred / torch.sqrt((centred * centred).mean(dim=-1, keepdim=True) + eps) * g),
        ("layernorm", centred / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) * g),  # torch.var is unbiased
        ("gamma_missing", x / torch.sqrt(ms + eps)),
        ("eps_outside_root", x / (torch.sqrt(ms) + eps) * g),
        ("no_eps", x / torch.sqrt(ms) * g),
        ("mean_over_all_elements", x / torch.sqrt((x * x).mean() + eps) * g),
    ] + [("ignores_eps_argument", x / torch.sqrt(ms + e) * g) for e in HARD_CODED_EPS if e != eps]


def localise_output(x: torch.Tensor, gamma: torch.Tensor, eps: float, tol: Tol, student=None):
    """hint(actual, expected): where a wrong output goes wrong, from the output alone (no hidden values), and
    with `student`, one extra probe (does changing one token change the other tokens' outputs?)."""
    def hint(actual, expected) -> str:
        if not (isinstance(actual, torch.Tensor) and actual.shape == x.shape and actual.dtype.is_floating_point
                and bool(torch.isfinite(actual).all())) or same_values(actual, expected, tol):
            return ""  # not a tensor of the right shape, or the values are right and only the dtype is not
        if student is not None and tokens_mixed(student, actual, x, gamma, eps, tol):
            return ("改变一个 token，其他 token 的输出也跟着变了：每个 token 应该只按自己的最后一维归一化"
                    "（torch.mean 要写 dim=-1, keepdim=True）")
        a, xd, g = actual.detach().double(), x.double(), gamma.double()
        low_precision = actual.dtype != torch.float64 or torch.equal(a, a.float().double())  # computed in float32
        precision = 1e-4 if low_precision else max(100 * tol.rtol, 1e-8)

        def one_factor_per_token(ratio):
            spread = ratio.amax(dim=-1) - ratio.amin(dim=-1)
            return bool((spread <= precision * ratio.abs().amax(dim=-1)).all())

        factor = a / (xd * g)
        if one_factor_per_token(factor):
            right = 1 / torch.sqrt((xd * xd).mean(dim=-1) + eps)
            ratio = factor.mean(dim=-1) / right
            size = "整体偏大" if bool((ratio > 1).all()) else "整体偏小" if bool(((ratio > 0) & (ratio < 1)).all()) else ""
            return (f"每个 token 的输出都是 x·gamma 乘同一个系数（这一点是对的），但这个系数不等于 1 / rms"
                    f"{'（' + size + '）' if size else ''}：检查 rms = sqrt(mean(x²) + eps) 的计算，以及是不是除以 rms")
        if one_factor_per_token(a / xd):
            return "每个 token 的输出与 x 成比例，但没有正确地逐维乘上 gamma"
        return ("在同一个 token 里，输出 / (x·gamma) 不是同一个数：RMSNorm 对每个 token 只做一次整体缩放、再逐维乘 gamma，"
                "不应该改变各维之间的比例（检查是否减了均值，mean 是否只沿最后一维求）")
    return hint


def tokens_mixed(student, actual: torch.Tensor, x: torch.Tensor, gamma: torch.Tensor, eps: float, tol: Tol) -> bool:
    """rms_norm again with the first token changed: did any other token's output move?"""
    changed = x.clone()
    changed[(0,) * (x.dim() - 1)] = 7 * x[(0,) * (x.dim() - 1)].flip(-1)
    again = attempt(student.call, "rms_norm", changed, gamma, eps)
    if not isinstance(again, torch.Tensor) or again.shape != x.shape or not again.dtype.is_floating_point:
        return False
    others_before, others_after = actual.reshape(-1, x.shape[-1])[1:], again.reshape(-1, x.shape[-1])[1:]
    return not same_values(others_after, others_before.double(), tol)


def key_mistakes(d_model: int) -> dict:
    """The parameter mistakes, recognised from the module's parameter names (and, after a backward, its grads)."""
    def renamed(k: ParamKeys) -> bool:
        return "gamma" not in k.shapes and len(k.shapes) == 1 and list(k.shapes.values())[0] == [d_model]

    def extra_beta(k: ParamKeys) -> bool:
        extra = set(k.shapes) - {"gamma"}
        return "gamma" in k.shapes and bool(extra) and all("beta" in n.lower() or "bias" in n.lower() for n in extra)

    def not_parameter(k: ParamKeys) -> bool:  # no parameter at all, or gamma loaded (a buffer) but got no gradient
        return not k.shapes or (k.grads is not None and not k.extra and "gamma" not in k.grads)

    return {"gamma_renamed": renamed, "extra_beta": extra_beta, "gamma_not_parameter": not_parameter}


def expect_module_output(student, init_args: tuple, init_kwargs: dict, x, gamma, eps, tol, dtype=None):
    """A forward-only module check of RMSNorm(*init_args, **init_kwargs) loaded with `gamma` (in `dtype` when given):
    the output is right (the given gamma may fail to load only when that does not change the output, e.g. an extra
    beta that stays zero)."""
    expect_module(student, ref, "RMSNorm", init_args, init_kwargs, weights={"gamma": gamma}, args=(x,), dtype=dtype,
                  tol=tol, variants=lambda: formula_variants(x, gamma, eps), hint=localise_output(x, gamma, eps, tol),
                  keys=key_mistakes(init_args[0]), unloaded_ok=True)


# --- rmsnorm_hand ---------------------------------------------------------------------------------


def localise_hand_output(student, inputs: dict, right: dict):
    """hint(actual, expected): is the wrong output x / rms · gamma with the student's own rms? Is their rms right?"""
    def hint(actual, expected) -> str:
        if not (isinstance(actual, (list, tuple)) and len(actual) == len(inputs["x"]) and all(map(is_number, actual))):
            return ""
        rms = attempt(student.variable, "rms")
        if not is_number(rms) or rms == 0:
            return ""
        if close_number(rms, right["rms"], 2 * HAND):
            return "你的 rms 是对的，问题出在 output = x / rms · gamma 这一步"
        if close_number(actual, [v / rms * g for v, g in zip(inputs["x"], inputs["gamma"])], 2 * HAND):
            return "你的 output 与你自己的 rms 一致（x / rms · gamma 这一步是对的），问题出在 rms"
        return ""
    return hint


@check("rmsnorm_hand", points=1)
def test_hand_rms(student, hand):
    """手算的 rms 与按你的学号算出的答案一致（4 位有效数字）"""
    _, right, slips = hand
    expect_number(student.variable("rms"), right["rms"], "rms",
                  variants=[(name, answer["rms"]) for name, answer in slips.items()])


@check("rmsnorm_hand", points=1)
def test_hand_output(student, hand):
    """手算的 output 与按你的学号算出的答案一致（4 位有效数字）"""
    inputs, right, slips = hand
    expect_numbers(student.variable("output"), right["output"], "output",
                   variants=[(name, answer["output"]) for name, answer in slips.items()],
                   hint=localise_hand_output(student, inputs, right))


# --- rmsnorm_function -----------------------------------------------------------------------------


@check("rmsnorm_function", points=1)
def test_function_float64_batched(student, small_x64, gamma64):
    """rms_norm 在 float64、多个 batch 维、小尺度输入上与参考实现一致"""
    expect_call(student, ref.rms_norm, (small_x64, gamma64, 1e-6), tol=F64, variants=formula_variants,
                hint=lambda x, gamma, eps: localise_output(x, gamma, eps, F64, student))


@check("rmsnorm_function", points=0.5)
def test_function_float64_precision(student, small_x64, gamma64):
    """rms_norm 对 float64 输入全程用 float64 计算：与参考实现一致到 float64 的精度"""
    expect_call_precision(student, ref.rms_norm, (small_x64, gamma64, 1e-6), what="rms_norm 的输出")


@check("rmsnorm_function", points=1)
def test_function_uses_eps_argument(student, small_x64, gamma64):
    """rms_norm 使用传入的 eps（eps = 1e-3，在根号里面）"""
    expect_call(student, ref.rms_norm, (small_x64, gamma64), {"eps": 1e-3}, tol=F64, variants=formula_variants,
                hint=lambda x, gamma, eps: localise_output(x, gamma, eps, F64))


@check("rmsnorm_function", points=1)
def test_function_float32_default_eps(student, rng):
    """rms_norm 在 float32、默认 eps 下与参考实现一致，输出仍是 float32"""
    x = 3 * torch.randn(2, 7, 32, generator=rng)
    gamma = 0.5 + torch.rand(32, generator=rng)
    expect_call(student, ref.rms_norm, (x, gamma), tol=F32, variants=formula_variants,
                hint=lambda x, gamma, eps: localise_output(x, gamma, eps, F32))


@check("rmsnorm_function", points=0.5)
def test_function_single_vector(student, rng):
    """rms_norm 也适用于没有 batch 维的单个向量 [d]"""
    x = torch.randn(10, generator=rng, dtype=torch.float64)
    gamma = 0.5 + torch.rand(10, generator=rng, dtype=torch.float64)
    expect_call(student, ref.rms_norm, (x, gamma, 1e-6), tol=F64, variants=formula_variants,
                hint=lambda x, gamma, eps: localise_output(x, gamma, eps, F64))


# --- rmsnorm_module -------------------------------------------------------------------------------


@check("rmsnorm_module", points=1)
def test_module_parameters(student, rng):
    """RMSNorm(d_model) 只有一个参数 gamma，形状 [d_model]，初始化为全 1"""
    expect_parameters(student.module("RMSNorm", (24,)).param_shapes, {"gamma": [24]}, "RMSNorm(24)",
                      keys=key_mistakes(24))
    # the initial gamma is judged by behaviour, never by the module's own state_dict() (which it can forge): a fresh
    # module's output is the reference's with gamma = ones, or (where the forward itself is wrong, which other checks
    # grade) the same module's output once ones are loaded into gamma
    x = torch.randn(3, 5, 24, generator=rng)
    fresh = student.module("RMSNorm", (24,), method="forward", args=(x,)).outputs
    with torch.no_grad():
        expected = ref.RMSNorm(24)(x)
    if isinstance(fresh, torch.Tensor) and same_values(fresh, expected, F32):
        return
    ones = student.module("RMSNorm", (24,), state_dict={"gamma": torch.ones(24)}, method="forward", args=(x,)).outputs
    expect_true(isinstance(fresh, torch.Tensor) and isinstance(ones, torch.Tensor) and same_values(fresh, ones, F32)
                and bool(torch.isfinite(fresh).all()),
                "RMSNorm(24) 刚构造出来时的输出与 gamma 为全 1 时不同：gamma 的初始值不是全 1",
                diagnosis="gamma_init_not_ones")


@check("rmsnorm_module", points=1)
def test_module_forward_backward_float64(student, small_x64, gamma64, rng):
    """加载给定的 gamma 后，forward 输出、输入的梯度和 gamma 的梯度都与参考实现一致（float64）"""
    grad = torch.randn(small_x64.shape, generator=rng, dtype=torch.float64)
    expect_module(student, ref, "RMSNorm", (24,), weights={"gamma": gamma64}, args=(small_x64,), dtype=torch.float64,
                  grad_outputs=[grad], requires_grad=[0], tol=F64,
                  variants=lambda: formula_variants(small_x64, gamma64, 1e-6),
                  hint=localise_output(small_x64, gamma64, 1e-6, F64), keys=key_mistakes(24))


@check("rmsnorm_module", points=0.5)
def test_module_float64_precision(student, small_x64, gamma64):
    """RMSNorm 对 float64 输入全程用 float64 计算：forward 与参考实现一致到 float64 的精度"""
    expect_module_precision(student, ref, "RMSNorm", (24,), weights={"gamma": gamma64}, args=(small_x64,),
                            what="RMSNorm 的输出", keys=key_mistakes(24))


@check("rmsnorm_module", points=1)
def test_module_forward_float32(student, rng):
    """RMSNorm 在 float32 下 forward 与参考实现一致（默认 eps）"""
    x = 2 * torch.randn(4, 3, 16, generator=rng)
    gamma = 0.5 + torch.rand(16, generator=rng)
    expect_module_output(student, (16,), {}, x, gamma, 1e-6, F32)


@check("rmsnorm_module", points=0.5)
def test_module_uses_eps_argument(student, small_x64, gamma64):
    """RMSNorm(d_model, eps=1e-3) 在 forward 里使用构造时传入的 eps（float64，小尺度输入）"""
    expect_module_output(student, (24,), {"eps": 1e-3}, small_x64, gamma64, 1e-3, F64, torch.float64)
