"""Checks of the mla assignment: the MultiHeadLatentAttention module, mla_cache_bytes, the MHA / GQA / MLA
comparison in the student's own numbers, and the bonus absorbed forward (graded on what the absorbed path
computes and a path that builds K and V does not: the latent queries and the latent context).

Inputs: batch >= 2 with different rows; random weights N(0, 1/fan_in) by the pinned names, so that the
attention is far from uniform; d_model = 48, num_heads = 4 (d_head = 12, sqrt(d_model) ~ 6.9 != d_head);
d_latent = 20 != d_head; seq_len = 7 != num_heads. The mask check uses a random non-causal additive mask
with finite non-zero entries and some -inf (never a whole row), so a mask that is ignored, multiplied, or
read as a boolean gives a different output. Cache sizes use d_rope > 0, bytes_per_element = 4, several
layers (never 4: a forgotten num_layers would then equal a forgotten bytes_per_element), and batch,
seq_len >= 2.

Diagnosis (autograder.checks): when a comparison fails, the same inputs and weights go through the
known-wrong variants of VARIANTS (written here, grader side only); a variant that matches, alone, is
named. Unexpected parameter names are named from the keys (KEY_MISTAKES: bias=True, MHA's W_k / W_v kept). A typed
number is compared with what each catalogued slip gives; when two slips give the same number (e.g. twice
the MLA cache: FP32, or the latent counted for K and V), the student's other answers decide (a unit slip
shows in every answer), else nothing is named. When nothing matches, the fault is localised where it is
cheap: under the causal mask, one extra probe tells whether an earlier output changes with the last token;
under the additive mask, whether the mask changes the output at all.
"""

import pytest
import torch

from autograder.catalogue.mla import VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (F32_ATTN, F64, CheckFailed, attempt, causal_mask, check, expect_close, expect_int,
                               expect_module, expect_module_precision, expect_parameters, expect_weights_loaded,
                               match_variant, module_arg, module_round_trip, number_close, random_weights, randint,
                               reference_with, same_values)
from autograder.checks.probes import describe_value
from autograder.checks.slips import attention_variants
from solutions import mla as ref
from solutions.student_params import student_answers, student_params

D_MODEL, NUM_HEADS, D_LATENT = 48, 4, 20  # d_head = 12
BATCH, SEQ = 3, 7
CLASS = "MultiHeadLatentAttention"

PINNED_LINEARS = ("W_q", "W_kv_down", "W_k_up", "W_v_up", "W_o")

# --- the catalogue of mistakes ---------------------------------------------------------------------


UNIT_SLIPS = ("fp32_bytes", "bits_not_bytes", "elements_not_bytes", "mib_not_bytes", "mb_not_bytes")

# --- the attention with catalogued mistakes ---------------------------------------------------------

# MLA's own ways of the mistakes (options of the kit's attention with slips: the shared families' paths are the
# kit's; MLA adds its latent projections' slips and more ways to split the heads without a transpose)
MLA_PATHS = {
    "mask_as_boolean": ({"mask_mode": "boolean"},),
    "w_k_up_for_v": ({"v_from": "W_k_up.weight"},),
    "w_v_up_for_k": ({"k_from": "W_v_up.weight"},),
    "view_without_transpose": ({"q_heads": "reshape", "kv_heads": "reshape"},
                               {"q_heads": "reshape", "kv_heads": "reshape", "merge": "reshape"},
                               {"q_heads": "reshape"}, {"q_heads": "reshape", "merge": "reshape"}),
    "absorbed_wrong_split": ({"split_k_transposed": True}, {"split_v_transposed": True},
                             {"split_k_transposed": True, "split_v_transposed": True}),
}
MODULE_VARIANTS = ("no_scale", "scale_d_model", "mask_ignored", "mask_multiplied", "mask_as_boolean",
                   "softmax_wrong_dim", "w_k_up_for_v", "w_v_up_for_k", "view_without_transpose",
                   "merge_heads_without_transpose", "no_output_projection")
ABSORBED_VARIANTS = MODULE_VARIANTS + ("absorbed_wrong_split", "absorbed_scale_d_latent")


