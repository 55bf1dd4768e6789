"""Bad input to a reference raises an error that names the argument at fault."""

import pytest
import torch

from solutions import gqa_saving, gradient_flow, mla, rmsnorm, rope, swiglu


@pytest.mark.parametrize("call,exc,argument", [
    (lambda: rmsnorm.rms_norm(torch.randn(2, 8), torch.ones(7)), ValueError, "gamma"),
    (lambda: rmsnorm.rms_norm(torch.arange(8), torch.ones(8)), TypeError, "x"),
    (lambda: rmsnorm.rms_norm(torch.randn(2, 8), torch.ones(8), eps=-1.0), ValueError, "eps"),
    (lambda: rmsnorm.RMSNorm(8)(torch.randn(2, 9)), ValueError, "last dimension of x"),
    (lambda: rmsnorm.RMSNorm(0), ValueError, "d_model"),
    (lambda: gqa_saving.GroupedQueryAttention(64, 8, 3), ValueError, "num_kv_heads"),
    (lambda: gqa_saving.GroupedQueryAttention(60, 8, 2), ValueError, "num_q_heads"),
    (lambda: gqa_saving.GroupedQueryAttention(64, 8, 2)(torch.randn(2, 5, 64), torch.zeros(4, 4)), ValueError, "mask"),
    (lambda: gqa_saving.GroupedQueryAttention(64, 8, 2)(torch.randn(5, 64)), ValueError, "x"),
    (lambda: gqa_saving.repeat_kv(torch.randn(2, 3, 4), 2), ValueError, "x"),
    (lambda: gqa_saving.repeat_kv(torch.randn(2, 3, 4, 5), 0), ValueError, "n_rep"),
    (lambda: gqa_saving.kv_cache_bytes(1, 2048, 0, 128), ValueError, "num_kv_heads"),
    (lambda: gqa_saving.kv_cache_bytes(1, 2048.0, 4, 128), ValueError, "seq_len"),
    (lambda: rope.precompute_rope_freqs(7, 16), ValueError, "dim"),
    (lambda: rope.precompute_rope_freqs(8, 0), ValueError, "seq_len"),
    (lambda: rope.apply_rotary_emb(torch.randn(4, 7), *rope.precompute_rope_freqs(8, 4)), ValueError, "d_head"),
    (lambda: rope.apply_rotary_emb(torch.randn(5, 8), *rope.precompute_rope_freqs(8, 4)), ValueError, "cos"),
    (lambda: rope.rope_score(torch.randn(8), torch.randn(6), 0, 1), ValueError, "q and k"),
    (lambda: swiglu.FeedForward_SwiGLU(-4), ValueError, "d_model"),
    (lambda: swiglu.swish(torch.arange(4)), TypeError, "a"),
    (lambda: swiglu.ffn_param_counts(0), ValueError, "d_model"),
    (lambda: mla.MultiHeadLatentAttention(60, 8, 16), ValueError, "num_heads"),
    (lambda: mla.MultiHeadLatentAttention(64, 8, 0), ValueError, "d_latent"),
    (lambda: mla.mla_cache_bytes(1, 128, 64, d_rope=-1), ValueError, "d_rope"),
    (lambda: gradient_flow.PreNormStack(8, 0), ValueError, "num_layers"),
    (lambda: gradient_flow.layer_grad_norms(torch.nn.Linear(2, 2), torch.randn(1, 2), torch.randn(1, 2)),
     ValueError, "layers"),
])
def test_bad_input_names_the_argument(call, exc, argument):
    with pytest.raises(exc) as info:
        call()
    assert argument in str(info.value), f"message {str(info.value)!r} should name {argument!r}"
