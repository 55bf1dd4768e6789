"""Checks of the gqa_saving assignment: homework-2 numbers, kv_cache_bytes, repeat_kv, GroupedQueryAttention.

Inputs (EXERCISES.md, "Inputs must separate these variants"): 1 < num_kv_heads < num_q_heads with
num_q_heads // num_kv_heads > 1, seq_len different from both head counts, sqrt(d_model) != d_head,
batch >= 2 with different rows, random weights scaled so that attention scores are O(1) (the
scale variants then differ from the reference by far more than the tolerance), a causal mask and
a random non-causal 0/-inf mask (some blocked entries, never a whole row).

When a comparison fails, the same inputs and weights go through the known-wrong variants of
VARIANTS (grader side only) and a match names the mistake (autograder.checks.diagnosis). When nothing
matches, the message localises the fault with properties where it can (which argument of
kv_cache_bytes is not proportional, whether repeat_kv only permutes heads, causality, whether the
mask has any effect, which tokens or batch rows are right).
"""

import math

import pytest
import torch

from autograder.catalogue.gqa_saving import VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (
    F32_ATTN, F64, ParamKeys, attempt, causal_mask, check, expect_call, expect_int, expect_module,
    expect_module_precision, expect_number, expect_parameters, expect_true, forward_args, is_number, match_variant,
    number_close, randint, randn, random_mask, random_weights, reference_with, same_values,
)
from autograder.checks.probes import describe_value
from autograder.checks.slips import attention_variants
from solutions import gqa_saving as ref
from solutions.student_params import student_answers, student_params

# --- the catalogue of mistakes ----------------------------------------------------------------------


MODULE_VARIANTS = ("mod_mapping", "no_scale", "scale_d_model", "mask_ignored", "mask_multiplied", "always_causal",
                   "softmax_wrong_dim", "merge_heads_without_transpose", "view_without_transpose", "no_output_projection")


def gqa_variants(weights: dict, x, mask, num_q_heads: int, num_kv_heads: int) -> list:
    """(name, GroupedQueryAttention's output) down each catalogued mistake's path (the kit's attention with slips,
    on GQA's projections and head pairing; weights by the pinned names, in the inputs' dtype)."""
    def project(**_):
        return x @ weights["W_q.weight"].T, x @ weights["W_k.weight"].T, x @ weights["W_v.weight"].T

    return attention_variants(MODULE_VARIANTS, project, weights["W_o.weight"], mask, num_heads=num_q_heads,
                              num_kv_heads=num_kv_heads)


def repeat_kv_variant(x, n_rep: int, variant: str):
    B, S, H, D = x.shape
    if variant == "mod_mapping":
        return x[:, :, None].expand(B, S, n_rep, H, D).reshape(B, S, n_rep * H, D)
    if variant == "repeat_wrong_dim":
        return torch.repeat_interleave(x, n_rep, dim=1)
    raise ValueError(variant)


# --- gqa_hand ---------------------------------------------------------------------------------------


def hand_slips(inputs: dict) -> dict:
    """What each catalogued slip gives for the three typed answers (each slip applied throughout)."""
    slips = ref.hand_slips(inputs)
    right = ref.hand_answers(inputs)
    slips["factor_not_ratio"] = {"saving_ratio": right["mha_kv_bytes"] / right["gqa_kv_bytes"]}
    return slips


@pytest.fixture
def answers(student_id):
    return student_answers("gqa_saving", student_id)


@pytest.fixture
def slips(student_id):
    return hand_slips(student_params("gqa_saving", student_id))


def slips_of(slips: dict, answer: str) -> list:
    """(slip name, what it gives for `answer`)."""
    return [(name, values[answer]) for name, values in slips.items() if answer in values]


@check("gqa_hand", points=1)
def test_hand_mha_kv_bytes(student, answers, slips):
    """mha_kv_bytes（MHA 一层 KV Cache 的字节数）与按你的学号算出的答案一致"""
    expect_int(student.variable("mha_kv_bytes"), answers["mha_kv_bytes"], "mha_kv_bytes",
               variants=slips_of(slips, "mha_kv_bytes"))