def latent_projections(weights: dict, x):
    """project(**path) for the kit's attention with slips: q from W_q, k and v decompressed from the latent c_kv
    (by W_k_up and W_v_up, or down a slip's path: the other up-projection, one cut into heads transposed)."""
    def project(k_from="W_k_up.weight", v_from="W_v_up.weight", split_k_transposed=False, split_v_transposed=False,
                **_):
        w_k, w_v = weights[k_from], weights[v_from]
        if split_k_transposed:  # [d_latent, d_model] cut into heads as if it were [d_model, d_latent]
            w_k = w_k.t().reshape(w_k.shape)
        if split_v_transposed:
            w_v = w_v.t().reshape(w_v.shape)
        c = x @ weights["W_kv_down.weight"].T
        return x @ weights["W_q.weight"].T, c @ w_k.T, c @ w_v.T
    return project


def latent_attention_variants(weights: dict, x, mask, num_heads: int, names) -> list:
    """(name, out) down each known-wrong path of the variants `names`, in float64."""
    weights = {k: v.double() for k, v in weights.items()}
    mask = None if mask is None else mask.double()
    d_latent = weights["W_kv_down.weight"].shape[0]
    return attention_variants(names, latent_projections(weights, x.double()), weights["W_o.weight"], mask,
                                    paths=dict(MLA_PATHS, absorbed_scale_d_latent=({"scale": d_latent},)),
                                    num_heads=num_heads)


def cache_variants(weights: dict, x, num_heads: int) -> list:
    """What a forward that caches K or V instead of c_kv returns as its second value (whole or split by head)."""
    B, S, d_model = x.shape
    weights = {k: v.double() for k, v in weights.items()}
    with torch.no_grad():
        c = x.double() @ weights["W_kv_down.weight"].T
        found = []
        for name, w in [("cache_returns_k", weights["W_k_up.weight"]), ("cache_returns_v", weights["W_v_up.weight"])]:
            whole = c @ w.T
            found += [(name, whole), (name, whole.view(B, S, num_heads, -1)),
                      (name, whole.view(B, S, num_heads, -1).transpose(1, 2))]
    return found


def forward_variants(weights: dict, x, mask, num_heads: int) -> dict:
    """The variants of forward's two values: the out, and the cache."""
    return {0: lambda: latent_attention_variants(weights, x, mask, num_heads, MODULE_VARIANTS),
            1: lambda: cache_variants(weights, x, num_heads)}


KEY_MISTAKES = {  # named from the parameter names: extra ones the module has, pinned ones it lacks (`absent`)
    "linear_bias": lambda k: (bool(k.extra) and k.load_error is None and not k.wrong_shape and not k.absent and all(
        n.endswith(".bias") and n.removesuffix(".bias") in PINNED_LINEARS for n in k.extra)),
    "kept_w_k_w_v": lambda k: (bool(k.extra) and k.load_error is None and not k.wrong_shape
                               and k.absent <= {"W_k_up.weight", "W_v_up.weight"}
                               and all(n.split(".")[0] in ("W_k", "W_v") for n in k.extra)),
}


# --- localising what no variant explains --------------------------------------------------------------


def first_out(outputs):
    """The out the student's forward returned (the first of two values), or None."""
    if isinstance(outputs, (tuple, list)) and len(outputs) == 2:
        outputs = outputs[0]
    return outputs if isinstance(outputs, torch.Tensor) else None


def localise_causality(x, rerun):
    """hint(out, expected) under the causal mask: does an earlier output move with the last token?

    One extra probe, `rerun(x2)` (the student's out for x2 = x with its last token replaced)."""
    def hint(out, expected):
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape or not torch.isfinite(out).all():
            return None
        x2 = x.clone()
        x2[:, -1] = torch.randn(x.shape[0], x.shape[-1], generator=torch.Generator().manual_seed(7), dtype=x.dtype)
        out2 = attempt(rerun, x2)
        if not isinstance(out2, torch.Tensor) or out2.shape != out.shape:
            return None
        if not torch.allclose(out2[:, :-1].double(), out[:, :-1].double(), rtol=1e-8, atol=1e-8):
            return ("另外，改变最后一个 token 后，前面位置的输出也跟着变了：因果掩码下未来的信息泄漏到了前面"
                    "（检查 mask 是否在 softmax 之前加到了分数上、softmax 是否沿最后一维、拆分和合并头时是否先 transpose）")
        return ("改变最后一个 token 不影响前面位置的输出，因果性没有问题：错误在别处"
                "（投影、缩放、头的拆分与合并）")
    return hint


