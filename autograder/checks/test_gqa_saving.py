"""Checks of the gqa_saving assignment: homework-2 numbers, kv_cache_bytes, repeat_kv, GroupedQueryAttention.

Inputs (EXERCISES.md, "Inputs must separate these variants"): 1 < num_kv_heads < num_q_heads with
num_q_heads // num_kv_heads > 1, seq_len different from both head counts, sqrt(d_model) != d_head,
batch >= 2 with different rows, random weights scaled so that attention scores are O(1) (the
scale variants then differ from the reference by far more than the tolerance), a causal mask and
a random non-causal 0/-inf mask (some blocked entries, never a whole row).

When a comparison fails, the same inputs and weights go through the known-wrong variants below
(grader side only) and a match names the mistake in the message and in `diagnosis`.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import (
    causal_mask,
    same_values,
    F32_ATTN,
    F64,
    HAND,
    CheckFailed,
    check,
    expect_close,
    expect_int,
    expect_module_matches,
    expect_number,
    expect_true,
    run_reference,
)
from autograder.probes import describe_value
from solutions import gqa_saving as ref
from solutions.student_params import student_answers, student_params

# --- diagnosis: the catalogued mistakes, as known-wrong variants of the reference ------------------

HINTS = {
    # hand computation and kv_cache_bytes
    "k_only": "你的结果正好是正确答案的一半：是否只算了 K，漏了 V（公式前面的因子 2）？",
    "fp32_bytes": "你的结果正好是正确答案的 2 倍：是否按 FP32（4 字节）算了？本题是 FP16，每个元素 2 字节",
    "bits_not_bytes": "你的结果正好是正确答案的 8 倍：是否算成了比特（bit）？要的是字节",
    "mib_not_bytes": "你的结果像是换算成了 MiB（除以 1024²）：要的是字节数",
    "mb_not_bytes": "你的结果像是换算成了 MB（除以 10⁶）：要的是字节数",
    "percent_not_fraction": "你的 saving_ratio 像是百分数：应填 0 到 1 之间的小数（省一半填 0.5）",
    "forgot_one_minus": "你填的是 GQA 与 MHA 的比值：题目要的是省下的比例，即 1 减去这个比值",
    "q_heads_for_kv": "GQA 的 KV Cache 应该用 num_kv_heads 个 KV 头，而不是 num_q_heads",
    "ignores_num_layers": "你的结果与 num_layers 无关：整个模型的 KV Cache 是一层的 num_layers 倍",
    "ignores_bytes_per_element": "你的结果没有用传入的 bytes_per_element（总是按 2 字节算）",
    # repeat_kv and the module
    "mod_mapping": "结果与「第 h 个 Q 头用第 h % num_kv_heads 个 KV 头」的配对一致（本章 §7.1 代码的排列，"
                   "新维度插在了 KV 头维的前面）；本作业约定第 h 个 Q 头用第 h // n_rep 个 KV 头",
    "repeat_wrong_dim": "结果像是在序列维（第 1 维）而不是 KV 头维（第 2 维）上做了重复",
    "no_scale": "结果与「分数没有除以 √d_head」一致：缩放是 1/√d_head",
    "sqrt_d_model": "结果与「分数除以 √d_model」一致：缩放应该是 1/√d_head（d_head = d_model // num_q_heads）",
    "mask_ignored": "结果与「没有使用 mask」一致：forward 是否忽略了 mask 参数？",
    "mask_multiplied": "结果与「mask 乘到分数上」一致：mask 是加性的，应该加到缩放后的分数上",
    "softmax_wrong_dim": "结果与「softmax 沿查询维（倒数第二维）做」一致：应沿最后一维（key 的维度）做 softmax",
    "no_transpose_out": "结果与「合并头时没有先 transpose 就 reshape」一致：应先把 [B, H, S, d_head] 转成 "
                        "[B, S, H, d_head] 再合并成 [B, S, H * d_head]",
    "q_reshaped_not_transposed": "结果与「把 Q 直接 view/reshape 成 [B, H, S, d_head]」一致：应先 view 成 "
                                 "[B, S, H, d_head] 再 transpose(1, 2)",
}

MODULE_VARIANTS = ("mod_mapping", "no_scale", "sqrt_d_model", "mask_ignored", "mask_multiplied",
                   "softmax_wrong_dim", "no_transpose_out", "q_reshaped_not_transposed")


def gqa_variant(weights: dict, x, mask, num_q_heads: int, num_kv_heads: int, variant: str):
    """GroupedQueryAttention's forward with one catalogued mistake (weights by the pinned names)."""
    B, S, d_model = x.shape
    H, d_head = num_q_heads, d_model // num_q_heads
    n_rep = num_q_heads // num_kv_heads
    q = x @ weights["W_q.weight"].T
    k = (x @ weights["W_k.weight"].T).view(B, S, num_kv_heads, d_head)
    v = (x @ weights["W_v.weight"].T).view(B, S, num_kv_heads, d_head)
    if variant == "mod_mapping":
        kv_of_head = [h % num_kv_heads for h in range(H)]
    else:
        kv_of_head = [h // n_rep for h in range(H)]
    k, v = k[:, :, kv_of_head].transpose(1, 2), v[:, :, kv_of_head].transpose(1, 2)
    if variant == "q_reshaped_not_transposed":
        q = q.reshape(B, H, S, d_head)
    else:
        q = q.view(B, S, H, d_head).transpose(1, 2)
    scale = {"no_scale": 1.0, "sqrt_d_model": 1 / math.sqrt(d_model)}.get(variant, 1 / math.sqrt(d_head))
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None and variant != "mask_ignored":
        scores = scores * mask if variant == "mask_multiplied" else scores + mask
    attn = F.softmax(scores, dim=-2 if variant == "softmax_wrong_dim" else -1)
    out = attn @ v
    if variant == "no_transpose_out":
        out = out.reshape(B, S, H * d_head)
    else:
        out = out.transpose(1, 2).reshape(B, S, H * d_head)
    return out @ weights["W_o.weight"].T


def repeat_kv_variant(x, n_rep: int, variant: str):
    B, S, H, D = x.shape
    if variant == "mod_mapping":
        return x[:, :, None].expand(B, S, n_rep, H, D).reshape(B, S, n_rep * H, D)
    if variant == "repeat_wrong_dim":
        return torch.repeat_interleave(x, n_rep, dim=1)
    raise ValueError(variant)


def diagnosed(failure: CheckFailed, name: str | None) -> CheckFailed:
    if name is None:
        return failure
    return CheckFailed(f"{failure.message}。{HINTS[name]}", failure.details, diagnosis=name)


def expect_close_diagnosed(actual, expected, tol, variants: dict, what: str = "输出"):
    """expect_close; on failure, name the first variant whose values `actual` has."""
    try:
        expect_close(actual, expected, tol, what)
    except CheckFailed as failure:
        match = next((name for name, value in variants.items()
                      if not same_values(expected, value, tol) and same_values(actual, value, tol)), None)
        raise diagnosed(failure, match) from None


def expect_number_diagnosed(actual, expected, what: str, slips: dict, integer: bool = False):
    """A typed hand answer; on failure, name the catalogued slip that gives the student's number."""
    try:
        (expect_int if integer else expect_number)(actual, expected, what)
    except CheckFailed as failure:
        match = None
        if isinstance(actual, (int, float)) and not isinstance(actual, bool) and math.isfinite(actual):
            match = next((name for name, value in slips.items()
                          if abs(value - expected) > HAND * abs(expected)
                          and abs(actual - value) <= HAND * max(abs(value), 1e-12)), None)
        raise diagnosed(failure, match) from None


# --- gqa_hand ---------------------------------------------------------------------------------------


@pytest.fixture
def answers(student_id):
    return student_answers("gqa_saving", student_id)


@pytest.fixture
def slips(student_id):
    return ref.hand_slips(student_params("gqa_saving", student_id))


@check("gqa_hand", points=1)
def test_hand_mha_kv_bytes(student, answers, slips):
    """mha_kv_bytes（MHA 一层 KV Cache 的字节数）与按你的学号算出的答案一致"""
    expect_number_diagnosed(student.variable("mha_kv_bytes"), answers["mha_kv_bytes"], "mha_kv_bytes",
                            {name: s["mha_kv_bytes"] for name, s in slips.items()}, integer=True)


@check("gqa_hand", points=1)
def test_hand_gqa_kv_bytes(student, answers, slips):
    """gqa_kv_bytes（GQA 一层 KV Cache 的字节数）与按你的学号算出的答案一致"""
    expect_number_diagnosed(student.variable("gqa_kv_bytes"), answers["gqa_kv_bytes"], "gqa_kv_bytes",
                            {name: s["gqa_kv_bytes"] for name, s in slips.items()}, integer=True)


@check("gqa_hand", points=1)
def test_hand_saving_ratio(student, answers, slips):
    """saving_ratio（GQA 省下的比例，0 到 1 的小数）与按你的学号算出的答案一致（4 位有效数字）"""
    expect_number_diagnosed(student.variable("saving_ratio"), answers["saving_ratio"], "saving_ratio",
                            {name: s["saving_ratio"] for name, s in slips.items()})


# --- kv_cache_bytes ---------------------------------------------------------------------------------


def random_config(rng) -> tuple[int, int, int, int]:
    """(batch, seq_len, num_kv_heads, head_dim), none of them 1 or 2 (so that no factor hides another)."""
    pick = lambda low, high: int(torch.randint(low, high, (1,), generator=rng))  # noqa: E731
    return pick(3, 17), pick(100, 9000), pick(3, 17), 16 * pick(3, 9)


def kv_bytes_slips(b, s, h, d, bpe=2, layers=1) -> dict:
    right = ref.kv_cache_bytes(b, s, h, d, bpe, layers)
    return {"k_only": right / 2, "fp32_bytes": right * 2, "bits_not_bytes": right * 8,
            "mib_not_bytes": right / 1024**2, "mb_not_bytes": right / 1e6,
            "ignores_num_layers": right / layers, "ignores_bytes_per_element": right * 2 / bpe}


def expect_kv_bytes(actual, args: tuple, kwargs: dict):
    expected = ref.kv_cache_bytes(*args, **kwargs)
    slips = kv_bytes_slips(*args, kwargs.get("bytes_per_element", 2), kwargs.get("num_layers", 1))
    expect_number_diagnosed(actual, expected, "kv_cache_bytes(...)", slips, integer=True)


@check("kv_cache_bytes", points=1)
def test_kv_cache_bytes_fp16_one_layer(student, rng):
    """kv_cache_bytes 在默认参数（FP16、一层）下，对几组不同的配置都给出正确的字节数"""
    for _ in range(4):
        config = random_config(rng)
        expect_kv_bytes(student.call("kv_cache_bytes", *config), config, {})


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
        if (bpe, layers) == (2, 1):
            raise CheckFailed("显式传入 bytes_per_element=2, num_layers=1 与不传时结果不同：默认值应该是 "
                              "bytes_per_element=2, num_layers=1")
        if abs(ratio - bpe / 2) <= 1e-9 * want:
            raise CheckFailed(f"改变 num_layers 时结果没有按比例变化。{HINTS['ignores_num_layers']}",
                              diagnosis="ignores_num_layers")
        if abs(ratio - layers) <= 1e-9 * want:
            raise CheckFailed(f"改变 bytes_per_element 时结果没有按比例变化。{HINTS['ignores_bytes_per_element']}",
                              diagnosis="ignores_bytes_per_element")
        raise CheckFailed("结果没有与 bytes_per_element × num_layers 成正比：检查这两个参数是否都乘进去了")


@check("kv_cache_bytes", points=0.5)
def test_kv_cache_bytes_returns_int(student, rng):
    """kv_cache_bytes 返回 Python int（字节数是整数，不是 float、tensor 或 MiB），整个模型的大数也一样"""
    batch, seq_len, heads, head_dim = random_config(rng)
    value = student.call("kv_cache_bytes", batch, 16 * seq_len, heads, head_dim, 2, 80)
    expect_true(type(value) is int,
                f"kv_cache_bytes 应该返回 Python int，你的返回了 {describe_value(value)}"
                "（用 / 会得到 float；字节数请用整数运算）",
                {"type": describe_value(value)})


# --- repeat_kv --------------------------------------------------------------------------------------


@check("repeat_kv", points=1)
def test_repeat_kv_layout_float64(student, rng):
    """repeat_kv 的排列正确：第 h 个输出头是第 h // n_rep 个 KV 头（float64，batch 和序列各行不同）"""
    x = torch.randn(2, 5, 3, 4, generator=rng, dtype=torch.float64)
    variants = {name: repeat_kv_variant(x, 4, name) for name in ("mod_mapping", "repeat_wrong_dim")}
    expect_close_diagnosed(student.call("repeat_kv", x, 4), ref.repeat_kv(x, 4), F64, variants)


@check("repeat_kv", points=0.5)
def test_repeat_kv_single_kv_head_float32(student, rng):
    """只有 1 个 KV 头（MQA）时 repeat_kv 也正确，float32 输入得到 float32 输出"""
    x = torch.randn(3, 7, 1, 8, generator=rng)
    expect_close(student.call("repeat_kv", x, 6), ref.repeat_kv(x, 6), F32_ATTN)


@check("repeat_kv", points=0.5)
def test_repeat_kv_n_rep_one(student, rng):
    """n_rep = 1 时 repeat_kv 原样返回输入"""
    x = torch.randn(2, 6, 4, 5, generator=rng, dtype=torch.float64)
    expect_close(student.call("repeat_kv", x, 1), x.clone(), F64)


# --- gqa_module -------------------------------------------------------------------------------------


def random_weights(rng, d_model: int, num_q_heads: int, num_kv_heads: int, dtype) -> dict:
    """Weights by the pinned names, N(0, 1.5² / fan_in): attention scores of order 1, far from uniform."""
    d_head = d_model // num_q_heads
    shapes = {"W_q.weight": (num_q_heads * d_head, d_model), "W_k.weight": (num_kv_heads * d_head, d_model),
              "W_v.weight": (num_kv_heads * d_head, d_model), "W_o.weight": (d_model, num_q_heads * d_head)}
    return {name: (1.5 / math.sqrt(shape[1])) * torch.randn(shape, generator=rng, dtype=torch.float64).to(dtype)
            for name, shape in shapes.items()}


def random_mask(rng, S: int, dtype) -> torch.Tensor:
    """A non-causal 0/-inf mask: about a third of the entries blocked, at least one blocked above and below
    the diagonal, never a whole row."""
    blocked = torch.rand(S, S, generator=rng) < 0.35
    blocked[0, S - 1] = blocked[S - 1, 0] = True
    for i in range(S):
        if blocked[i].all():
            blocked[i, int(torch.randint(0, S, (1,), generator=rng))] = False
    mask = torch.zeros(S, S, dtype=dtype)
    mask[blocked] = float("-inf")
    return mask


def run_module(student, config: tuple, weights: dict, x, mask=None, *, mask_by_keyword=False, dtype, rng,
               what="GroupedQueryAttention"):
    """Forward and backward of the student's module and of the reference on the same weights and inputs;
    on a mismatch, the catalogued variants are tried on the output."""
    d_model, num_q_heads, num_kv_heads = config
    grad = torch.randn(x.shape, generator=rng, dtype=torch.float64).to(dtype)
    args, kwargs = (x,), {}
    if mask is not None:
        if mask_by_keyword:
            kwargs = {"mask": mask}
        else:
            args = (x, mask)
    reference = ref.GroupedQueryAttention(*config).to(dtype)
    reference.load_state_dict(weights)
    expected = run_reference(reference, args, kwargs, grad_outputs=[grad], requires_grad=[0])
    run = student.module("GroupedQueryAttention", config, state_dict=weights, dtype=dtype, method="forward",
                         args=args, kwargs=kwargs, grad_outputs=[grad], requires_grad=[0])
    tol = F64 if dtype == torch.float64 else F32_ATTN
    try:
        expect_module_matches(run, expected, tol, what)
    except CheckFailed as failure:
        match = None
        if isinstance(run.outputs, torch.Tensor):
            with torch.no_grad():
                for name in MODULE_VARIANTS:
                    value = gqa_variant(weights, x, mask, num_q_heads, num_kv_heads, name)
                    if not same_values(expected["outputs"], value, tol) and same_values(run.outputs, value, tol):
                        match = name
                        break
        raise diagnosed(failure, match) from None


@check("gqa_module", points=0.5)
def test_module_parameters(student):
    """GroupedQueryAttention(d_model, num_q_heads, num_kv_heads) 的参数正好是 W_q, W_k, W_v, W_o 的 weight（没有 bias），形状正确"""
    d_model, num_q_heads, num_kv_heads = 40, 4, 2
    d_head = d_model // num_q_heads
    want = {"W_q.weight": [num_q_heads * d_head, d_model], "W_k.weight": [num_kv_heads * d_head, d_model],
            "W_v.weight": [num_kv_heads * d_head, d_model], "W_o.weight": [d_model, num_q_heads * d_head]}
    run = student.module("GroupedQueryAttention", (d_model, num_q_heads, num_kv_heads), return_state=True)
    expect_true(run.param_shapes == want,
                f"GroupedQueryAttention({d_model}, {num_q_heads}, {num_kv_heads}) 的参数应该是 {want}，"
                f"你的是 {run.param_shapes}",
                {"param_shapes": run.param_shapes})


@check("gqa_module", points=0.5)
def test_module_single_token(student, rng):
    """只有一个 token 时（注意力权重恒为 1）输出和梯度正确：Q/K/V 投影、KV 头配对、合并头和 W_o（float64）"""
    config = (72, 6, 2)
    weights = random_weights(rng, *config, torch.float64)
    x = torch.randn(3, 1, 72, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, dtype=torch.float64, rng=rng)


@check("gqa_module", points=1)
def test_module_no_mask_float32(student, rng):
    """不传 mask（默认 None）时，float32 的 forward、输入梯度和参数梯度都与参考实现一致"""
    config = (96, 8, 2)
    weights = random_weights(rng, *config, torch.float32)
    x = torch.randn(2, 6, 96, generator=rng)
    run_module(student, config, weights, x, dtype=torch.float32, rng=rng)


@check("gqa_module", points=1.5)
def test_module_causal_float64(student, rng):
    """加因果掩码时，float64 的 forward、输入梯度和参数梯度都与参考实现一致（batch 各行不同）"""
    config = (72, 6, 2)
    weights = random_weights(rng, *config, torch.float64)
    x = torch.randn(3, 5, 72, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, causal_mask(5, torch.float64), dtype=torch.float64, rng=rng)


@check("gqa_module", points=1)
def test_module_random_mask_float64(student, rng):
    """任意（非因果）的加性 0/-inf 掩码按关键字 mask= 传入时，forward 和各个梯度都与参考实现一致（float64）"""
    config = (60, 6, 3)
    weights = random_weights(rng, *config, torch.float64)
    x = torch.randn(2, 7, 60, generator=rng, dtype=torch.float64)
    run_module(student, config, weights, x, random_mask(rng, 7, torch.float64), mask_by_keyword=True,
               dtype=torch.float64, rng=rng)


@check("gqa_module", points=0.5)
def test_module_mha_and_mqa(student, rng):
    """num_kv_heads == num_q_heads（即 MHA）和 num_kv_heads == 1（即 MQA）时也与参考实现一致（float64）"""
    for config in [(40, 4, 4), (40, 4, 1)]:
        weights = random_weights(rng, *config, torch.float64)
        x = torch.randn(2, 3, 40, generator=rng, dtype=torch.float64)
        run_module(student, config, weights, x, dtype=torch.float64, rng=rng)
