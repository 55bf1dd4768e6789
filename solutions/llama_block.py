"""The modern decoder block, LLaMA-style (chapter §5), with QK-Norm (§8).

    h   = x + attn(norm_attn(x))          Pre-Norm: the residual path never goes through a norm
    out = h + ffn(norm_ffn(h))

The attention projects, splits heads, (QK-Norm: RMSNorm over d_head, each head of each token on its own),
rotates q and k with RoPE on the [B, H, S, D] layout (adjacent pairs (2i, 2i+1), positions from 0), lets query
head h read KV head h // (num_q_heads // num_kv_heads), and scales by 1/sqrt(d_head). The FFN is SwiGLU with
the default d_ff. float64 in, float64 throughout.

The chapter's §5 `LLaMABlock` says it uses RoPE but is built on nn.MultiheadAttention: biases on, no RoPE, no
GQA. Its §8 says QK-Norm brings the norms of q and k to about 1: after RMSNorm over d_head with gamma = 1 they
are sqrt(d_head) (11.31 at 128), so a logit q·k / sqrt(d_head) is at most sqrt(d_head) (times max|γ_q| max|γ_k|).

Hugging Face's `rotate_half` pairs dims (i, i + d/2) instead of (2i, 2i+1): the same rotation in another layout.
`permute_for_rotate_half` reorders the rows of W_q / W_k (and the q/k norm weights) within each head so that a
rotate_half model computes exactly this block's attention (the permutation of HF's LLaMA weight conversion).

The helpers before `LlamaAttention` (RMSNorm, the RoPE table and rotation, repeat_kv, SwiGLU) are given to the
students as working code, so that a mistake in an earlier assignment does not cascade into this one; they are
written independently of solutions.rmsnorm / rope / gqa_saving / swiglu (tests/test_references.py compares them).
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from solutions.hand.llama_block import (  # noqa: F401 (re-exported: the checks take them from the reference)
    hand_answers, hand_inputs, hand_slips,
)

# --- the hand part --------------------------------------------------------------------------------


# --- given: the parts built in the earlier assignments ----------------------------------------------


class RMSNorm(nn.Module):
    """RMSNorm（作业 1）：y = x / sqrt(mean(x², 最后一维) + eps) * gamma；float64 输入全程 float64。"""

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.full((d_model,), 1.0))

    def forward(self, x):
        work = torch.promote_types(x.dtype, torch.float32)  # half types in float32, float64 stays float64
        xw = x.to(work)
        inv_rms = torch.rsqrt(xw.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return (xw * inv_rms * self.gamma.to(work)).to(x.dtype)


def precompute_rope_freqs(dim, seq_len, theta=10000.0, dtype=torch.float32):
    """RoPE 的 cos、sin 表（作业 4）：[seq_len, dim // 2]，第 i 对的频率 theta ** (-2i / dim)，位置从 0 开始。"""
    pair = torch.arange(dim // 2, dtype=torch.float64)
    angle = torch.arange(seq_len, dtype=torch.float64)[:, None] * theta ** (-2.0 * pair / dim)[None, :]
    return torch.cos(angle).to(dtype), torch.sin(angle).to(dtype)


def apply_rotary_emb(x, cos, sin):
    """把 x（[..., seq_len, d_head]，倒数第二维是位置）的相邻两维 (2i, 2i+1) 按位置旋转（作业 4）。

    cos、sin 是 [seq_len, d_head // 2]；在 x 的 dtype 中计算（半精度用 float32），返回 x 的形状和 dtype。
    """
    work = torch.promote_types(x.dtype, torch.float32)
    c, s = cos.to(work), sin.to(work)
    even, odd = x.to(work)[..., 0::2], x.to(work)[..., 1::2]
    turned = torch.stack((even * c - odd * s, odd * c + even * s), dim=-1)
    return turned.reshape(x.shape).to(x.dtype)


def repeat_kv(x, n_rep):
    """[B, S, num_kv_heads, head_dim] -> [B, S, num_kv_heads * n_rep, head_dim]，每个 KV 头连续重复 n_rep 次（作业 2）。"""
    return torch.repeat_interleave(x, n_rep, dim=2)


def default_d_ff(d_model):
    """SwiGLU 默认的隐藏维度（作业 5）：int(8/3 * d_model) 向上取整到 256 的倍数，至少 d_model。"""
    return max(-(-(8 * d_model // 3) // 256) * 256, d_model)


class FeedForward_SwiGLU(nn.Module):
    """SwiGLU 前馈网络（作业 5）：W_down(silu(W_gate x) * W_up x)，三个没有 bias 的 nn.Linear。"""

    def __init__(self, d_model, d_ff=None):
        super().__init__()
        hidden = default_d_ff(d_model) if d_ff is None else d_ff
        self.W_gate = nn.Linear(d_model, hidden, bias=False)
        self.W_up = nn.Linear(d_model, hidden, bias=False)
        self.W_down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x):
        return self.W_down(F.silu(self.W_gate(x)) * self.W_up(x))


# --- what the student writes -------------------------------------------------------------------------


class LlamaAttention(nn.Module):
    """带 RoPE、GQA（和可选的 QK-Norm）的注意力。

    参数名是固定的（评分时按名字加载权重），投影都是没有 bias 的 nn.Linear，d_head = d_model // num_q_heads：
        W_q: d_model -> num_q_heads * d_head        W_k, W_v: d_model -> num_kv_heads * d_head
        W_o: num_q_heads * d_head -> d_model
        qk_norm=True 时还有 q_norm、k_norm：两个 RMSNorm(d_head, eps)（参数 q_norm.gamma、k_norm.gamma）
    forward(x, mask=None)：x 是 [B, S, d_model]，mask 是 None 或加性的 [S, S] 浮点掩码；返回 [B, S, d_model]。
    顺序：投影 -> 拆头 -> QK-Norm（只对 q、k，沿 d_head）-> 在 [B, H, S, d_head] 上对 q、k 施加 RoPE
    （位置从 0 开始）-> 第 h 个 Q 头用第 h // (num_q_heads // num_kv_heads) 个 KV 头 -> 分数除以 sqrt(d_head)、
    加 mask、沿最后一维 softmax、乘 V -> 合并头 -> W_o。
    """

    def __init__(self, d_model, num_q_heads, num_kv_heads, eps=1e-6, theta=10000.0, qk_norm=False):
        super().__init__()
        ### BEGIN SOLUTION
        if d_model % num_q_heads != 0 or num_q_heads % num_kv_heads != 0:
            raise ValueError(f"need d_model % num_q_heads == 0 and num_q_heads % num_kv_heads == 0, got "
                             f"{d_model}, {num_q_heads}, {num_kv_heads}")
        self.num_q_heads = num_q_heads
        self.num_kv_heads = num_kv_heads
        self.d_head = d_model // num_q_heads
        self.n_rep = num_q_heads // num_kv_heads
        self.theta = theta
        self.qk_norm = qk_norm

        self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)
        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)
        self.W_o = nn.Linear(num_q_heads * self.d_head, d_model, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(self.d_head, eps)
            self.k_norm = RMSNorm(self.d_head, eps)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        B, S, _ = x.shape
        q = self.W_q(x).view(B, S, self.num_q_heads, self.d_head)
        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_head)
        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_head)
        if self.qk_norm:  # over d_head: each head of each token normalised on its own, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)

        # [B, H, S, d_head]: the position is dim -2, where apply_rotary_emb expects it
        q = q.transpose(1, 2)
        k = repeat_kv(k, self.n_rep).transpose(1, 2)
        v = repeat_kv(v, self.n_rep).transpose(1, 2)
        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)
        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)
        return self.W_o(out)
        ### END SOLUTION


