"""The references in solutions/ agree with independent implementations and have the chapter's properties.

Tolerances from EXERCISES.md: float32 rtol = atol = 1e-5 (2e-5 for attention); float64 with the
reference computing in float64 (here 1e-10).
"""

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions import gqa_saving, gradient_flow, mla, rmsnorm, rope, swiglu

TOL = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}
ATTN_TOL = {torch.float32: dict(rtol=2e-5, atol=2e-5), torch.float64: dict(rtol=1e-10, atol=1e-10)}
DTYPES = [torch.float32, torch.float64]


def multihead_attention_with(w_q, w_k, w_v, w_o, heads, dtype):
    """PyTorch's own bias-free nn.MultiheadAttention carrying the given projections (the independent implementation)."""
    d_model = w_o.weight.shape[0]
    mha = nn.MultiheadAttention(d_model, heads, bias=False, batch_first=True).to(dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([w_q.weight, w_k.weight, w_v.weight]))
        mha.out_proj.weight.copy_(w_o.weight)
    return mha


def causal_mask(seq_len, dtype):
    return torch.triu(torch.full((seq_len, seq_len), float("-inf"), dtype=dtype), diagonal=1)


# --- RMSNorm -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_matches_torch_rms_norm(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 16, generator=g, dtype=dtype) * 0.01  # mean(x^2) ~ 1e-4: eps placement matters
    gamma = torch.rand(16, generator=g, dtype=dtype) + 0.5
    expected = F.rms_norm(x, (16,), weight=gamma, eps=1e-6)
    got = rmsnorm.rms_norm(x, gamma, eps=1e-6)
    assert got.dtype == dtype
    torch.testing.assert_close(got, expected, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_module_matches_nn_rmsnorm_forward_and_backward(dtype):
    torch.manual_seed(1)
    ours = rmsnorm.RMSNorm(12).to(dtype)
    theirs = nn.RMSNorm(12, eps=1e-6).to(dtype)
    with torch.no_grad():
        ours.gamma.copy_(torch.rand(12, dtype=dtype) + 0.5)
        theirs.weight.copy_(ours.gamma)
    x1 = torch.randn(2, 7, 12, dtype=dtype, requires_grad=True)
    x2 = x1.detach().clone().requires_grad_(True)
    y1, y2 = ours(x1), theirs(x2)
    torch.testing.assert_close(y1, y2, **TOL[dtype])
    (y1 * torch.arange(12, dtype=dtype)).sum().backward()
    (y2 * torch.arange(12, dtype=dtype)).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, **TOL[dtype])
    torch.testing.assert_close(ours.gamma.grad, theirs.weight.grad, **TOL[dtype])
    assert set(ours.state_dict()) == {"gamma"}


@pytest.mark.parametrize("dtype", DTYPES)
def test_rms_norm_is_scale_invariant_per_token_and_keeps_dtype(dtype):
    torch.manual_seed(2)
    x = torch.randn(4, 9, dtype=dtype) * 3
    gamma = torch.rand(9, dtype=dtype) + 0.5
    y = rmsnorm.rms_norm(x, gamma, eps=0.0)
    torch.testing.assert_close(rmsnorm.rms_norm(5.0 * x, gamma, eps=0.0), y, **TOL[dtype])
    unscaled = rmsnorm.rms_norm(x, torch.ones(9, dtype=dtype), eps=0.0)
    torch.testing.assert_close(unscaled.pow(2).mean(-1).sqrt(), torch.ones(4, dtype=dtype), **TOL[dtype])
    x2 = x.clone()
    x2[0] = 100.0
    torch.testing.assert_close(rmsnorm.rms_norm(x2, gamma, eps=0.0)[1:], y[1:], **TOL[dtype])


def test_rms_norm_half_input_returns_half():
    x = torch.randn(2, 8, dtype=torch.bfloat16)
    assert rmsnorm.rms_norm(x, torch.ones(8), eps=1e-6).dtype == torch.bfloat16


