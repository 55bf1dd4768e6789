"""The reference LlamaBlock against transformers' own decoder layers: an independent implementation of §5 and §8.

transformers is a test-only dependency, pinned in pyproject.toml's `test` extra and installed with the torch
constraint (scripts/dev.sh); only this file imports it. Its layers use the `rotate_half` RoPE layout (pairs
(i, i + d/2)); ours pairs (2i, 2i+1). After `permute_for_rotate_half` of the W_q / W_k rows (and of the q/k norm
weights) within each head, the two compute the same block; without it they do not.
"""

import pytest
import torch

from solutions import llama_block as ref

# not importorskip: CI installs the test extra, and these tests must run there, not skip
from transformers.models.llama.modeling_llama import (
    LlamaConfig,
    LlamaDecoderLayer,
    LlamaRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.qwen3.modeling_qwen3 import Qwen3Config, Qwen3DecoderLayer

D_MODEL, HEADS, KV_HEADS, D_FF, THETA, EPS = 64, 8, 2, 96, 500.0, 1e-6
D_HEAD = D_MODEL // HEADS
B, S = 2, 7
F32_AGREEMENT = 1e-5  # measured with these weights: 3.8e-6 (LLaMA and Qwen3); without the permutation 9.4 and 9.0


def our_block(qk_norm: bool, seed: int = 0) -> ref.LlamaBlock:
    """The reference block with random weights, norm weights not 1 (so a wrongly mapped one shows)."""
    torch.manual_seed(seed)
    block = ref.LlamaBlock(D_MODEL, HEADS, KV_HEADS, d_ff=D_FF, eps=EPS, theta=THETA, qk_norm=qk_norm)
    with torch.no_grad():
        for name, p in block.named_parameters():
            if name.endswith("gamma"):
                p.copy_(1 + 0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * 1.5 / p.shape[1] ** 0.5)
    return block


def hf_config(config_class, qk_norm: bool):
    config = config_class(hidden_size=D_MODEL, num_attention_heads=HEADS, num_key_value_heads=KV_HEADS,
                          head_dim=D_HEAD, intermediate_size=D_FF, rms_norm_eps=EPS, attention_bias=False,
                          hidden_act="silu", max_position_embeddings=64,
                          rope_parameters={"rope_type": "default", "rope_theta": THETA})
    if config_class is LlamaConfig:
        config.mlp_bias = False
    config._attn_implementation = "eager"
    return config


def hf_state(block: ref.LlamaBlock, permute: bool) -> dict:
    """Our weights under transformers' names; W_q / W_k rows (and the q/k norm weights) put in rotate_half order."""
    ours = block.state_dict()
    turn = ref.permute_for_rotate_half if permute else (lambda w, n, d: w)
    state = {
        "input_layernorm.weight": ours["norm_attn.gamma"],
        "self_attn.q_proj.weight": turn(ours["attn.W_q.weight"], HEADS, D_HEAD),
        "self_attn.k_proj.weight": turn(ours["attn.W_k.weight"], KV_HEADS, D_HEAD),
        "self_attn.v_proj.weight": ours["attn.W_v.weight"],
        "self_attn.o_proj.weight": ours["attn.W_o.weight"],
        "post_attention_layernorm.weight": ours["norm_ffn.gamma"],
        "mlp.gate_proj.weight": ours["ffn.W_gate.weight"],
        "mlp.up_proj.weight": ours["ffn.W_up.weight"],
        "mlp.down_proj.weight": ours["ffn.W_down.weight"],
    }
    if "attn.q_norm.gamma" in ours:
        state["self_attn.q_norm.weight"] = turn(ours["attn.q_norm.gamma"], 1, D_HEAD)
        state["self_attn.k_norm.weight"] = turn(ours["attn.k_norm.gamma"], 1, D_HEAD)
    return state


def hf_error(layer_class, config_class, qk_norm: bool, permute: bool) -> float:
    block = our_block(qk_norm)
    config = hf_config(config_class, qk_norm)
    layer = layer_class(config, layer_idx=0).eval()
    layer.load_state_dict(hf_state(block, permute), strict=True)  # every weight by name, none left over
    x = torch.randn(B, S, D_MODEL, generator=torch.Generator().manual_seed(1))
    mask = torch.triu(torch.full((S, S), float("-inf")), diagonal=1)
    positions = torch.arange(S)[None].expand(B, S)
    cos_sin = LlamaRotaryEmbedding(config)(x, positions)  # the model's own rotary tables
    with torch.no_grad():
        expected = block(x, mask)
        theirs = layer(x, attention_mask=mask[None, None].expand(B, 1, S, S), position_ids=positions,
                       position_embeddings=cos_sin)
    theirs = theirs[0] if isinstance(theirs, tuple) else theirs
    return float((theirs - expected).abs().max())


def test_llama_decoder_layer_equals_our_block_after_the_permutation():
    assert hf_error(LlamaDecoderLayer, LlamaConfig, qk_norm=False, permute=True) < F32_AGREEMENT


def test_qwen3_decoder_layer_equals_our_block_with_qk_norm_after_the_permutation():
    assert hf_error(Qwen3DecoderLayer, Qwen3Config, qk_norm=True, permute=True) < F32_AGREEMENT


@pytest.mark.parametrize("layer_class, config_class, qk_norm",
                         [(LlamaDecoderLayer, LlamaConfig, False), (Qwen3DecoderLayer, Qwen3Config, True)])
def test_without_the_permutation_the_layouts_disagree(layer_class, config_class, qk_norm):
    assert hf_error(layer_class, config_class, qk_norm, permute=False) > 0.1


def test_rotate_half_with_permuted_weights_is_our_attention_exactly_in_float64():
    """transformers' apply_rotary_pos_emb (rotate_half) on the permuted projections, the rest written out: equal to
    our LlamaAttention to float64 rounding (the two layouts are one rotation)."""
    torch.manual_seed(3)
    attn = ref.LlamaAttention(D_MODEL, HEADS, KV_HEADS, eps=EPS, theta=THETA, qk_norm=True).double()
    with torch.no_grad():
        attn.q_norm.gamma.copy_(1 + 0.5 * torch.randn(D_HEAD, dtype=torch.float64))
        attn.k_norm.gamma.copy_(1 + 0.5 * torch.randn(D_HEAD, dtype=torch.float64))
    x = torch.randn(B, S, D_MODEL, dtype=torch.float64)
    mask = torch.triu(torch.full((S, S), float("-inf"), dtype=torch.float64), diagonal=1)

    w_q = ref.permute_for_rotate_half(attn.W_q.weight.detach(), HEADS, D_HEAD)
    w_k = ref.permute_for_rotate_half(attn.W_k.weight.detach(), KV_HEADS, D_HEAD)
    g_q = ref.permute_for_rotate_half(attn.q_norm.gamma.detach(), 1, D_HEAD)
    g_k = ref.permute_for_rotate_half(attn.k_norm.gamma.detach(), 1, D_HEAD)

    def norm(t, g):
        return t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + EPS) * g

    q = norm((x @ w_q.T).view(B, S, HEADS, D_HEAD), g_q).transpose(1, 2)
    k = norm((x @ w_k.T).view(B, S, KV_HEADS, D_HEAD), g_k).transpose(1, 2)
    v = (x @ attn.W_v.weight.detach().T).view(B, S, KV_HEADS, D_HEAD).transpose(1, 2)
    cos, sin = ref.precompute_rope_freqs(D_HEAD, S, THETA, dtype=torch.float64)
    cos, sin = torch.cat([cos, cos], -1)[None], torch.cat([sin, sin], -1)[None]  # rotate_half's tables
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    k, v = k.repeat_interleave(HEADS // KV_HEADS, dim=1), v.repeat_interleave(HEADS // KV_HEADS, dim=1)
    weights = torch.softmax(q @ k.transpose(-2, -1) / D_HEAD ** 0.5 + mask, dim=-1)
    theirs = (weights @ v).transpose(1, 2).reshape(B, S, D_MODEL) @ attn.W_o.weight.detach().T
    with torch.no_grad():
        ours = attn(x, mask)
    torch.testing.assert_close(theirs, ours, rtol=1e-12, atol=1e-12)


def test_the_permutation_of_a_norm_weight_is_the_one_of_a_single_head():
    w = torch.arange(16.0)
    assert ref.permute_for_rotate_half(w, 1, 16).tolist() == list(range(0, 16, 2)) + list(range(1, 16, 2))
    rows = ref.permute_for_rotate_half(torch.arange(16.0)[:, None].expand(16, 3), 2, 8)
    assert rows[:, 0].tolist() == [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15]
