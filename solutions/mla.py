"""Multi-head Latent Attention, MLA (chapter §9), in the chapter's simplified form.

K and V are not projected from x directly: x is first compressed to a small latent
c_kv = W_kv_down x ([B, S, d_latent]), and K = W_k_up c_kv, V = W_v_up c_kv. Only c_kv is cached:
d_latent elements per token and layer, against 2 * num_heads * d_head for MHA. The up-projections
replace W_k and W_v, they are not added to them. DeepSeek-V2 also caches a decoupled RoPE key of
d_rope dims per token (shared by all heads), so its cache is d_latent + d_rope per token; the
chapter's count leaves that out.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions.hand.mla import (  # noqa: F401 (re-exported: the checks take them from the reference)
    hand_answers, hand_inputs, hand_slips, mla_cache_bytes,
)


class MultiHeadLatentAttention(nn.Module):
    """MLA（简化版，与本章相同）。

    参数名是固定的，全部是没有 bias 的 nn.Linear：
        W_q: d_model -> d_model          W_kv_down: d_model -> d_latent
        W_k_up, W_v_up: d_latent -> d_model                W_o: d_model -> d_model
    forward(x, mask=None)：x 是 [B, S, d_model]，mask 是 None 或加性的 [S, S] 浮点掩码；
    返回 (out, c_kv)：out 是 [B, S, d_model]，c_kv = W_kv_down(x) 是 [B, S, d_latent]（要缓存的 latent）。
    """

    def __init__(self, d_model, num_heads, d_latent):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_heads ({num_heads})")
        if not isinstance(d_latent, int) or d_latent <= 0:
            raise ValueError(f"d_latent must be a positive integer, got {d_latent!r}")
        self.num_heads = num_heads
        self.d_head = d_model // num_heads
        self.d_latent = d_latent

        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_kv_down = nn.Linear(d_model, d_latent, bias=False)  # x -> c_kv, the only thing cached
        self.W_k_up = nn.Linear(d_latent, d_model, bias=False)     # c_kv -> K (replaces W_k)
        self.W_v_up = nn.Linear(d_latent, d_model, bias=False)     # c_kv -> V (replaces W_v)
        self.W_o = nn.Linear(d_model, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        if x.dim() != 3:
            raise ValueError(f"x must have shape [B, S, d_model], got {list(x.shape)}")
        B, S, D = x.shape
        if mask is not None and mask.shape != (S, S):
            raise ValueError(f"mask must have shape [{S}, {S}], got {list(mask.shape)}")

        c_kv = self.W_kv_down(x)  # [B, S, d_latent]
        q = self.W_q(x).view(B, S, self.num_heads, self.d_head).transpose(1, 2)
        k = self.W_k_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)
        v = self.W_v_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores + mask
        out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)
        return self.W_o(out), c_kv
        ### END SOLUTION


def mla_absorbed_forward(mla, x, mask=None):
    """挑战题：只用缓存的 c_kv 计算与 mla(x, mask)[0] 相同的输出，全程不构造 K 和 V。

    思路：q_h · (W_k_up,h c) = (W_k_up,h^T q_h) · c，把 W_k_up 吸收进 Q；V 这一侧同理先对 c 加权求和，
    再乘 W_v_up。返回 [B, S, d_model]。
    """
    ### BEGIN SOLUTION
    B, S, D = x.shape
    H, d_head = mla.num_heads, mla.d_head
    c_kv = mla.W_kv_down(x)                                          # [B, S, d_latent]
    q = mla.W_q(x).view(B, S, H, d_head).transpose(1, 2)             # [B, H, S, d_head]
    w_k = mla.W_k_up.weight.view(H, d_head, -1)                      # [H, d_head, d_latent]
    w_v = mla.W_v_up.weight.view(H, d_head, -1)

    q_latent = torch.einsum("bhsd,hdl->bhsl", q, w_k)               # W_k_up absorbed into q
    scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(d_head)
    if mask is not None:
        scores = scores + mask
    context_latent = F.softmax(scores, dim=-1) @ c_kv[:, None]       # [B, H, S, d_latent]
    out = torch.einsum("bhsl,hdl->bhsd", context_latent, w_v)        # W_v_up applied after the sum
    return mla.W_o(out.transpose(1, 2).reshape(B, S, D))
    ### END SOLUTION


def mla_absorbed_latents(mla, x, mask=None):
    """挑战题：吸收矩阵后，注意力在 latent 空间里的两个中间量，只有不构造 K、V 的算法才会算出它们。

    返回 (q_latent, context_latent)，形状都是 [B, H, S, d_latent]：
    q_latent[:, h] = q_h · W_k_up,h（W_k_up 吸收进查询），
    context_latent[:, h] = softmax(q_latent[:, h] · c_kvᵀ / sqrt(d_head) + mask) · c_kv（在 latent 空间里加权求和）。
    """
    ### BEGIN SOLUTION
    batch, seq_len, _ = x.shape
    heads = mla.num_heads
    latent = mla.W_kv_down(x).unsqueeze(1)                          # [B, 1, S, d_latent]: one latent for all heads
    queries = mla.W_q(x).view(batch, seq_len, heads, -1).transpose(1, 2)   # [B, H, S, d_head]
    q_latent = queries @ mla.W_k_up.weight.view(heads, mla.d_head, -1)     # [B, H, S, d_latent]
    logits = q_latent @ latent.transpose(-2, -1) / math.sqrt(mla.d_head)
    if mask is not None:
        logits = logits + mask
    return q_latent, torch.softmax(logits, dim=-1) @ latent
    ### END SOLUTION
