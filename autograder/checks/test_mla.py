"""Checks of the mla assignment: the MultiHeadLatentAttention module, mla_cache_bytes, the MHA / GQA / MLA
comparison in the student's own numbers, and the bonus absorbed forward.

Inputs: batch >= 2 with different rows; random weights N(0, 1/fan_in) by the pinned names, so that the
attention is far from uniform; d_model = 48, num_heads = 4 (d_head = 12, sqrt(d_model) ~ 6.9 != d_head);
d_latent = 20 != d_head; seq_len = 7 != num_heads. The mask check uses a random non-causal additive mask
with finite non-zero entries and some -inf (never a whole row), so a mask that is ignored, multiplied, or
read as a boolean gives a different output. Cache sizes use d_rope > 0, bytes_per_element = 4, several
layers, and batch, seq_len >= 2.

When a comparison fails, the same inputs and weights go through known-wrong variants (written here,
grader side only); a match names the mistake in the message and in `diagnosis`.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from autograder.checks import (causal_mask, same_values, F32_ATTN, F64, CheckFailed, check, expect_close, expect_int, expect_module_matches,
                               expect_true, expect_weights_loaded, module_arg, run_reference)
from solutions import mla as ref
from solutions.student_params import student_answers, student_params

D_MODEL, NUM_HEADS, D_LATENT = 48, 4, 20  # d_head = 12
BATCH, SEQ = 3, 7
CLASS = "MultiHeadLatentAttention"

PARAM_SHAPES = {
    "W_q.weight": [D_MODEL, D_MODEL],
    "W_kv_down.weight": [D_LATENT, D_MODEL],
    "W_k_up.weight": [D_MODEL, D_LATENT],
    "W_v_up.weight": [D_MODEL, D_LATENT],
    "W_o.weight": [D_MODEL, D_MODEL],
}

# --- diagnosis: the catalogued mistakes ------------------------------------------------------------

HINTS = {
    # the module (and the same slips in the absorbed path)
    "no_scale": "结果与「分数没有除以 √d_head」一致：缩放是 1/√d_head",
    "sqrt_d_model": "结果与「分数除以 √d_model」一致：缩放应该是 1/√d_head（d_head = d_model // num_heads）",
    "mask_ignored": "结果与「没有使用 mask」一致：是否忽略了 mask 参数？",
    "mask_multiplied": "结果与「mask 乘到分数上」一致：mask 是加性的，应该加到缩放后的分数上",
    "mask_as_boolean": "结果与「只用了 mask 里 -inf 的位置（当成布尔掩码），忽略了其余的有限值」一致："
                       "mask 是加性的，整个加到缩放后的分数上",
    "softmax_wrong_dim": "结果与「softmax 沿查询维（倒数第二维）做」一致：应沿最后一维（key 的位置）做 softmax",
    "w_k_up_for_v": "结果与「V 也用 W_k_up 从 latent 解压」一致：V 应该用 W_v_up",
    "w_v_up_for_k": "结果与「K 用 W_v_up 从 latent 解压」一致：K 应该用 W_k_up",
    "no_transpose_out": "结果与「合并头时没有先 transpose 就 reshape」一致：应先把 [B, H, S, d_head] 转成 "
                        "[B, S, H, d_head] 再合并成 [B, S, d_model]",
    "q_reshaped_not_transposed": "结果与「把 Q 直接 view/reshape 成 [B, H, S, d_head]」一致：应先 view 成 "
                                 "[B, S, H, d_head] 再 transpose(1, 2)",
    "absorbed_wrong_split": "结果与「把 W_k_up.weight 转置后再按头切开」一致：W_k_up.weight 的形状是 "
                            "[d_model, d_latent]，直接 view 成 [H, d_head, d_latent]",
    # the cache returned by forward
    "cache_returns_k": "返回的第 2 个值是 K（W_k_up 解压后的结果）：要缓存、要返回的是 latent c_kv = W_kv_down(x) 本身",
    "cache_returns_v": "返回的第 2 个值是 V（W_v_up 解压后的结果）：要缓存、要返回的是 latent c_kv = W_kv_down(x) 本身",
    # byte counts
    "latent_for_k_and_v": "你的结果正好是正确答案的 2 倍：是否把 latent 按 K、V 各算了一份？一个 c_kv 同时服务 K 和 V",
    "rope_key_forgotten": "你的结果与「没有算解耦 RoPE key」一致：每个 token 缓存 d_latent + d_rope 个元素",
    "latent_per_head": "你的结果正好是正确答案的 num_heads 倍：latent 是所有头共用的，不乘头数",
    "cached_k_and_v": "你的 mla_bytes 等于 MHA 的 KV Cache：MLA 缓存的是 latent，不是解压后的 K 和 V",
    "bits_not_bytes": "你的结果正好是正确答案的 8 倍：是否算成了比特（bit）？要的是字节",
    "mib_not_bytes": "你的结果像是换算成了 MiB（除以 1024²）：要的是字节数",
    "mb_not_bytes": "你的结果像是换算成了 MB（除以 10⁶）：要的是字节数",
    "ignores_num_layers": "你的结果与 num_layers 无关：整个模型的缓存是一层的 num_layers 倍",
    "ignores_bytes_per_element": "你的结果没有用传入的 bytes_per_element（总是按 2 字节算）",
    "k_only": "你的结果正好是正确答案的一半：是否只算了 K，漏了 V（因子 2）？",
    "fp32_bytes": "你的结果正好是正确答案的 2 倍：是否按 FP32（4 字节）算了？本题是 FP16，每个元素 2 字节",
    "q_heads_for_kv": "GQA 的 KV Cache 应该用 num_kv_heads 个 KV 头，而不是 num_heads",
}

MODULE_VARIANTS = ("no_scale", "sqrt_d_model", "mask_ignored", "mask_multiplied", "mask_as_boolean",
                   "softmax_wrong_dim", "w_k_up_for_v", "w_v_up_for_k", "no_transpose_out",
                   "q_reshaped_not_transposed")
ABSORBED_VARIANTS = ("no_scale", "sqrt_d_model", "mask_ignored", "mask_multiplied", "mask_as_boolean",
                     "softmax_wrong_dim", "w_k_up_for_v", "w_v_up_for_k", "absorbed_wrong_split")


def mla_variant(weights: dict, x, mask, num_heads: int, variant: str | None = None) -> torch.Tensor:
    """The out of MultiHeadLatentAttention's forward with one catalogued mistake (weights by the pinned names)."""
    B, S, d_model = x.shape
    H, d_head = num_heads, d_model // num_heads
    w_k, w_v = weights["W_k_up.weight"], weights["W_v_up.weight"]
    if variant == "w_k_up_for_v":
        w_v = w_k
    elif variant == "w_v_up_for_k":
        w_k = w_v
    elif variant == "absorbed_wrong_split":
        w_k = w_k.t().reshape(w_k.shape)
    c = x @ weights["W_kv_down.weight"].T
    q = x @ weights["W_q.weight"].T
    if variant == "q_reshaped_not_transposed":
        q = q.reshape(B, H, S, d_head)
    else:
        q = q.view(B, S, H, d_head).transpose(1, 2)
    k = (c @ w_k.T).view(B, S, H, d_head).transpose(1, 2)
    v = (c @ w_v.T).view(B, S, H, d_head).transpose(1, 2)
    scale = {"no_scale": 1.0, "sqrt_d_model": 1 / math.sqrt(d_model)}.get(variant, 1 / math.sqrt(d_head))
    scores = q @ k.transpose(-2, -1) * scale
    if mask is not None and variant != "mask_ignored":
        if variant == "mask_multiplied":
            scores = scores * mask
        elif variant == "mask_as_boolean":
            scores = scores.masked_fill(torch.isinf(mask), float("-inf"))
        else:
            scores = scores + mask
    out = F.softmax(scores, dim=-2 if variant == "softmax_wrong_dim" else -1) @ v
    if variant == "no_transpose_out":
        out = out.reshape(B, S, d_model)
    else:
        out = out.transpose(1, 2).reshape(B, S, d_model)
    return out @ weights["W_o.weight"].T