def localise_mask_effect(without_mask):
    """hint(out, expected) under the additive mask: does the mask change anything at all? (`without_mask()`: the
    student's out for the same input without a mask, one extra probe)"""
    def hint(out, expected):
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape or not torch.isfinite(out).all():
            return None
        other = attempt(without_mask)
        if isinstance(other, torch.Tensor) and other.shape == out.shape and torch.equal(out, other):
            return "另外，传不传 mask 你的输出完全一样：mask 没有起作用（它应该加到缩放后的分数上）"
        return None
    return hint


def localise_output_projection(student, weights, x, mask, num_heads: int, d_latent: int, tol):
    """hint(out, expected): with W_o replaced by the identity (one extra probe), does the student's out agree with
    the reference's? Then every step before W_o is right and the mistake is in applying W_o. (Said only then: a
    wrong out under the identity does not show where the mistake is.)"""
    def hint(out, expected):
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape or not torch.isfinite(out).all():
            return None
        d_model = x.shape[-1]
        identity = dict(weights, **{"W_o.weight": torch.eye(d_model, dtype=weights["W_o.weight"].dtype)})
        args = (x,) if mask is None else (x, mask)
        with torch.no_grad():
            right, _ = reference_module(identity, d_model, num_heads, d_latent, x.dtype)(*args)
        if same_values(out, right, tol):
            return None  # the identity changes nothing here: nothing to tell apart
        run = attempt(student.module, CLASS, (d_model, num_heads, d_latent), state_dict=identity, dtype=x.dtype,
                      method="forward", args=args)
        mine = first_out(run.outputs) if run is not None else None
        if isinstance(mine, torch.Tensor) and mine.shape == right.shape and same_values(mine, right, tol):
            return ("把 W_o 换成单位矩阵时，你的 out 与参考实现一致：W_o 之外的各步（投影、解压、注意力、合并头）都是对的，"
                    "错在 W_o 的用法上（最后一步是 W_o(t)，nn.Linear 算的是 t @ W_o.weight.T）")
        return None
    return hint


def first_hint(*hints):
    """hint(out, expected): the first of `hints` (None entries skipped) that has something to say."""
    def hint(out, expected):
        for h in hints:
            text = h(out, expected) if h is not None else None
            if text:
                return text
        return None
    return hint


# --- inputs ---------------------------------------------------------------------------------------


def pinned_shapes(d_model: int, d_latent: int) -> dict:
    return {"W_q.weight": [d_model, d_model], "W_kv_down.weight": [d_latent, d_model],
            "W_k_up.weight": [d_model, d_latent], "W_v_up.weight": [d_model, d_latent], "W_o.weight": [d_model, d_model]}


def reference_module(state, d_model=D_MODEL, num_heads=NUM_HEADS, d_latent=D_LATENT, dtype=torch.float64):
    return reference_with(ref.MultiHeadLatentAttention(d_model, num_heads, d_latent), state, dtype)


def random_additive_mask(rng, seq_len, dtype):
    """Random finite values (not just 0) with about 30% -inf, the diagonal never blocked."""
    mask = torch.randn(seq_len, seq_len, generator=rng, dtype=torch.float64)
    blocked = torch.rand(seq_len, seq_len, generator=rng, dtype=torch.float64) < 0.3
    blocked[0, seq_len - 1] = blocked[seq_len - 1, 0] = True  # blocked entries on both sides of the diagonal
    blocked.fill_diagonal_(False)
    return mask.masked_fill(blocked, float("-inf")).to(dtype)


@pytest.fixture
def weights64(rng):
    return random_weights(rng, pinned_shapes(D_MODEL, D_LATENT))


@pytest.fixture
def x64(rng):
    return torch.randn(BATCH, SEQ, D_MODEL, generator=rng, dtype=torch.float64)


# --- mla_module -----------------------------------------------------------------------------------


@check("mla_module", points=1)
def test_module_parameters(student):
    """MultiHeadLatentAttention 的参数正好是 W_q、W_kv_down、W_k_up、W_v_up、W_o 的 weight（无 bias），形状符合约定"""
    run = student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT))
    expect_parameters(run.param_shapes, pinned_shapes(D_MODEL, D_LATENT), f"{CLASS}({D_MODEL}, {NUM_HEADS}, {D_LATENT})",
                      keys=KEY_MISTAKES)