def test_homework_1_corrected_answer():
    """The chapter's own example x = [3, 4], gamma = 1: rms = sqrt(12.5), output [0.8485, 1.1314]."""
    answers = rmsnorm.hand_answers({"x": [3, 4], "gamma": [1.0, 1.0]})
    assert answers["rms"] == pytest.approx(math.sqrt(12.5))
    assert answers["output"] == pytest.approx([0.8485, 1.1314], abs=1e-4)


# --- GQA -----------------------------------------------------------------------------------------


def gqa_reference_by_sdpa(module, x, mask):
    """PyTorch's own GQA: scaled_dot_product_attention(enable_gqa=True) on the module's projections."""
    B, S, _ = x.shape
    q = module.W_q(x).view(B, S, module.num_q_heads, module.d_head).transpose(1, 2)
    k = module.W_k(x).view(B, S, module.num_kv_heads, module.d_head).transpose(1, 2)
    v = module.W_v(x).view(B, S, module.num_kv_heads, module.d_head).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    return module.W_o(out.transpose(1, 2).reshape(B, S, -1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("use_mask", [False, True])
def test_gqa_matches_sdpa_enable_gqa(dtype, use_mask):
    torch.manual_seed(3)
    module = gqa_saving.GroupedQueryAttention(48, num_q_heads=6, num_kv_heads=3).to(dtype)
    x = torch.randn(2, 5, 48, dtype=dtype)
    mask = causal_mask(5, dtype) if use_mask else None
    torch.testing.assert_close(module(x, mask), gqa_reference_by_sdpa(module, x, mask), **ATTN_TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_gqa_with_as_many_kv_heads_as_q_heads_is_multihead_attention(dtype):
    torch.manual_seed(4)
    d_model, heads = 32, 4
    module = gqa_saving.GroupedQueryAttention(d_model, heads, heads).to(dtype)
    mha = multihead_attention_with(module.W_q, module.W_k, module.W_v, module.W_o, heads, dtype)
    x = torch.randn(3, 6, d_model, dtype=dtype)
    mask = causal_mask(6, dtype)
    expected, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(module(x, mask), expected, **ATTN_TOL[dtype])


def test_repeat_kv_is_meta_layout():
    x = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(gqa_saving.repeat_kv(x, 3), torch.repeat_interleave(x, 3, dim=2))
    assert gqa_saving.repeat_kv(x, 1) is x or torch.equal(gqa_saving.repeat_kv(x, 1), x)


def test_gqa_is_causal_under_causal_mask():
    torch.manual_seed(5)
    module = gqa_saving.GroupedQueryAttention(32, 8, 2).double()
    x = torch.randn(2, 6, 32, dtype=torch.float64)
    y = module(x, causal_mask(6, torch.float64))
    x2 = x.clone()
    x2[:, -1] += 1.0
    y2 = module(x2, causal_mask(6, torch.float64))
    torch.testing.assert_close(y[:, :-1], y2[:, :-1], **TOL[torch.float64])
    assert not torch.allclose(y[:, -1], y2[:, -1])


def test_kv_cache_bytes_homework_2_numbers():
    # 32 heads x 128 dims x 2048 tokens, fp16, one layer: 32 MiB for MHA, 4 MiB for GQA-4
    assert gqa_saving.kv_cache_bytes(1, 2048, 32, 128) == 32 * 1024**2
    assert gqa_saving.kv_cache_bytes(1, 2048, 4, 128) == 4 * 1024**2
    assert gqa_saving.kv_cache_bytes(2, 2048, 4, 128, bytes_per_element=4, num_layers=3) == 2 * 2 * 3 * 4 * 1024**2
    answers = gqa_saving.hand_answers(dict(batch=1, seq_len=2048, num_q_heads=32, num_kv_heads=4, head_dim=128))
    assert answers["saving_ratio"] == pytest.approx(0.875)


# --- Pre/Post-Norm -------------------------------------------------------------------------------


class ChapterDeepPostNorm(nn.Module):
    """The chapter's Deep_PostNorm, as printed (the independent implementation)."""

    def __init__(self, d_model, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])

    def forward(self, x):
        for layer, norm in zip(self.layers, self.norms):
            x = norm(x + F.relu(layer(x)))
        return x


class ChapterDeepPreNorm(ChapterDeepPostNorm):
    def forward(self, x):
        for layer, norm in zip(self.layers, self.norms):
            x = x + F.relu(layer(norm(x)))
        return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ours_cls,chapter_cls", [
    (gradient_flow.PostNormStack, ChapterDeepPostNorm),
    (gradient_flow.PreNormStack, ChapterDeepPreNorm),
])
def test_norm_stacks_match_the_chapter_and_grad_norms_are_right(ours_cls, chapter_cls, dtype):
    torch.manual_seed(6)
    ours = ours_cls(8, 5).to(dtype)
    chapter = chapter_cls(8, 5).to(dtype)
    chapter.load_state_dict(ours.state_dict())  # same parameter names: strict load succeeds
    x, target = torch.randn(4, 8, dtype=dtype), torch.randn(4, 8, dtype=dtype)
    torch.testing.assert_close(ours(x), chapter(x), **TOL[dtype])

    F.mse_loss(chapter(x), target).backward()
    expected = [layer.weight.grad.norm().item() for layer in chapter.layers]
    first = gradient_flow.layer_grad_norms(ours, x, target)
    second = gradient_flow.layer_grad_norms(ours, x, target)  # old gradients are cleared
    assert first == second
    assert first == pytest.approx(expected, rel=1e-5 if dtype == torch.float32 else 1e-10)


