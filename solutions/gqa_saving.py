"""Grouped-Query Attention and the KV cache it saves (chapter §7, §9, homework 2).

KV cache of one layer, in bytes:

    2 (K and V) * batch * seq_len * num_kv_heads * head_dim * bytes_per_element

MHA keeps num_kv_heads == num_q_heads; GQA shares each K/V head among a group of
num_q_heads // num_kv_heads query heads, so the cache shrinks by that factor. Query head h reads
KV head h // (num_q_heads // num_kv_heads), as LLaMA's `repeat_kv` and PyTorch's
`scaled_dot_product_attention(enable_gqa=True)` do. (The chapter's expand maps h to
h % num_kv_heads instead: also a valid grouping, but not the one pinned here.)
"""

import math

import torch.nn as nn
import torch.nn.functional as F

from solutions.hand.gqa_saving import (  # noqa: F401 (re-exported: the checks take them from the reference)
    hand_answers, hand_inputs, hand_slips, kv_cache_bytes,
)

FP16_BYTES = 2


def repeat_kv(x, n_rep):
    """把 [B, S, num_kv_heads, head_dim] 的 K 或 V 扩展成 [B, S, num_kv_heads * n_rep, head_dim]。

    每个 KV 头连续重复 n_rep 次：KV 头 0, 0, ..., 0, 1, 1, ..., 1, ...（Meta LLaMA 的排列），
    因此第 h 个 Q 头用到的是第 h // n_rep 个 KV 头。
    """
    ### BEGIN SOLUTION
    if x.dim() != 4:
        raise ValueError(f"x must have shape [B, S, num_kv_heads, head_dim], got {list(x.shape)}")
    if not isinstance(n_rep, int) or n_rep < 1:
        raise ValueError(f"n_rep must be a positive integer, got {n_rep!r}")
    B, S, num_kv_heads, head_dim = x.shape
    # a new axis right after the KV-head axis, so that each head is followed by its own copies
    return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)
    ### END SOLUTION


class GroupedQueryAttention(nn.Module):
    """Grouped-Query Attention。

    参数名是固定的（评分时按名字加载权重），全部是没有 bias 的 nn.Linear：
        W_q: d_model -> num_q_heads * d_head       W_k, W_v: d_model -> num_kv_heads * d_head
        W_o: num_q_heads * d_head -> d_model       其中 d_head = d_model // num_q_heads
    forward(x, mask=None)：x 是 [B, S, d_model]；mask 是 None 或加性的 [S, S] 浮点掩码
    （允许处为 0，屏蔽处为 -inf），加在缩放后的注意力分数上；返回 [B, S, d_model]。
    第 h 个 Q 头使用第 h // (num_q_heads // num_kv_heads) 个 KV 头。
    """

    def __init__(self, d_model, num_q_heads, num_kv_heads):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_q_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by num_q_heads ({num_q_heads})")
        if num_q_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_q_heads ({num_q_heads}) must be divisible by num_kv_heads ({num_kv_heads})"
            )
        self.num_q_heads = num_q_heads
        self.num_kv_heads = num_kv_heads
        self.d_head = d_model // num_q_heads
        self.n_rep = num_q_heads // num_kv_heads

        self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_o = nn.Linear(num_q_heads * self.d_head, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        if x.dim() != 3:
            raise ValueError(f"x must have shape [B, S, d_model], got {list(x.shape)}")
        B, S, _ = x.shape
        if mask is not None and mask.shape != (S, S):
            raise ValueError(f"mask must have shape [{S}, {S}], got {list(mask.shape)}")

        q = self.W_q(x).view(B, S, self.num_q_heads, self.d_head)
        k = repeat_kv(self.W_k(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)
        v = repeat_kv(self.W_v(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, d_head]

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores + mask
        attn = F.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)
        return self.W_o(out)
        ### END SOLUTION