def cache_variants(weights: dict, x, num_heads: int) -> dict:
    """What a forward that caches K or V instead of c_kv returns as its second value (whole or split by head)."""
    B, S, d_model = x.shape
    c = x @ weights["W_kv_down.weight"].T
    found = {}
    for name, w in [("cache_returns_k", weights["W_k_up.weight"]), ("cache_returns_v", weights["W_v_up.weight"])]:
        whole = c @ w.T
        found[name] = [whole, whole.view(B, S, num_heads, -1), whole.view(B, S, num_heads, -1).transpose(1, 2)]
    return found


def diagnosed(failure: CheckFailed, name: str | None) -> CheckFailed:
    if name is None:
        return failure
    return CheckFailed(f"{failure.message}。{HINTS[name]}", failure.details, diagnosis=name)


def out_diagnosis(actual, expected, weights, x, mask, num_heads, tol, names) -> str | None:
    """The first catalogued variant whose out `actual` matches (and the reference does not)."""
    if not isinstance(actual, torch.Tensor):
        return None
    weights = {k: v.double() for k, v in weights.items()}
    with torch.no_grad():
        for name in names:
            if mask is None and name.startswith("mask_"):
                continue
            value = mla_variant(weights, x.double(), None if mask is None else mask.double(), num_heads, name)
            if not same_values(expected, value, tol) and same_values(actual, value, tol):
                return name
    return None