def test_pre_norm_keeps_the_first_layer_gradient_alive_in_depth():
    """The chapter's point, measured: with depth, Post-Norm's first-layer gradient falls far below Pre-Norm's."""
    ratios = []
    for seed in range(5):
        torch.manual_seed(seed)
        post = gradient_flow.PostNormStack(16, 48).double()
        pre = gradient_flow.PreNormStack(16, 48).double()
        pre.load_state_dict(post.state_dict())
        x, target = torch.randn(8, 16, dtype=torch.float64), torch.randn(8, 16, dtype=torch.float64)
        ratios.append(gradient_flow.layer_grad_norms(pre, x, target)[0]
                      / gradient_flow.layer_grad_norms(post, x, target)[0])
    assert sorted(ratios)[2] > 1.0  # the median


def test_choice_question_has_one_right_letter_per_student():
    for student in ["alice", "bob", "carol", "dave"]:
        inputs = gradient_flow.hand_inputs(student)
        assert sorted(inputs["options"]) == list("ABCD")
        assert sorted(inputs["options"].values()) == sorted(gradient_flow.CHOICE_OPTIONS)
        letter = gradient_flow.hand_answers(inputs)["answer"]
        assert inputs["options"][letter] == gradient_flow.CHOICE_OPTIONS[1]
    letters = {gradient_flow.hand_answers(gradient_flow.hand_inputs(f"s{i}"))["answer"] for i in range(60)}
    assert letters == set("ABCD")


# --- RoPE ----------------------------------------------------------------------------------------


def rope_by_complex_numbers(x, theta=10000.0):
    """RoPE as Meta writes it: adjacent pairs as complex numbers times e^{i * pos * freq}."""
    seq_len, dim = x.shape[-2], x.shape[-1]
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), freqs)
    rot = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    return torch.view_as_real(xc * rot).flatten(-2).to(x.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(16, 8), (2, 3, 16, 8), (2, 4, 4, 6)])