def expect_forward(student, weights, x, mask, tol, num_heads=NUM_HEADS, d_latent=D_LATENT, causal=False):
    """The student's forward (both returned values, in the inputs' dtype) matches the reference's; a mismatch is
    diagnosed."""
    init_args = (x.shape[-1], num_heads, d_latent)

    def rerun(x2):
        again = student.module(CLASS, init_args, state_dict=weights, dtype=x.dtype, method="forward", args=(x2, mask))
        return first_out(again.outputs)

    expect_module(student, ref, CLASS, init_args, weights=weights, args=(x,) if mask is None else (x, mask),
                  dtype=x.dtype, tol=tol, variants=forward_variants(weights, x, mask, num_heads), keys=KEY_MISTAKES,
                  hint=first_hint(localise_output_projection(student, weights, x, mask, num_heads, d_latent, tol),
                                  localise_causality(x, rerun) if causal else None))


@check("mla_module", points=1.5)
def test_module_forward_backward_float64(student, weights64, x64, rng):
    """加载给定权重、用因果掩码时，返回的 out 和 c_kv、输入的梯度和五个权重的梯度都与参考实现一致（float64）"""
    mask = causal_mask(SEQ, torch.float64)
    # forward alone first: a wrong return value gets a clear (diagnosed) message before the backward needs it
    expect_forward(student, weights64, x64, mask, F64, causal=True)
    grads = [torch.randn(BATCH, SEQ, D_MODEL, generator=rng, dtype=torch.float64),
             torch.randn(BATCH, SEQ, D_LATENT, generator=rng, dtype=torch.float64)]
    expect_module(student, ref, CLASS, (D_MODEL, NUM_HEADS, D_LATENT), weights=weights64, args=(x64, mask),
                  dtype=torch.float64, grad_outputs=grads, requires_grad=[0], tol=F64)


def forward_out(student, weights64, x64, mask):
    """The student's out (forward's first value; the module loaded with the weights) and the reference's, float64."""
    run, expected = module_round_trip(student, ref, CLASS, (D_MODEL, NUM_HEADS, D_LATENT), weights=weights64,
                                      args=(x64, mask), dtype=torch.float64)
    expect_weights_loaded(run, CLASS, keys=KEY_MISTAKES)
    out = run.outputs[0] if isinstance(run.outputs, (tuple, list)) and len(run.outputs) == 2 else run.outputs
    return out, expected["outputs"][0]


@check("mla_module", points=0.5)
def test_module_float64_precision(student, weights64, x64):
    """因果掩码下，float64 的输入全程用 float64 计算：forward 返回的 out 与参考实现一致到 float64 的精度"""
    expect_module_precision(student, ref, CLASS, (D_MODEL, NUM_HEADS, D_LATENT), weights=weights64,
                            args=(x64, causal_mask(SEQ, torch.float64)), what="forward 返回的第 1 个值（out）",
                            keys=KEY_MISTAKES, index=0)


@check("mla_module", points=1)
def test_module_additive_mask(student, weights64, x64, rng):
    """任意的加性掩码（不是因果掩码：有 -inf，也有非 0 的有限值）加在缩放后的分数上，out 与参考实现一致（float64）"""
    mask = random_additive_mask(rng, SEQ, torch.float64)
    out, expected = forward_out(student, weights64, x64, mask)

    def without_mask():
        return first_out(student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64,
                                        dtype=torch.float64, method="forward", args=(x64,)).outputs)

    expect_close(out, expected, F64, "forward 返回的第 1 个值（out）",
                 variants=lambda: latent_attention_variants(weights64, x64, mask, NUM_HEADS, MODULE_VARIANTS),
                 hint=first_hint(localise_output_projection(student, weights64, x64, mask, NUM_HEADS, D_LATENT, F64),
                                 localise_mask_effect(without_mask)))


@check("mla_module", points=1)
def test_module_float32_no_mask(student, rng):
    """float32、不加掩码（mask=None，双向注意力）时，返回的 out 和 c_kv 都与参考实现一致"""
    d_model, num_heads, d_latent = 32, 4, 12  # d_head = 8
    weights = random_weights(rng, pinned_shapes(d_model, d_latent), torch.float32)
    x = torch.randn(2, 9, d_model, generator=rng)
    expect_forward(student, weights, x, None, F32_ATTN, num_heads, d_latent)


# --- byte counts: a typed or returned number, and the slips that give it -------------------------------


def unit_slips(right: int, bytes_per_element: int = 2) -> dict:
    """What a slip of units makes of the right byte count (FP16 unless told)."""
    return {"fp32_bytes": right * 4 / bytes_per_element, "bits_not_bytes": 8 * right,
            "elements_not_bytes": right / bytes_per_element, "mib_not_bytes": right / 1024**2,
            "mb_not_bytes": right / 1e6}