def module_diagnosis(outputs, expected: tuple, weights, x, mask, num_heads, tol) -> str | None:
    if not isinstance(outputs, (tuple, list)) or len(outputs) != 2:
        return None
    name = out_diagnosis(outputs[0], expected[0], weights, x, mask, num_heads, tol, MODULE_VARIANTS)
    if name is not None:
        return name
    with torch.no_grad():
        for name, candidates in cache_variants({k: v.double() for k, v in weights.items()}, x.double(),
                                               num_heads).items():
            if any(same_values(outputs[1], value, tol) for value in candidates):
                return name
    return None


def expect_int_diagnosed(actual, expected: int, what: str, slips: dict):
    """An integer answer; on failure, name the catalogued slip that gives the student's number."""
    try:
        expect_int(actual, expected, what)
    except CheckFailed as failure:
        match = None
        if isinstance(actual, (int, float)) and not isinstance(actual, bool) and math.isfinite(actual):
            match = next((name for name, value in slips.items()
                          if value != expected and abs(actual - value) <= 5e-4 * max(abs(value), 1e-12)), None)
        raise diagnosed(failure, match) from None


# --- inputs ---------------------------------------------------------------------------------------


def random_weights(rng, d_model, d_latent, dtype):
    """Weights for every pinned parameter: N(0, 1/fan_in) (unlike the init the student's module starts with)."""
    shapes = {
        "W_q.weight": (d_model, d_model), "W_kv_down.weight": (d_latent, d_model),
        "W_k_up.weight": (d_model, d_latent), "W_v_up.weight": (d_model, d_latent), "W_o.weight": (d_model, d_model),
    }
    return {name: (torch.randn(shape, generator=rng, dtype=torch.float64) / math.sqrt(shape[1])).to(dtype)
            for name, shape in shapes.items()}


def reference_module(state, d_model=D_MODEL, num_heads=NUM_HEADS, d_latent=D_LATENT, dtype=torch.float64):
    module = ref.MultiHeadLatentAttention(d_model, num_heads, d_latent).to(dtype)
    module.load_state_dict(state)
    return module