def test_rope_matches_complex_number_rope(shape, dtype):
    torch.manual_seed(7)
    x = torch.randn(*shape, dtype=dtype)
    cos, sin = rope.precompute_rope_freqs(shape[-1], shape[-2], dtype=dtype)
    assert cos.shape == (shape[-2], shape[-1] // 2) and cos.dtype == dtype
    got = rope.apply_rotary_emb(x, cos, sin)
    assert got.dtype == dtype and got.shape == x.shape
    torch.testing.assert_close(got, rope_by_complex_numbers(x), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_rope_preserves_norm_and_scores_depend_only_on_offset(dtype):
    torch.manual_seed(8)
    x = torch.randn(3, 64, 16, dtype=dtype)
    cos, sin = rope.precompute_rope_freqs(16, 64, dtype=dtype)
    y = rope.apply_rotary_emb(x, cos, sin)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1), **TOL[dtype])
    q, k = torch.randn(16, dtype=dtype), torch.randn(16, dtype=dtype)
    for m, n, shift in [(0, 5, 7), (3, 1, 20), (10, 10, 40), (2, 60, 3)]:
        torch.testing.assert_close(rope.rope_score(q, k, m, n), rope.rope_score(q, k, m + shift, n + shift),
                                   rtol=1e-4 if dtype == torch.float32 else 1e-10,
                                   atol=1e-4 if dtype == torch.float32 else 1e-10)
    torch.testing.assert_close(rope.rope_score(q, k, 4, 4), torch.dot(q, k), **TOL[dtype])


def test_rope_is_not_the_half_split_convention():
    """Adjacent pairs (2i, 2i+1): rotating [1, 0, 0, 0] at position 1 moves only dims 0 and 1."""
    cos, sin = rope.precompute_rope_freqs(4, 2, dtype=torch.float64)
    y = rope.apply_rotary_emb(torch.tensor([[0.0, 0, 0, 0], [1.0, 0, 0, 0]], dtype=torch.float64), cos, sin)
    torch.testing.assert_close(y[1], torch.tensor([math.cos(1), math.sin(1), 0, 0], dtype=torch.float64))


# --- SwiGLU --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_matches_silu_formula(dtype):
    torch.manual_seed(9)
    ffn = swiglu.FeedForward_SwiGLU(24, 40).to(dtype)
    x = torch.randn(2, 5, 24, dtype=dtype)
    expected = ffn.W_down(F.silu(ffn.W_gate(x)) * ffn.W_up(x))
    torch.testing.assert_close(ffn(x), expected, **TOL[dtype])
    torch.testing.assert_close(swiglu.swish(x), F.silu(x), **TOL[dtype])
    assert set(ffn.state_dict()) == {"W_gate.weight", "W_up.weight", "W_down.weight"}


