"""Rotary position embedding, RoPE (chapter §4).

Pinned convention (the chapter's and Meta's): adjacent dims (2i, 2i+1) form a pair, pair i turns by
angle pos * theta ** (-2i / d), positions start at 0, and

    [x0, x1] -> [x0 * cos - x1 * sin, x1 * cos + x0 * sin]

Hugging Face's `rotate_half` pairs (i, i + d/2) instead: a permutation of the same idea, not the
convention here. A dot product of rotated q (at m) and k (at n) depends only on n - m; it does not
in general shrink with distance (the chapter's §4.1 claims it does, its own §4.2 admits otherwise).
"""

import torch


def precompute_rope_freqs(dim, seq_len, theta=10000.0, dtype=torch.float32):
    """预计算每个位置、每个维度对的旋转角的 cos 和 sin。

    第 i 个维度对（第 2i 和 2i+1 维）的频率是 theta ** (-2i / dim)，位置从 0 开始。
    返回 (cos, sin)，形状都是 [seq_len, dim // 2]，dtype 为参数 dtype。
    """
    ### BEGIN SOLUTION
    if not isinstance(dim, int) or dim <= 0 or dim % 2 != 0:
        raise ValueError(f"dim must be a positive even integer (dims are rotated in pairs), got {dim!r}")
    if not isinstance(seq_len, int) or seq_len <= 0:
        raise ValueError(f"seq_len must be a positive integer, got {seq_len!r}")
    if theta <= 0:
        raise ValueError(f"theta must be > 0, got {theta!r}")
    # angles in float64, then one rounding to the requested dtype
    freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    positions = torch.arange(seq_len, dtype=torch.float64)
    angles = torch.outer(positions, freqs)  # [seq_len, dim // 2]
    return angles.cos().to(dtype), angles.sin().to(dtype)
    ### END SOLUTION


def apply_rotary_emb(x, cos, sin):
    """对 x 施加旋转位置编码：最后一维相邻两维 (2i, 2i+1) 配成一对做 2D 旋转。

    参数:
        x:        [..., seq_len, d_head]，例如 [seq_len, d_head] 或 [B, H, seq_len, d_head]
                  （倒数第二维是位置；[B, S, H, D] 布局请先 transpose 成 [B, H, S, D]）
        cos, sin: [seq_len, d_head // 2]，来自 precompute_rope_freqs
    返回:
        与 x 形状相同、dtype 相同的张量（在 x 的 dtype 中计算，半精度类型用 float32 计算）
    """
    ### BEGIN SOLUTION
    if x.dim() < 2 or x.shape[-1] % 2 != 0:
        raise ValueError(f"x must be [..., seq_len, d_head] with an even d_head, got {list(x.shape)}")
    seq_len, half = x.shape[-2], x.shape[-1] // 2
    for name, t in (("cos", cos), ("sin", sin)):
        if t.shape != (seq_len, half):
            raise ValueError(
                f"{name} must have shape [seq_len, d_head // 2] = [{seq_len}, {half}] for x of shape "
                f"{list(x.shape)}, got {list(t.shape)}"
            )
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    pairs = x.to(compute_dtype).reshape(*x.shape[:-1], half, 2)
    x0, x1 = pairs[..., 0], pairs[..., 1]
    # cos/sin [seq_len, half] broadcast against [..., seq_len, half] from the right
    cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)
    rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)
    return rotated.flatten(-2).to(x.dtype)
    ### END SOLUTION


def rope_score(q, k, pos_q, pos_k, theta=10000.0):
    """把向量 q 放在位置 pos_q、k 放在位置 pos_k，分别施加 RoPE 后求点积。

    q, k: [d] 的浮点向量（d 为偶数）。返回 0 维张量，dtype 与 q 相同。
    RoPE 的相对位置性质：结果只取决于 pos_k - pos_q。
    """
    ### BEGIN SOLUTION
    if q.dim() != 1 or q.shape != k.shape:
        raise ValueError(f"q and k must be vectors of the same shape [d], got {list(q.shape)} and {list(k.shape)}")
    if min(pos_q, pos_k) < 0:
        raise ValueError(f"positions must be >= 0, got pos_q={pos_q}, pos_k={pos_k}")
    cos, sin = precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, theta, dtype=q.dtype)
    q_rot = apply_rotary_emb(q[None, :], cos[pos_q : pos_q + 1], sin[pos_q : pos_q + 1])[0]
    k_rot = apply_rotary_emb(k[None, :], cos[pos_k : pos_k + 1], sin[pos_k : pos_k + 1])[0]
    return torch.dot(q_rot, k_rot.to(q_rot.dtype))
    ### END SOLUTION