@check("gqa_hand", points=1)
def test_hand_gqa_kv_bytes(student, answers, slips):
    """gqa_kv_bytes（GQA 一层 KV Cache 的字节数）与按你的学号算出的答案一致"""
    expect_int(student.variable("gqa_kv_bytes"), answers["gqa_kv_bytes"], "gqa_kv_bytes",
               variants=slips_of(slips, "gqa_kv_bytes"))


@check("gqa_hand", points=1)
def test_hand_saving_ratio(student, answers, slips):
    """saving_ratio（GQA 省下的比例，0 到 1 的小数）与按你的学号算出的答案一致（4 位有效数字）"""
    expect_number(student.variable("saving_ratio"), answers["saving_ratio"], "saving_ratio",
                  variants=slips_of(slips, "saving_ratio"))


# --- kv_cache_bytes ---------------------------------------------------------------------------------

KV_ARGS = ("batch", "seq_len", "num_kv_heads", "head_dim")


def random_config(rng) -> tuple[int, int, int, int]:
    """(batch, seq_len, num_kv_heads, head_dim), none of them 1 or 2 (so that no factor hides another)."""
    return randint(rng, 3, 17), randint(rng, 100, 9000), randint(rng, 3, 17), 16 * randint(rng, 3, 9)


def kv_bytes_slips(b, s, h, d, bpe=2, layers=1) -> list:
    right = ref.kv_cache_bytes(b, s, h, d, bpe, layers)
    return [("k_only", right / 2), ("fp32_bytes", right * 2), ("bits_not_bytes", right * 8),
            ("mib_not_bytes", right / 1024**2), ("mb_not_bytes", right / 1e6),
            ("ignores_num_layers", right / layers), ("ignores_bytes_per_element", right * 2 / bpe)]


def localise_kv_bytes(student, config: tuple):
    """hint(value, expected): which arguments the result is not proportional to (one probe per argument)."""
    def hint(value, expected) -> str | None:
        if not is_number(value) or value <= 0:
            return None
        not_proportional = []
        for i, name in enumerate(KV_ARGS):
            doubled = list(config)
            doubled[i] *= 2
            result = attempt(student.call, "kv_cache_bytes", *doubled)
            if result is None:
                return None
            if not is_number(result) or abs(result - 2 * value) > 1e-9 * abs(value):
                not_proportional.append(name)
        if not_proportional:
            return (f"参数 {', '.join(not_proportional)} 翻倍时，你的结果没有跟着翻倍：KV Cache 与 batch、seq_len、"
                    "num_kv_heads、head_dim 都成正比，检查这些参数是否都乘进去了，且各乘一次")
        return ("你的结果与 batch、seq_len、num_kv_heads、head_dim 都成正比，但常数因子不对："
                "检查 K 和 V 的因子 2，以及每个元素的字节数 bytes_per_element（默认 2）")
    return hint


@check("kv_cache_bytes", points=1)
def test_kv_cache_bytes_fp16_one_layer(student, rng):
    """kv_cache_bytes 在默认参数（FP16、一层）下，对几组不同的配置都给出正确的字节数"""
    for _ in range(4):
        config = random_config(rng)
        expect_int(student.call("kv_cache_bytes", *config), ref.kv_cache_bytes(*config), "kv_cache_bytes(...)",
                   variants=kv_bytes_slips(*config), hint=localise_kv_bytes(student, config))