class LlamaBlock(nn.Module):
    """LLaMA 式的 decoder block（Pre-Norm）。

    参数名是固定的：norm_attn（RMSNorm(d_model, eps)）、attn（LlamaAttention）、norm_ffn（RMSNorm(d_model, eps)）、
    ffn（FeedForward_SwiGLU(d_model, d_ff)，d_ff 为 None 时用默认值）。
    forward(x, mask=None)：h = x + attn(norm_attn(x), mask)，out = h + ffn(norm_ffn(h))；返回 [B, S, d_model]。
    """

    def __init__(self, d_model, num_q_heads, num_kv_heads, d_ff=None, eps=1e-6, theta=10000.0, qk_norm=False):
        super().__init__()
        ### BEGIN SOLUTION
        self.norm_attn = RMSNorm(d_model, eps)
        self.attn = LlamaAttention(d_model, num_q_heads, num_kv_heads, eps=eps, theta=theta, qk_norm=qk_norm)
        self.norm_ffn = RMSNorm(d_model, eps)
        self.ffn = FeedForward_SwiGLU(d_model, d_ff)
        ### END SOLUTION

    def forward(self, x, mask=None):
        ### BEGIN SOLUTION
        h = x + self.attn(self.norm_attn(x), mask)
        return h + self.ffn(self.norm_ffn(h))
        ### END SOLUTION


def permute_for_rotate_half(w, n_heads, d_head):
    """把 W_q / W_k 的行在每个头内部重排，让 rotate_half（Hugging Face）约定的模型算出与本 block 相同的注意力。

    w: [n_heads * d_head, cols] 的权重，或 [d_head] 的 QK-Norm 权重（此时 n_heads = 1）。
    每个头内，新的第 j 行（j < d_head // 2）是原来的第 2j 行，新的第 d_head // 2 + j 行是原来的第 2j + 1 行。
    返回与 w 形状、dtype 相同的新张量。
    """
    ### BEGIN SOLUTION
    if w.shape[0] != n_heads * d_head or d_head % 2 != 0:
        raise ValueError(f"w must have n_heads * d_head = {n_heads * d_head} rows (d_head even), got {list(w.shape)}")
    # rows of one head: (pair i, component j) -> (component j, pair i)
    return w.reshape(n_heads, d_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)
    ### END SOLUTION