def random_additive_mask(rng, seq_len, dtype):
    """Random finite values (not just 0) with about 30% -inf, the diagonal never blocked."""
    mask = torch.randn(seq_len, seq_len, generator=rng, dtype=torch.float64)
    blocked = torch.rand(seq_len, seq_len, generator=rng, dtype=torch.float64) < 0.3
    blocked[0, seq_len - 1] = blocked[seq_len - 1, 0] = True  # blocked entries on both sides of the diagonal
    blocked.fill_diagonal_(False)
    return mask.masked_fill(blocked, float("-inf")).to(dtype)


@pytest.fixture
def weights64(rng):
    return random_weights(rng, D_MODEL, D_LATENT, torch.float64)


@pytest.fixture
def x64(rng):
    return torch.randn(BATCH, SEQ, D_MODEL, generator=rng, dtype=torch.float64)


# --- mla_module -----------------------------------------------------------------------------------


@check("mla_module", points=1)
def test_module_parameters(student):
    """MultiHeadLatentAttention 的参数正好是 W_q、W_kv_down、W_k_up、W_v_up、W_o 的 weight（无 bias），形状符合约定"""
    run = student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT))
    shapes = run.param_shapes
    problems = []
    if set(shapes) - set(PARAM_SHAPES):
        problems.append(f"有约定之外的参数 {sorted(set(shapes) - set(PARAM_SHAPES))}")
    if set(PARAM_SHAPES) - set(shapes):
        problems.append(f"缺少参数 {sorted(set(PARAM_SHAPES) - set(shapes))}")
    problems += [f"{name} 的形状应该是 {want}，你的是 {shapes[name]}"
                 for name, want in PARAM_SHAPES.items() if name in shapes and shapes[name] != want]
    expect_true(not problems,
                f"{CLASS}({D_MODEL}, {NUM_HEADS}, {D_LATENT}) 的参数与约定不一致：{'；'.join(problems)}",
                {"param_shapes": shapes})


def expect_forward(student, weights, x, mask, tol, num_heads=NUM_HEADS, d_latent=D_LATENT, dtype=torch.float64):
    """The student's forward (both returned values) matches the reference's; a mismatch is diagnosed."""
    d_model = x.shape[-1]
    args = (x,) if mask is None else (x, mask)
    with torch.no_grad():
        expected = reference_module(weights, d_model, num_heads, d_latent, dtype)(*args)
    run = student.module(CLASS, (d_model, num_heads, d_latent), state_dict=weights, dtype=dtype,
                         method="forward", args=args)
    try:
        expect_module_matches(run, {"outputs": expected, "input_grads": [], "param_grads": {}}, tol, CLASS)
    except CheckFailed as failure:
        raise diagnosed(failure, module_diagnosis(run.outputs, expected, weights, x, mask, num_heads, tol)) from None


@check("mla_module", points=2)
def test_module_forward_backward_float64(student, weights64, x64, rng):
    """加载给定权重、用因果掩码时，返回的 out 和 c_kv、输入的梯度和五个权重的梯度都与参考实现一致（float64）"""
    mask = causal_mask(SEQ, torch.float64)
    # forward alone first: a wrong return value gets a clear (diagnosed) message before the backward needs it
    expect_forward(student, weights64, x64, mask, F64)
    grads = [torch.randn(BATCH, SEQ, D_MODEL, generator=rng, dtype=torch.float64),
             torch.randn(BATCH, SEQ, D_LATENT, generator=rng, dtype=torch.float64)]
    expected = run_reference(reference_module(weights64), (x64, mask), grad_outputs=grads, requires_grad=[0])
    run = student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64, dtype=torch.float64,
                         method="forward", args=(x64, mask), grad_outputs=grads, requires_grad=[0])
    expect_module_matches(run, expected, F64, CLASS)