@check("kv_cache_bytes", points=0.5)
def test_kv_cache_bytes_uses_dtype_and_layers(student, rng):
    """bytes_per_element 和 num_layers 按比例生效：结果与它们的乘积成正比（位置参数和关键字参数都可以传）"""
    config = random_config(rng)
    base = student.call("kv_cache_bytes", *config)
    expect_true(isinstance(base, (int, float)) and not isinstance(base, bool) and base > 0,
                "kv_cache_bytes 应该返回一个正数")
    for bpe, layers, by_keyword in [(2, 1, True), (4, 3, False), (1, 32, True)]:
        if by_keyword:
            value = student.call("kv_cache_bytes", *config, bytes_per_element=bpe, num_layers=layers)
        else:
            value = student.call("kv_cache_bytes", *config, bpe, layers)
        expect_true(isinstance(value, (int, float)) and not isinstance(value, bool),
                    "kv_cache_bytes 应该返回一个数")
        ratio, want = value / base, bpe * layers / 2
        if abs(ratio - want) <= 1e-9 * want:
            continue
        expect_true((bpe, layers) != (2, 1), "显式传入 bytes_per_element=2, num_layers=1 与不传时结果不同：默认值应该是 "
                                             "bytes_per_element=2, num_layers=1")
        expect_true(abs(ratio - bpe / 2) > 1e-9 * want, "改变 num_layers 时结果没有按比例变化",
                    diagnosis="ignores_num_layers")
        expect_true(abs(ratio - layers) > 1e-9 * want, "改变 bytes_per_element 时结果没有按比例变化",
                    diagnosis="ignores_bytes_per_element")
        expect_true(False, "结果没有与 bytes_per_element × num_layers 成正比：检查这两个参数是否都乘进去了")


@check("kv_cache_bytes", points=0.5)
def test_kv_cache_bytes_returns_int(student, rng):
    """kv_cache_bytes 返回 Python int（字节数是整数，不是 float、tensor 或 MiB），整个模型的大数也一样"""
    batch, seq_len, heads, head_dim = random_config(rng)
    args = (batch, 16 * seq_len, heads, head_dim, 2, 80)
    value = student.call("kv_cache_bytes", *args)
    if type(value) is int:
        return
    expect_true(False, f"kv_cache_bytes 应该返回 Python int，你的返回了 {describe_value(value)}"
                       "（用 / 会得到 float；字节数请用整数运算）", {"type": describe_value(value)},
                diagnosis=match_variant(value, ref.kv_cache_bytes(*args), kv_bytes_slips(*args), number_close()))


# --- repeat_kv --------------------------------------------------------------------------------------


def localise_repeat_kv(actual, x, n_rep: int) -> str | None:
    """With the shape right: does the output only copy KV heads, and how often each?"""
    if not isinstance(actual, torch.Tensor) or actual.shape != (*x.shape[:2], x.shape[2] * n_rep, x.shape[3]):
        return None
    if not actual.dtype.is_floating_point or not torch.isfinite(actual).all():
        return None
    sources = []
    for h in range(actual.shape[2]):
        same = [g for g in range(x.shape[2]) if torch.equal(actual[:, :, h].to(x.dtype), x[:, :, g])]
        if not same:
            return ("输出里有的头不是任何一个输入 KV 头的原样拷贝：repeat_kv 只应复制 KV 头，不应改变数值，"
                    "也不应把不同的位置或头混在一起")
        sources.append(same[0])
    if all(sources.count(g) == n_rep for g in range(x.shape[2])):
        return ("你的输出里每个 KV 头都正好出现了 n_rep 次，但排列不对：第 h 个输出头应该是第 h // n_rep 个 KV 头"
                "（每个 KV 头连续重复 n_rep 次）")
    return "你的输出里每个头都是某个输入 KV 头的拷贝，但各 KV 头出现的次数不同：每个 KV 头应该正好重复 n_rep 次"


def expect_repeat_kv(student, x, n_rep: int, tol):
    expect_call(student, ref.repeat_kv, (x, n_rep), tol=tol,
                variants=lambda x, n_rep: [(name, repeat_kv_variant(x, n_rep, name))
                                           for name in ("mod_mapping", "repeat_wrong_dim")],
                hint=lambda x, n_rep: lambda actual, expected: localise_repeat_kv(actual, x, n_rep))


@check("repeat_kv", points=1)
def test_repeat_kv_layout_float64(student, rng):
    """repeat_kv 的排列正确：第 h 个输出头是第 h // n_rep 个 KV 头（float64，batch 和序列各行不同）"""
    expect_repeat_kv(student, torch.randn(2, 5, 3, 4, generator=rng, dtype=torch.float64), 4, F64)


@check("repeat_kv", points=0.5)
def test_repeat_kv_single_kv_head_float32(student, rng):
    """只有 1 个 KV 头（MQA）时 repeat_kv 也正确，float32 输入得到 float32 输出"""
    expect_repeat_kv(student, torch.randn(3, 7, 1, 8, generator=rng), 6, F32_ATTN)