# --- mla_cache ------------------------------------------------------------------------------------


@pytest.fixture
def cache_config(rng):
    return {"batch": randint(rng, 2, 9), "seq_len": randint(rng, 100, 5000), "d_latent": 64 * randint(rng, 2, 9),
            "d_rope": 16 * randint(rng, 1, 5)}


def cache_slips(batch, seq_len, d_latent, d_rope=0, bytes_per_element=2, num_layers=1) -> dict:
    right = ref.mla_cache_bytes(batch, seq_len, d_latent, d_rope, bytes_per_element, num_layers)
    slips = unit_slips(right, bytes_per_element)
    del slips["fp32_bytes"]  # bytes_per_element is an argument here
    slips.update({
        "latent_for_k_and_v": 2 * right,
        "rope_key_forgotten": ref.mla_cache_bytes(batch, seq_len, d_latent, 0, bytes_per_element, num_layers),
        "ignores_num_layers": right // num_layers, "ignores_bytes_per_element": right * 2 // bytes_per_element,
    })
    return slips


def expect_cache_bytes(actual, what, *args, **kwargs):
    expect_int(actual, ref.mla_cache_bytes(*args, **kwargs), what,
               variants=lambda: list(cache_slips(*args, **kwargs).items()))


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
    num_layers = randint(rng, 3, 61)
    num_layers += num_layers == 4  # with 4 bytes, 4 layers: a forgotten num_layers looks like counted elements
    expect_cache_bytes(student.call("mla_cache_bytes", c["batch"], c["seq_len"], c["d_latent"], d_rope=0,
                                    bytes_per_element=4, num_layers=num_layers),
                       "mla_cache_bytes(..., bytes_per_element=4, num_layers=...)",
                       c["batch"], c["seq_len"], c["d_latent"], 0, 4, num_layers)


# --- mla_comparison -------------------------------------------------------------------------------

HAND_NAMES = ("mha_bytes", "gqa_bytes", "mla_bytes")


@pytest.fixture
def answers(student_id):
    return student_answers("mla", student_id)


@pytest.fixture
def inputs(student_id):
    return student_params("mla", student_id)


def hand_slips(name: str, answers: dict, inputs: dict) -> dict:
    """What each catalogued slip makes of the hand answer `name` (one layer, FP16)."""
    right = answers[name]
    slips = unit_slips(right)
    if name in ("mha_bytes", "gqa_bytes"):
        slips["k_only"] = right / 2
    if name == "gqa_bytes":
        slips["q_heads_for_kv"] = answers["mha_bytes"]
    if name == "mla_bytes":
        slips.update({
            "latent_for_k_and_v": 2 * right,
            "rope_key_forgotten": ref.mla_cache_bytes(inputs["batch"], inputs["seq_len"], inputs["d_latent"]),
            "latent_per_head": inputs["num_heads"] * right,
            "cached_k_and_v": answers["mha_bytes"],
        })
    return slips


def hand_variants(student, name: str, actual, answers: dict, inputs: dict) -> list:
    """The slips that may name the student's `name`. Two slips with the same number (twice the MLA cache: FP32, or
    the latent for K and V; half the MHA cache: K only, or elements for bytes): a unit slip stays only when another
    answer of the student shows it, and only it, too; else the one slip that is not about units."""
    slips = hand_slips(name, answers, inputs)
    matching = [n for n, value in slips.items() if match_variant(actual, answers[name], [(n, value)], number_close())]
    if len(matching) <= 1:
        return list(slips.items())

    def shown_elsewhere(unit):
        for other in HAND_NAMES:
            value = None if other == name else attempt(student.variable, other)
            shown = match_variant(value, answers[other], list(hand_slips(other, answers, inputs).items()),
                                  number_close()) if value is not None else None
            if shown is not None and shown.name == unit:
                return True  # that answer shows this unit slip, and nothing else
        return False

    keep = [m for m in matching if m in UNIT_SLIPS and shown_elsewhere(m)] or [m for m in matching
                                                                              if m not in UNIT_SLIPS]
    return [(n, value) for n, value in slips.items() if n in keep]


def expect_hand(student, name, answers, inputs):
    actual = student.variable(name)
    expect_int(actual, answers[name], name, variants=lambda: hand_variants(student, name, actual, answers, inputs))


@check("mla_comparison", points=0.5)
def test_hand_mha_bytes(student, answers, inputs):
    """mha_bytes（MHA 一层的 KV Cache 字节数）与按你的学号算出的答案一致（精确比较）"""
    expect_hand(student, "mha_bytes", answers, inputs)