@check("mla_module", points=1)
def test_module_additive_mask(student, weights64, x64, rng):
    """任意的加性掩码（不是因果掩码：有 -inf，也有非 0 的有限值）加在缩放后的分数上，out 与参考实现一致（float64）"""
    mask = random_additive_mask(rng, SEQ, torch.float64)
    with torch.no_grad():
        expected, _ = reference_module(weights64)(x64, mask)
    run = student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64, dtype=torch.float64,
                         method="forward", args=(x64, mask))
    expect_weights_loaded(run, CLASS)
    out = run.outputs[0] if isinstance(run.outputs, (tuple, list)) and len(run.outputs) == 2 else run.outputs
    try:
        expect_close(out, expected, F64, "forward 返回的第 1 个值（out）")
    except CheckFailed as failure:
        raise diagnosed(failure, out_diagnosis(out, expected, weights64, x64, mask, NUM_HEADS, F64,
                                               MODULE_VARIANTS)) from None


@check("mla_module", points=1)
def test_module_float32_no_mask(student, rng):
    """float32、不加掩码（mask=None，双向注意力）时，返回的 out 和 c_kv 都与参考实现一致"""
    d_model, num_heads, d_latent = 32, 4, 12  # d_head = 8
    weights = random_weights(rng, d_model, d_latent, torch.float32)
    x = torch.randn(2, 9, d_model, generator=rng)
    expect_forward(student, weights, x, None, F32_ATTN, num_heads, d_latent, dtype=torch.float32)


# --- mla_cache ------------------------------------------------------------------------------------


@pytest.fixture
def cache_config(rng):
    def pick(low, high):
        return int(torch.randint(low, high, (1,), generator=rng))

    return {"batch": pick(2, 9), "seq_len": pick(100, 5000), "d_latent": 64 * pick(2, 9), "d_rope": 16 * pick(1, 5)}


def cache_slips(batch, seq_len, d_latent, d_rope=0, bytes_per_element=2, num_layers=1) -> dict:
    right = ref.mla_cache_bytes(batch, seq_len, d_latent, d_rope, bytes_per_element, num_layers)
    return {"latent_for_k_and_v": 2 * right, "bits_not_bytes": 8 * right,
            "rope_key_forgotten": ref.mla_cache_bytes(batch, seq_len, d_latent, 0, bytes_per_element, num_layers),
            "ignores_num_layers": right // num_layers, "ignores_bytes_per_element": right * 2 // bytes_per_element,
            "mib_not_bytes": right / 1024**2, "mb_not_bytes": right / 1e6}


def expect_cache_bytes(actual, what, *args, **kwargs):
    expect_int_diagnosed(actual, ref.mla_cache_bytes(*args, **kwargs), what, cache_slips(*args, **kwargs))


@check("mla_cache", points=1)
def test_cache_chapter_version(student, cache_config):
    """mla_cache_bytes(batch, seq_len, d_latent) 使用默认参数（d_rope=0、FP16、单层）时与参考答案一致"""
    c = cache_config
    expect_cache_bytes(student.call("mla_cache_bytes", c["batch"], c["seq_len"], c["d_latent"]),
                       "mla_cache_bytes(batch, seq_len, d_latent)", c["batch"], c["seq_len"], c["d_latent"])


@check("mla_cache", points=1)
def test_cache_with_rope_key(student, cache_config):
    """mla_cache_bytes 把解耦 RoPE key 的 d_rope 维也算进缓存，与参考答案一致"""
    c = cache_config
    expect_cache_bytes(student.call("mla_cache_bytes", c["batch"], c["seq_len"], c["d_latent"], c["d_rope"]),
                       "mla_cache_bytes(batch, seq_len, d_latent, d_rope)",
                       c["batch"], c["seq_len"], c["d_latent"], c["d_rope"])


@check("mla_cache", points=1)
def test_cache_bytes_and_layers(student, cache_config, rng):
    """mla_cache_bytes 使用传入的 bytes_per_element 和 num_layers（FP32、多层）"""
    c = cache_config
    num_layers = int(torch.randint(3, 61, (1,), generator=rng))
    expect_cache_bytes(student.call("mla_cache_bytes", c["batch"], c["seq_len"], c["d_latent"], d_rope=0,
                                    bytes_per_element=4, num_layers=num_layers),
                       "mla_cache_bytes(..., bytes_per_element=4, num_layers=...)",
                       c["batch"], c["seq_len"], c["d_latent"], 0, 4, num_layers)


