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

from solutions.student_params import student_rng

FP16_BYTES = 2


def hand_inputs(student_id):
    """手算题的模型配置（由学号决定）。KV Cache 按 FP16（每个元素 2 字节）、单层计算。"""
    rng = student_rng("gqa_saving", student_id)
    # Q 头数与 KV 头数之比不取 2 和 8：比值为 2 时 x 与 1 - x 相等，为 8 时"按 bit 算的 GQA"等于 MHA，
    # 几种常见错误会恰好和正确答案（或彼此）一样
    num_q_heads, num_kv_heads = rng.choice(
        [(16, 4), (24, 4), (24, 8), (32, 8), (40, 8), (48, 8), (48, 12), (64, 16)]
    )
    return {
        "batch": rng.randint(1, 8),
        "seq_len": 256 * rng.randint(2, 32),
        "num_q_heads": num_q_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": rng.choice([64, 80, 96, 112, 128]),
    }


def hand_answers(inputs: dict) -> dict:
    """The right answers of homework 2 for one configuration (bytes of one layer, fp16)."""
    b, s, hd = inputs["batch"], inputs["seq_len"], inputs["head_dim"]
    mha = kv_cache_bytes(b, s, inputs["num_q_heads"], hd)
    gqa = kv_cache_bytes(b, s, inputs["num_kv_heads"], hd)
    return {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": 1 - gqa / mha}


def hand_slips(inputs: dict) -> dict:
    """Answers that the catalogued slips give (each slip applied throughout)."""
    right = hand_answers(inputs)
    mha, gqa, ratio = right["mha_kv_bytes"], right["gqa_kv_bytes"], right["saving_ratio"]
    return {
        "k_only": {"mha_kv_bytes": mha / 2, "gqa_kv_bytes": gqa / 2, "saving_ratio": ratio},
        "fp32_bytes": {"mha_kv_bytes": mha * 2, "gqa_kv_bytes": gqa * 2, "saving_ratio": ratio},
        "bits_not_bytes": {"mha_kv_bytes": mha * 8, "gqa_kv_bytes": gqa * 8, "saving_ratio": ratio},
        "mib_not_bytes": {"mha_kv_bytes": mha / 1024**2, "gqa_kv_bytes": gqa / 1024**2, "saving_ratio": ratio},
        "mb_not_bytes": {"mha_kv_bytes": mha / 1e6, "gqa_kv_bytes": gqa / 1e6, "saving_ratio": ratio},
        "percent_not_fraction": {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": ratio * 100},
        "forgot_one_minus": {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": gqa / mha},
        "q_heads_for_kv": {"mha_kv_bytes": mha, "gqa_kv_bytes": mha, "saving_ratio": 0.0},
    }


def kv_cache_bytes(batch, seq_len, num_kv_heads, head_dim, bytes_per_element=2, num_layers=1):
    """KV Cache 占用的字节数：K 和 V 各一份，每个元素 bytes_per_element 字节，共 num_layers 层。返回 int。"""
    ### BEGIN SOLUTION
    for name, value in [("batch", batch), ("seq_len", seq_len), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("bytes_per_element", bytes_per_element),
                        ("num_layers", num_layers)]:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers
    ### END SOLUTION


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