@pytest.mark.parametrize("d_model", [1, 3, 64, 96, 100, 384, 512, 1000, 4096])
def test_default_d_ff_rule(d_model):
    expected = max(((int(8 / 3 * d_model) + 255) // 256) * 256, d_model)
    assert swiglu.default_d_ff(d_model) == expected
    if d_model <= 512:  # keep the module small
        assert swiglu.FeedForward_SwiGLU(d_model).W_gate.out_features == expected


def test_ffn_param_counts_count_real_modules_and_fix_the_ratio():
    for d_model in [64, 512]:
        relu = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.Linear(4 * d_model, d_model))
        counts = swiglu.ffn_param_counts(d_model)
        assert counts == (sum(p.numel() for p in relu.parameters()),
                          sum(p.numel() for p in swiglu.FeedForward_SwiGLU(d_model).parameters()))
    # the chapter's "≈1": without the old FFN's biases the ratio is 1.125 at 512, 1.5 at 64, 1.008 at 4096
    for d_model, ratio in [(512, 1.125), (64, 1.5), (4096, 1.008)]:
        assert 3 * swiglu.default_d_ff(d_model) / (8 * d_model) == pytest.approx(ratio, abs=1e-3)


# --- MLA -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_mla_with_identity_down_projection_is_mha(dtype):
    torch.manual_seed(10)
    d_model, heads = 32, 4
    module = mla.MultiHeadLatentAttention(d_model, heads, d_latent=d_model).to(dtype)
    with torch.no_grad():
        module.W_kv_down.weight.copy_(torch.eye(d_model, dtype=dtype))
    mha = multihead_attention_with(module.W_q, module.W_k_up, module.W_v_up, module.W_o, heads, dtype)
    x = torch.randn(2, 7, d_model, dtype=dtype)
    mask = causal_mask(7, dtype)
    out, c_kv = module(x, mask)
    expected, _ = mha(x, x, x, attn_mask=mask, need_weights=False)
    torch.testing.assert_close(out, expected, **ATTN_TOL[dtype])
    torch.testing.assert_close(c_kv, x, **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_mla_absorbed_path_equals_forward_and_cache_is_the_latent(dtype):
    torch.manual_seed(11)
    module = mla.MultiHeadLatentAttention(48, 6, d_latent=12).to(dtype)
    x = torch.randn(3, 5, 48, dtype=dtype)
    mask = causal_mask(5, dtype)
    out, c_kv = module(x, mask)
    assert c_kv.shape == (3, 5, 12)
    torch.testing.assert_close(c_kv, module.W_kv_down(x), **TOL[dtype])
    torch.testing.assert_close(mla.mla_absorbed_forward(module, x, mask), out, **ATTN_TOL[dtype])


def test_mla_cache_bytes():
    assert mla.mla_cache_bytes(1, 4096, 64) == 64 * 4096 * 2  # the chapter's figure: 0.5 MiB
    assert mla.mla_cache_bytes(2, 1024, 512, d_rope=64, bytes_per_element=2, num_layers=3) == 2 * 1024 * 576 * 2 * 3


# --- llama_block: the given parts are the earlier references, written independently --------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_llama_block_given_parts_equal_the_earlier_references(dtype):
    from solutions import llama_block

    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 6, 16, generator=g, dtype=dtype)
    norm = llama_block.RMSNorm(16).to(dtype)
    with torch.no_grad():
        norm.gamma.copy_(torch.rand(16, generator=g, dtype=dtype) + 0.5)
    torch.testing.assert_close(norm(x), rmsnorm.rms_norm(x, norm.gamma.detach()), **TOL[dtype])
    for got, want in zip(llama_block.precompute_rope_freqs(16, 6, 500.0, dtype),
                         rope.precompute_rope_freqs(16, 6, 500.0, dtype)):
        torch.testing.assert_close(got, want, **TOL[dtype])
    cos, sin = rope.precompute_rope_freqs(16, 6, dtype=dtype)
    torch.testing.assert_close(llama_block.apply_rotary_emb(x, cos, sin), rope.apply_rotary_emb(x, cos, sin), **TOL[dtype])
    kv = torch.randn(2, 5, 3, 4, generator=g, dtype=dtype)
    assert torch.equal(llama_block.repeat_kv(kv, 4), gqa_saving.repeat_kv(kv, 4))
    assert all(llama_block.default_d_ff(d) == swiglu.default_d_ff(d) for d in (1, 64, 100, 300, 512, 4096))
    ours, theirs = llama_block.FeedForward_SwiGLU(16, 40).to(dtype), swiglu.FeedForward_SwiGLU(16, 40).to(dtype)
    theirs.load_state_dict(ours.state_dict())
    torch.testing.assert_close(ours(x), theirs(x), **TOL[dtype])


def test_llama_block_with_unit_norm_weights_after_qk_norm_has_lengths_sqrt_d_head():
    """§8 corrected: with gamma = 1, q and k after QK-Norm have length sqrt(d_head) (11.31 at 128), not 1."""
    from solutions import llama_block

    norm = llama_block.RMSNorm(128, eps=0.0).double()
    q = torch.randn(10, 128, dtype=torch.float64) * 7
    torch.testing.assert_close(norm(q).norm(dim=-1), torch.full((10,), math.sqrt(128), dtype=torch.float64))
    assert round(math.sqrt(128), 2) == 11.31