@check("mla_comparison", points=0.5)
def test_hand_gqa_bytes(student, answers, inputs):
    """gqa_bytes（GQA 一层的 KV Cache 字节数）与按你的学号算出的答案一致（精确比较）"""
    expect_hand(student, "gqa_bytes", answers, inputs)


@check("mla_comparison", points=1)
def test_hand_mla_bytes(student, answers, inputs):
    """mla_bytes（MLA 一层的缓存字节数，含解耦 RoPE key）与按你的学号算出的答案一致（精确比较）"""
    expect_hand(student, "mla_bytes", answers, inputs)


# --- mla_bonus ------------------------------------------------------------------------------------


def expect_absorbed(student, weights64, x64, mask):
    """The student's absorbed forward, on their own module loaded with the reference weights, gives the reference's out."""
    # the bonus runs on the student's own module: first make sure the weights load into it by name
    expect_weights_loaded(student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64,
                                         dtype=torch.float64), CLASS, keys=KEY_MISTAKES)
    with torch.no_grad():
        expected, _ = reference_module(weights64)(x64, mask)
    mla = module_arg(CLASS, D_MODEL, NUM_HEADS, D_LATENT, state_dict=weights64, dtype=torch.float64)

    def absorbed(x):
        return student.call("mla_absorbed_forward", *((mla, x) if mask is None else (mla, x, mask)))

    expect_close(absorbed(x64), expected, F64, "mla_absorbed_forward 的输出",
                 variants=lambda: latent_attention_variants(weights64, x64, mask, NUM_HEADS, ABSORBED_VARIANTS),
                 hint=localise_causality(x64, absorbed) if mask is not None else None)


def absorbed_latents(student, weights64, x64, mask):
    """(q_latent, context_latent) from the student's mla_absorbed_latents, and the reference's for the same inputs.

    These are what the absorbed path computes and a path that builds K and V does not: the bonus is graded on
    them (a rule such as "never call W_k_up" cannot be observed from outside the student's process)."""
    mla = module_arg(CLASS, D_MODEL, NUM_HEADS, D_LATENT, state_dict=weights64, dtype=torch.float64)
    result = student.call("mla_absorbed_latents", *((mla, x64) if mask is None else (mla, x64, mask)))
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise CheckFailed("mla_absorbed_latents 应该返回两个张量 (q_latent, context_latent)，你的返回 "
                          f"{describe_value(result)}", {"type": describe_value(result)})
    with torch.no_grad():
        expected = ref.mla_absorbed_latents(reference_module(weights64), x64, mask)
    return tuple(result), expected


@check("mla_bonus", points=1)
def test_absorbed_latent_queries_float64(student, weights64, x64):
    """mla_absorbed_latents 返回的 q_latent（吸收了 W_k_up 的查询，[B, H, S, d_latent]）与参考一致（float64，因果掩码下）"""
    expect_weights_loaded(student.module(CLASS, (D_MODEL, NUM_HEADS, D_LATENT), state_dict=weights64,
                                         dtype=torch.float64), CLASS, keys=KEY_MISTAKES)
    # with the causal mask: a missing `mask is None` case costs only the no-mask check, as the notebook announces
    (q_latent, _), (expected, _) = absorbed_latents(student, weights64, x64, causal_mask(SEQ, torch.float64))
    expect_close(q_latent, expected, F64, "q_latent")


@check("mla_bonus", points=0.5)
def test_absorbed_causal_float64(student, weights64, x64):
    """因果掩码下，mla_absorbed_forward(mla, x, mask) 的输出与参考的 out 一致，mla_absorbed_latents 的 context_latent 也一致（float64）"""
    mask = causal_mask(SEQ, torch.float64)
    expect_absorbed(student, weights64, x64, mask)
    (_, context), (_, expected) = absorbed_latents(student, weights64, x64, mask)
    expect_close(context, expected, F64, "context_latent")


@check("mla_bonus", points=0.5)
def test_absorbed_no_mask_float64(student, weights64, x64):
    """不传掩码（默认 mask=None）时，mla_absorbed_forward 的输出与参考的 out 一致，context_latent 也一致（float64）"""
    expect_absorbed(student, weights64, x64, None)
    (_, context), (_, expected) = absorbed_latents(student, weights64, x64, None)
    expect_close(context, expected, F64, "context_latent")
