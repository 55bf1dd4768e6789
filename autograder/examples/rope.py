from autograder.examples import mistake

FREQS_VALUES = {"test_freqs_default_float32", "test_freqs_theta", "test_freqs_float64"}
APPLY_ALL = {"test_apply_seq_only_float32", "test_apply_batched_float32", "test_apply_heads_equal_seq",
             "test_apply_float64", "test_apply_bfloat16"}
SCORE = {"test_score_float64", "test_score_theta"}

MISTAKES = [
    mistake(
        "half_split_pairing", "Hugging Face's rotate_half: pairs (i, i + d/2) instead of adjacent (2i, 2i+1)",
        [("pairs = x.to(compute_dtype).reshape(*x.shape[:-1], half, 2)\n    x0, x1 = pairs[..., 0], pairs[..., 1]",
          "xc = x.to(compute_dtype)\n    x0, x1 = xc[..., :half], xc[..., half:]"),
         ("rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)\n"
          "    return rotated.flatten(-2).to(x.dtype)",
          "return torch.cat([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1).to(x.dtype)")],
        APPLY_ALL | SCORE,
    ),
    mistake(
        "positions_start_at_1", "positions 1..seq_len instead of 0..seq_len-1 (the score is shift-invariant)",
        [("positions = torch.arange(seq_len, dtype=torch.float64)",
          "positions = torch.arange(1, seq_len + 1, dtype=torch.float64)")],
        FREQS_VALUES,
    ),
    mistake(
        "exponent_i_over_d", "frequencies theta ** (-i/d) with i the pair index (the 2 forgotten)",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (-torch.arange(0, dim // 2, dtype=torch.float64) / dim)")],
        FREQS_VALUES | SCORE,
    ),
    mistake(
        "frequencies_inverted", "frequencies theta ** (+2i/d): the sign of the exponent dropped",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)")],
        FREQS_VALUES | SCORE,
    ),
    mistake(
        "cos_sin_swapped", "precompute returns (sin, cos)",
        [("return angles.cos().to(dtype), angles.sin().to(dtype)",
          "return angles.sin().to(dtype), angles.cos().to(dtype)")],
        FREQS_VALUES | SCORE,
    ),
    mistake(
        "rotation_sign_flipped", "clockwise rotation: [x0*cos + x1*sin, x1*cos - x0*sin]",
        [("rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)",
          "rotated = torch.stack([x0 * cos + x1 * sin, x1 * cos - x0 * sin], dim=-1)")],
        APPLY_ALL | SCORE,
    ),
    mistake(
        "float32_compute", "apply_rotary_emb always computes in float32 (the chapter's x.float())",
        [("compute_dtype = torch.promote_types(x.dtype, torch.float32)", "compute_dtype = torch.float32")],
        {"test_apply_float64"} | SCORE,
    ),
    mistake(
        "chapter_unsqueeze", "the chapter's cos.unsqueeze(0): [S, D] input gives [1, S, D]; rope_score breaks",
        [("cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)",
          "cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)\n"
          "    cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)  # 对齐到 x 的前导维度")],
        {"test_apply_seq_only_float32"} | SCORE,
    ),
    mistake(
        "layout_guessed_from_shape", "treats 4-D input as [B, S, H, D] when dim 1 matches seq_len (wrong when H == S)",
        [("cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)",
          "cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)\n"
          "    if x.dim() == 4 and x.shape[1] == cos.shape[0]:  # looks like [B, S, H, D]\n"
          "        cos, sin = cos[:, None, :], sin[:, None, :]")],
        {"test_apply_heads_equal_seq"},
    ),
    mistake(
        "theta_ignored", "precompute uses 10000 whatever theta is passed",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)")],
        {"test_freqs_theta", "test_score_theta"},
    ),
    mistake(
        "freqs_angles_in_float32",
        "the chapter's precompute (angles in float32) cast to dtype at the end: float64 tables have float32 precision",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)\n"
          "    positions = torch.arange(seq_len, dtype=torch.float64)",
          "freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))\n"
          "    positions = torch.arange(seq_len).float()")],
        {"test_freqs_float64"} | SCORE,
    ),
]