@check("repeat_kv", points=0.5)
def test_repeat_kv_n_rep_one(student, rng):
    """n_rep = 1 时 repeat_kv 原样返回输入"""
    expect_repeat_kv(student, torch.randn(2, 6, 4, 5, generator=rng, dtype=torch.float64), 1, F64)


# --- gqa_module -------------------------------------------------------------------------------------


def pinned_shapes(d_model: int, num_q_heads: int, num_kv_heads: int) -> dict[str, list[int]]:
    d_head = d_model // num_q_heads
    return {"W_q.weight": [num_q_heads * d_head, d_model], "W_k.weight": [num_kv_heads * d_head, d_model],
            "W_v.weight": [num_kv_heads * d_head, d_model], "W_o.weight": [d_model, num_q_heads * d_head]}


def key_mistakes(config: tuple) -> dict:
    """The parameter mistakes, recognised from the module's parameter names and shapes: extra biases, or K/V
    projections sized for num_q_heads."""
    d_model, num_q_heads, num_kv_heads = config
    want = pinned_shapes(*config)
    full = [num_q_heads * (d_model // num_q_heads), d_model]

    def others_right(k: ParamKeys) -> bool:
        return all(k.shapes.get(n) == shape for n, shape in want.items() if n not in ("W_k.weight", "W_v.weight"))

    def linear_bias(k: ParamKeys) -> bool:
        extra = set(k.shapes) - set(want)
        return (bool(extra) and all(n.endswith(".bias") and n.removesuffix(".bias") + ".weight" in want for n in extra)
                and all(k.shapes.get(n) == shape for n, shape in want.items()))

    def q_heads_for_kv(k: ParamKeys) -> bool:
        wrong = [n for n in ("W_k.weight", "W_v.weight") if k.shapes.get(n) != want[n]]
        return (others_right(k) and not set(k.shapes) - set(want) and num_kv_heads != num_q_heads and bool(wrong)
                and all(k.shapes.get(n) == full for n in wrong))

    return {"linear_bias": linear_bias, "q_heads_for_kv": q_heads_for_kv}


def gqa_weights(rng, config: tuple, dtype) -> dict:
    """Weights by the pinned names, N(0, 1.5² / fan_in): attention scores of order 1, far from uniform."""
    return random_weights(rng, pinned_shapes(*config), dtype, gain=1.5)


# With one token the right attention weight is 1 whatever is done to the score before the softmax (its scaling, a
# mask): what is established is that the fault is in the projections, the pairing, the merge, W_o, or in something
# done to the weights after the softmax (a scale applied after it makes the weight 1/√d_head, not 1)
SINGLE_TOKEN_HINT = ("只有一个 token 时，正确的注意力权重恒为 1（softmax 之前对分数做的缩放和 mask 都不改变它），"
                     "输出只取决于 Q/K/V 投影、Q 头与 KV 头的配对、合并头和 W_o：错误在这几步里，"
                     "或者在 softmax 之后又对注意力权重做了运算（例如 softmax 之后才缩放）")
SCALED_AFTER_SOFTMAX_HINT = ("只有一个 token 时，你的输出正好是正确结果的 1/√d_head 倍：正确的注意力权重恒为 1，"
                             "你的却是 1/√d_head。缩放要作用在 softmax 之前的分数上（q·k / √d_head），"
                             "不是 softmax 之后的权重上")


def localise_single_token(actual: torch.Tensor, expected: torch.Tensor, d_head: int, tol) -> str:
    """The single-token hint: the scale applied after the softmax when the output is the right one times
    1/√d_head (the weights are linear in the output, without bias); else what one token establishes."""
    a, e = actual.detach().double(), expected.detach().double()
    scaled = e / math.sqrt(d_head)
    if bool(((a - scaled).abs() <= tol.atol + tol.rtol * scaled.abs()).all()):
        return SCALED_AFTER_SOFTMAX_HINT
    return SINGLE_TOKEN_HINT


PROJECTIONS = ("W_q", "W_k", "W_v", "W_o")


def unused_projections(student, config, weights, x, mask, dtype, rng, actual, tol) -> list[str]:
    """The projections whose weights the student's output does not depend on where the reference's does: each
    replaced by another draw (one probe each), the student's output unchanged and the reference's changed."""
    unused = []
    args = (x,) if mask is None else (x, mask)
    for name in PROJECTIONS:
        key = name + ".weight"
        other = dict(weights, **{key: torch.randn(weights[key].shape, generator=rng, dtype=torch.float64)
                                 .mul(weights[key].double().std()).to(dtype)})
        with torch.no_grad():
            moved = reference_with(ref.GroupedQueryAttention(*config), other, dtype)(*args)
            before = reference_with(ref.GroupedQueryAttention(*config), weights, dtype)(*args)
        if same_values(moved, before, tol):
            continue  # the right answer does not depend on it here either: nothing to say
        run = attempt(student.module, "GroupedQueryAttention", config, state_dict=other, dtype=dtype,
                      method="forward", args=args)
        if run is not None and isinstance(run.outputs, torch.Tensor) and run.outputs.shape == actual.shape \
                and bool(torch.equal(run.outputs, actual)):
            unused.append(name)
    return unused


def unused_projections_text(unused: list[str]) -> str:
    names = "、".join(unused)
    return (f"把 {names} 的权重换成别的值，你的输出完全不变（参考实现的输出会变）：forward 没有用到 {names}"
            "（q、k、v 分别是 W_q(x)、W_k(x)、W_v(x)，合并头之后再乘 W_o）")


def localise_module(student, config, weights, x, mask, mask_kind, rng, actual, expected, tol):
    """What the outputs (and a few extra probes, in the inputs' dtype) say about where the forward goes wrong."""
    dtype = x.dtype
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or actual.dtype != expected.dtype \
            or not torch.isfinite(actual).all():
        return None  # expect_close has said what is wrong
    unused = unused_projections(student, config, weights, x, mask, dtype, rng, actual, tol)
    if unused:
        return unused_projections_text(unused)
    B, S, _ = x.shape
    if S == 1:
        return localise_single_token(actual, expected, config[0] // config[1], tol)
    close = (actual.double() - expected.double()).abs() <= tol.atol + tol.rtol * expected.double().abs()
    hints = []

    def probe(args, kwargs=None):
        run = attempt(student.module, "GroupedQueryAttention", config, state_dict=weights, dtype=dtype,
                      method="forward", args=args, kwargs=kwargs or {})
        if run is None:
            return None
        return run.outputs if isinstance(run.outputs, torch.Tensor) and run.outputs.shape == actual.shape else None

    if mask_kind == "causal":
        changed = x.clone()
        changed[:, -1] = torch.randn(B, x.shape[2], generator=rng, dtype=torch.float64).to(dtype)
        other = probe((changed, mask))
        if other is not None and not same_values(other[:, :-1], actual[:, :-1], tol):
            hints.append("不满足因果性：加了因果掩码后，改变最后一个 token 仍会改变前面位置的输出——mask 没有正确地"
                         "加到分数上，或 softmax / 合并头时混用了不同位置")
        elif other is not None and bool(close[:, 0].all()) and not bool(close[:, 1:].all()):
            hints.append("你的输出满足因果性，而且第 1 个位置（只能看到自己，注意力权重为 1）的输出正确、后面的位置不对："
                         "Q/K/V 投影、KV 头配对、合并头和 W_o 应该没问题，问题在多个 token 之间的注意力"
                         "（分数的缩放、mask 或 softmax）")
    elif mask_kind == "random":
        unmasked = probe((x,))
        if unmasked is not None and same_values(unmasked, actual, tol):
            hints.append("传不传 mask，你的输出都一样：forward 没有用上 mask 参数")
    rows = close.flatten(1).all(dim=1)
    if bool(rows.any()) and not bool(rows.all()):
        hints.append("batch 里有的样本输出正确、有的不对：每个样本应该独立计算，检查 view / reshape / transpose "
                     "是否把 batch 维和别的维混在了一起")
    return "；".join(hints) or None


def run_module(student, config: tuple, weights: dict, x, mask=None, *, mask_kind=None, mask_by_keyword=False, rng):
    """Forward and backward of the student's module and of the reference on the same weights and inputs (in their
    dtype); on a mismatch, the catalogued variants are tried (parameters, then the output), else the fault is
    localised."""
    tol = F64 if x.dtype == torch.float64 else F32_ATTN
    args, kwargs = forward_args(x, mask, mask_by_keyword)
    expect_module(student, ref, "GroupedQueryAttention", config, weights=weights, args=args, kwargs=kwargs,
                  dtype=x.dtype, grad_outputs=[randn(rng, *x.shape, dtype=x.dtype)], requires_grad=[0], tol=tol,
                  variants=lambda: gqa_variants(weights, x, mask, *config[1:]), keys=key_mistakes(config),
                  hint=lambda actual, expected: localise_module(student, config, weights, x, mask, mask_kind, rng,
                                                                actual, expected, tol))


@check("gqa_module", points=0.5)
def test_module_parameters(student):
    """GroupedQueryAttention(d_model, num_q_heads, num_kv_heads) 的参数正好是 W_q, W_k, W_v, W_o 的 weight（没有 bias），形状正确"""
    config = (40, 4, 2)
    want = pinned_shapes(*config)
    run = student.module("GroupedQueryAttention", config, return_state=True)
    expect_parameters(run.param_shapes, want, f"GroupedQueryAttention{config}", keys=key_mistakes(config))


@check("gqa_module", points=0.5)
def test_module_single_token(student, rng):
    """只有一个 token 时（注意力权重恒为 1）输出和梯度正确：Q/K/V 投影、KV 头配对、合并头和 W_o（float64）"""
    config = (72, 6, 2)
    weights = gqa_weights(rng, config, torch.float64)
    x = torch.randn(3, 1, 72, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, rng=rng)


@check("gqa_module", points=1)
def test_module_no_mask_float32(student, rng):
    """不传 mask（默认 None）时，float32 的 forward、输入梯度和参数梯度都与参考实现一致"""
    config = (96, 8, 2)
    weights = gqa_weights(rng, config, torch.float32)
    x = torch.randn(2, 6, 96, generator=rng)
    run_module(student, config, weights, x, rng=rng)


@check("gqa_module", points=1)
def test_module_causal_float64(student, rng):
    """加因果掩码时，float64 的 forward、输入梯度和参数梯度都与参考实现一致（batch 各行不同）"""
    config = (72, 6, 2)
    weights = gqa_weights(rng, config, torch.float64)
    x = torch.randn(3, 5, 72, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, causal_mask(5, torch.float64), mask_kind="causal",
               rng=rng)


@check("gqa_module", points=0.5)
def test_module_float64_precision(student, rng):
    """加因果掩码时，float64 的输入全程用 float64 计算：forward 与参考实现一致到 float64 的精度"""
    config = (72, 6, 2)
    weights = gqa_weights(rng, config, torch.float64)
    x = torch.randn(3, 5, 72, generator=rng, dtype=torch.float64)
    expect_module_precision(student, ref, "GroupedQueryAttention", config, weights=weights,
                            args=(x, causal_mask(5, torch.float64)), what="GroupedQueryAttention 的输出",
                            keys=key_mistakes(config))


@check("gqa_module", points=1)
def test_module_random_mask_float64(student, rng):
    """任意（非因果）的加性 0/-inf 掩码按关键字 mask= 传入时，forward 和各个梯度都与参考实现一致（float64）"""
    config = (60, 6, 3)
    weights = gqa_weights(rng, config, torch.float64)
    x = torch.randn(2, 7, 60, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, random_mask(rng, 7, torch.float64), mask_kind="random",
               mask_by_keyword=True, rng=rng)


@check("gqa_module", points=0.5)
def test_module_mha_and_mqa(student, rng):
    """num_kv_heads == num_q_heads（即 MHA）和 num_kv_heads == 1（即 MQA）时也与参考实现一致（float64）"""
    for config in [(40, 4, 4), (40, 4, 1)]:
        weights = gqa_weights(rng, config, torch.float64)
        x = torch.randn(2, 3, 40, generator=rng, dtype=torch.float64)
        run_module(student, config, weights, x, rng=rng)