# --- mla_comparison -------------------------------------------------------------------------------


@pytest.fixture
def answers(student_id):
    return student_answers("mla", student_id)


@pytest.fixture
def inputs(student_id):
    return student_params("mla", student_id)


def common_slips(right: int) -> dict:
    return {"k_only": right // 2, "fp32_bytes": 2 * right, "bits_not_bytes": 8 * right,
            "mib_not_bytes": right / 1024**2, "mb_not_bytes": right / 1e6}


@check("mla_comparison", points=0.5)
def test_hand_mha_bytes(student, answers):
    """mha_bytes（MHA 一层的 KV Cache 字节数）与按你的学号算出的答案一致（精确比较）"""
    expect_int_diagnosed(student.variable("mha_bytes"), answers["mha_bytes"], "mha_bytes",
                         common_slips(answers["mha_bytes"]))


@check("mla_comparison", points=0.5)
def test_hand_gqa_bytes(student, answers):
    """gqa_bytes（GQA 一层的 KV Cache 字节数）与按你的学号算出的答案一致（精确比较）"""
    slips = common_slips(answers["gqa_bytes"])
    slips["q_heads_for_kv"] = answers["mha_bytes"]
    expect_int_diagnosed(student.variable("gqa_bytes"), answers["gqa_bytes"], "gqa_bytes", slips)


@check("mla_comparison", points=1)
def test_hand_mla_bytes(student, answers, inputs):
    """mla_bytes（MLA 一层的缓存字节数，含解耦 RoPE key）与按你的学号算出的答案一致（精确比较）"""
    right = answers["mla_bytes"]
    slips = {name: wrong["mla_bytes"] for name, wrong in ref.hand_slips(inputs).items()}
    slips.update({name: value for name, value in common_slips(right).items() if name != "fp32_bytes"})
    expect_int_diagnosed(student.variable("mla_bytes"), right, "mla_bytes", slips)


# --- mla_bonus ------------------------------------------------------------------------------------


def expect_absorbed(student, weights64, x64, mask):
    """The student's absorbed forward, on their own module loaded with the reference weights, gives the reference's out."""
    # the bonus runs on the student's own module: first make sure the weights load into it by name
    expect_weights_loaded(student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64,
                                         dtype=torch.float64), CLASS)
    with torch.no_grad():
        expected, _ = reference_module(weights64)(x64, mask)
    # materialising K or V (calling W_k_up / W_v_up, e.g. through mla.forward) is what the bonus must avoid
    mla = module_arg(CLASS, D_MODEL, NUM_HEADS, D_LATENT, state_dict=weights64, dtype=torch.float64,
                     forbid_calls=("W_k_up", "W_v_up"))
    args = (mla, x64) if mask is None else (mla, x64, mask)
    actual = student.call("mla_absorbed_forward", *args)
    try:
        expect_close(actual, expected, F64, "mla_absorbed_forward 的输出")
    except CheckFailed as failure:
        raise diagnosed(failure, out_diagnosis(actual, expected, weights64, x64, mask, NUM_HEADS, F64,
                                               ABSORBED_VARIANTS)) from None


@check("mla_bonus", points=1)
def test_absorbed_causal_float64(student, weights64, x64):
    """mla_absorbed_forward(mla, x, mask) 在因果掩码下与参考的 MLA 输出 out 一致（float64）"""
    expect_absorbed(student, weights64, x64, causal_mask(SEQ, torch.float64))


@check("mla_bonus", points=1)
def test_absorbed_no_mask_float64(student, weights64, x64):
    """mla_absorbed_forward(mla, x) 不传掩码（默认 mask=None）时与参考的 MLA 输出 out 一致（float64）"""
    expect_absorbed(student, weights64, x64, None)
