from autograder.examples import alternative, mistake, precision, with_precision_checks

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
        diagnosis="half_split_pairing",
    ),
    mistake(
        "positions_start_at_1", "positions 1..seq_len instead of 0..seq_len-1 (the score is shift-invariant)",
        [("positions = torch.arange(seq_len, dtype=torch.float64)",
          "positions = torch.arange(1, seq_len + 1, dtype=torch.float64)")],
        FREQS_VALUES,
        diagnosis="positions_start_at_1",
    ),
    mistake(
        "exponent_i_over_d", "frequencies theta ** (-i/d) with i the pair index (the 2 forgotten)",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (-torch.arange(0, dim // 2, dtype=torch.float64) / dim)")],
        FREQS_VALUES | SCORE,
        diagnosis="exponent_i_over_d",
    ),
    mistake(
        "frequencies_inverted", "frequencies theta ** (+2i/d): the sign of the exponent dropped",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)")],
        FREQS_VALUES | SCORE,
        diagnosis="frequencies_inverted",
    ),
    mistake(
        "cos_sin_swapped", "precompute returns (sin, cos)",
        [("return angles.cos().to(dtype), angles.sin().to(dtype)",
          "return angles.sin().to(dtype), angles.cos().to(dtype)")],
        FREQS_VALUES | SCORE,
        diagnosis="cos_sin_swapped",
    ),
    mistake(
        "rotation_sign_flipped", "clockwise rotation: [x0*cos + x1*sin, x1*cos - x0*sin]",
        [("rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)",
          "rotated = torch.stack([x0 * cos + x1 * sin, x1 * cos - x0 * sin], dim=-1)")],
        APPLY_ALL | SCORE,
        diagnosis="rotation_sign_flipped",
    ),
    mistake(
        "chapter_unsqueeze", "the chapter's cos.unsqueeze(0): [S, D] input gives [1, S, D]; rope_score breaks",
        [("cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)",
          "cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)\n"
          "    cos, sin = cos.unsqueeze(0), sin.unsqueeze(0)  # 对齐到 x 的前导维度")],
        {"test_apply_seq_only_float32"} | SCORE,
        diagnosis="cos_sin_unsqueezed",
    ),
    mistake(
        "layout_guessed_from_shape", "treats 4-D input as [B, S, H, D] when dim 1 matches seq_len (wrong when H == S)",
        [("cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)",
          "cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)\n"
          "    if x.dim() == 4 and x.shape[1] == cos.shape[0]:  # looks like [B, S, H, D]\n"
          "        cos, sin = cos[:, None, :], sin[:, None, :]")],
        {"test_apply_heads_equal_seq"},
        diagnosis="rotated_along_heads",
    ),
    mistake(
        "theta_ignored", "precompute uses 10000 whatever theta is passed",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)")],
        {"test_freqs_theta", "test_score_theta"},
        diagnosis="theta_ignored",
    ),
    mistake(
        "exponent_4i_over_d", "frequencies theta ** (-4i/d): arange(0, dim, 2) is already 2i, multiplied by 2 again",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (-2 * torch.arange(0, dim, 2, dtype=torch.float64) / dim)")],
        FREQS_VALUES | SCORE,
        diagnosis="exponent_4i_over_d",
    ),
    mistake(
        "table_transposed", "torch.outer(freqs, positions): tables of shape [dim // 2, seq_len]; rope_score breaks",
        [("angles = torch.outer(positions, freqs)  # [seq_len, dim // 2]",
          "angles = torch.outer(freqs, positions)")],
        FREQS_VALUES | {"test_freqs_shapes"} | SCORE,
        diagnosis="table_transposed",
    ),
    mistake(
        "dtype_argument_ignored", "precompute returns float64 whatever dtype is asked (the final .to(dtype) left out)",
        [("return angles.cos().to(dtype), angles.sin().to(dtype)", "return angles.cos(), angles.sin()")],
        {"test_freqs_default_float32", "test_freqs_theta", "test_freqs_shapes"},
        diagnosis="dtype_argument_ignored",
    ),
    mistake(
        "apply_cos_sin_swapped",
        "apply_rotary_emb multiplies by sin where cos belongs: [x0*sin - x1*cos, x1*sin + x0*cos]",
        [("rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)",
          "rotated = torch.stack([x0 * sin - x1 * cos, x1 * sin + x0 * cos], dim=-1)")],
        APPLY_ALL | SCORE,
        diagnosis="apply_cos_sin_swapped",
    ),
    mistake(
        "output_dtype_not_restored", "computes in float32 for half types but returns float32 (no .to(x.dtype))",
        [("return rotated.flatten(-2).to(x.dtype)", "return rotated.flatten(-2)")],
        {"test_apply_bfloat16"},
        diagnosis="output_dtype_not_restored",
    ),
    mistake(
        "score_theta_not_passed", "rope_score calls precompute_rope_freqs without theta (the default 10000 is used)",
        [("precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, theta, dtype=q.dtype)",
          "precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, dtype=q.dtype)")],
        {"test_score_theta"},
        diagnosis="score_theta_not_passed",
    ),
    mistake(
        "score_same_row", "rope_score rotates k with row pos_q of the table too: the score is always q·k",
        [("k_rot = apply_rotary_emb(k[None, :], cos[pos_k : pos_k + 1], sin[pos_k : pos_k + 1])[0]",
          "k_rot = apply_rotary_emb(k[None, :], cos[pos_q : pos_q + 1], sin[pos_q : pos_q + 1])[0]")],
        SCORE,
        diagnosis="score_ignores_positions",
    ),
    mistake(
        "score_positions_swapped", "rope_score rotates q to pos_k and k to pos_q",
        [("q_rot = apply_rotary_emb(q[None, :], cos[pos_q : pos_q + 1], sin[pos_q : pos_q + 1])[0]\n"
          "    k_rot = apply_rotary_emb(k[None, :], cos[pos_k : pos_k + 1], sin[pos_k : pos_k + 1])[0]",
          "q_rot = apply_rotary_emb(q[None, :], cos[pos_k : pos_k + 1], sin[pos_k : pos_k + 1])[0]\n"
          "    k_rot = apply_rotary_emb(k[None, :], cos[pos_q : pos_q + 1], sin[pos_q : pos_q + 1])[0]")],
        SCORE,
        diagnosis="score_positions_swapped",
    ),
    # --- uncatalogued (no name; the hints localise them) ---
    mistake(
        "freqs_exponent_over_dim_minus_2", "the frequency exponent divides by dim - 2: theta ** (-2i / (dim - 2))",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
          "freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / (dim - 2))")],
        FREQS_VALUES | SCORE,
    ),
    mistake(
        "apply_second_sign_flipped", "the second component rotated with the wrong sign: x1·cos − x0·sin",
        [("rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)",
          "rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos - x0 * sin], dim=-1)")],
        APPLY_ALL | SCORE,
    ),
    mistake(
        "score_scaled_like_attention", "rope_score divides the dot product by sqrt(d), as attention scores are",
        [("return torch.dot(q_rot, k_rot.to(q_rot.dtype))", "return torch.dot(q_rot, k_rot.to(q_rot.dtype)) / q.shape[0] ** 0.5")],
        SCORE,
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {"test_freqs_float64": "test_freqs_float64_precision", "test_apply_float64": "test_apply_float64_precision",
                "test_score_float64": "test_score_float64_precision"}
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF)

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

FREQS_REF = (
    "    # angles in float64, then one rounding to the requested dtype\n"
    "    freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)\n"
    "    positions = torch.arange(seq_len, dtype=torch.float64)\n"
    "    angles = torch.outer(positions, freqs)  # [seq_len, dim // 2]\n"
    "    return angles.cos().to(dtype), angles.sin().to(dtype)")
APPLY_REF = (
    "    compute_dtype = torch.promote_types(x.dtype, torch.float32)\n"
    "    pairs = x.to(compute_dtype).reshape(*x.shape[:-1], half, 2)\n"
    "    x0, x1 = pairs[..., 0], pairs[..., 1]\n"
    "    # cos/sin [seq_len, half] broadcast against [..., seq_len, half] from the right\n"
    "    cos, sin = cos.to(compute_dtype), sin.to(compute_dtype)\n"
    "    rotated = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1)\n"
    "    return rotated.flatten(-2).to(x.dtype)")
SCORE_REF = (
    "    cos, sin = precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, theta, dtype=q.dtype)\n"
    "    q_rot = apply_rotary_emb(q[None, :], cos[pos_q : pos_q + 1], sin[pos_q : pos_q + 1])[0]\n"
    "    k_rot = apply_rotary_emb(k[None, :], cos[pos_k : pos_k + 1], sin[pos_k : pos_k + 1])[0]\n"
    "    return torch.dot(q_rot, k_rot.to(q_rot.dtype))")

ALTERNATIVES = [
    alternative(
        "complex_polar",
        "Meta's complex-number RoPE: the table from torch.polar (cos = real part, sin = imaginary part), "
        "pairs viewed as complex numbers with torch.view_as_complex and multiplied by cos + i·sin; "
        "rope_score as the sum of the element-wise product",
        [(FREQS_REF,
          "    inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))\n"
          "    t = torch.arange(seq_len, dtype=torch.float64)\n"
          "    freqs = torch.outer(t, inv_freq)\n"
          "    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # e^{i·m·θ_j}, complex128\n"
          "    return freqs_cis.real.to(dtype), freqs_cis.imag.to(dtype)"),
         (APPLY_REF,
          "    work = torch.float64 if x.dtype == torch.float64 else torch.float32\n"
          "    x_c = torch.view_as_complex(x.to(work).reshape(*x.shape[:-1], half, 2).contiguous())\n"
          "    rot = torch.complex(cos.to(work), sin.to(work))\n"
          "    return torch.view_as_real(x_c * rot).flatten(-2).to(x.dtype)"),
         (SCORE_REF,
          "    n = max(pos_q, pos_k) + 1\n"
          "    cos, sin = precompute_rope_freqs(q.shape[-1], n, theta=theta, dtype=q.dtype)\n"
          "    q_rot = apply_rotary_emb(q.unsqueeze(0), cos[pos_q].unsqueeze(0), sin[pos_q].unsqueeze(0)).squeeze(0)\n"
          "    k_rot = apply_rotary_emb(k.unsqueeze(0), cos[pos_k].unsqueeze(0), sin[pos_k].unsqueeze(0)).squeeze(0)\n"
          "    return (q_rot * k_rot).sum()")],
    ),
    alternative(
        "strided_slices_native_dtype",
        "angles computed directly in the requested dtype (float32 tables from float32 angles, float64 "
        "from float64) with torch.pow and broadcasting; x[..., 0::2] / x[..., 1::2] written back into "
        "an empty tensor; rope_score rotates a whole sequence of copies and picks the two rows",
        [(FREQS_REF,
          "    work = torch.promote_types(dtype, torch.float32)\n"
          "    i = torch.arange(dim // 2, dtype=work)\n"
          "    freqs = torch.pow(theta, -2 * i / dim)\n"
          "    positions = torch.arange(seq_len, dtype=work)\n"
          "    angles = positions[:, None] * freqs[None, :]\n"
          "    return torch.cos(angles).to(dtype), torch.sin(angles).to(dtype)"),
         (APPLY_REF,
          "    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x\n"
          "    cos, sin = cos.to(xf.dtype), sin.to(xf.dtype)\n"
          "    x_even, x_odd = xf[..., 0::2], xf[..., 1::2]\n"
          "    out = torch.empty_like(xf)\n"
          "    out[..., 0::2] = x_even * cos - x_odd * sin\n"
          "    out[..., 1::2] = x_odd * cos + x_even * sin\n"
          "    return out.to(x.dtype)"),
         (SCORE_REF,
          "    n = max(pos_q, pos_k) + 1\n"
          "    cos, sin = precompute_rope_freqs(len(q), n, theta, q.dtype)\n"
          "    q_all = apply_rotary_emb(q.expand(n, -1), cos, sin)  # q at every position 0..n-1\n"
          "    k_all = apply_rotary_emb(k.expand(n, -1), cos, sin)\n"
          "    return torch.dot(q_all[pos_q], k_all[pos_k])")],
    ),
    alternative(
        "rotation_matrices_relative",
        "each pair rotated by an explicit 2×2 matrix [[cos, -sin], [sin, cos]] with matmul (float64 kept "
        "float64, half types in float32); the table with torch.einsum; rope_score uses the relative "
        "property itself and rotates only one vector, by |pos_k - pos_q|",
        [(FREQS_REF,
          "    exponents = torch.arange(0, dim, 2, dtype=torch.float64) / dim\n"
          "    inv_freq = torch.tensor(theta, dtype=torch.float64) ** -exponents\n"
          "    angles = torch.einsum(\"m,j->mj\", torch.arange(seq_len, dtype=torch.float64), inv_freq)\n"
          "    return torch.cos(angles).to(dtype=dtype), torch.sin(angles).to(dtype=dtype)"),
         (APPLY_REF,
          "    work = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32\n"
          "    c, s = cos.to(work), sin.to(work)\n"
          "    rot = torch.stack([torch.stack([c, -s], dim=-1), torch.stack([s, c], dim=-1)], dim=-2)\n"
          "    pairs = x.to(work).unflatten(-1, (half, 2)).unsqueeze(-1)  # [..., S, half, 2, 1]\n"
          "    return (rot @ pairs).squeeze(-1).flatten(-2).to(x.dtype)"),
         (SCORE_REF,
          "    # q·k after RoPE depends only on pos_k - pos_q: rotate the later one by the distance\n"
          "    distance = abs(pos_k - pos_q)\n"
          "    cos, sin = precompute_rope_freqs(q.shape[0], distance + 1, theta, dtype=q.dtype)\n"
          "    if pos_k >= pos_q:\n"
          "        k = apply_rotary_emb(k.view(1, -1), cos[distance:], sin[distance:]).view(-1)\n"
          "    else:\n"
          "        q = apply_rotary_emb(q.view(1, -1), cos[distance:], sin[distance:]).view(-1)\n"
          "    return q @ k")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION = [
    precision(
        "float32_compute", "apply_rotary_emb always computes in float32 (the chapter's x.float()); rope_score uses it",
        [("compute_dtype = torch.promote_types(x.dtype, torch.float32)", "compute_dtype = torch.float32")],
        {"test_apply_float64_precision", "test_score_float64_precision"},
    ),
    precision(
        "freqs_angles_in_float32",
        "the chapter's precompute (angles in float32, torch.arange(...).float()) cast to dtype at the end",
        [("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)\n"
          "    positions = torch.arange(seq_len, dtype=torch.float64)",
          "freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))\n"
          "    positions = torch.arange(seq_len).float()")],
        {"test_freqs_float64_precision", "test_score_float64_precision"},
    ),
    precision(
        "score_tables_in_float32", "rope_score calls precompute_rope_freqs without dtype=q.dtype: float32 tables",
        [("precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, theta, dtype=q.dtype)",
          "precompute_rope_freqs(q.shape[0], max(pos_q, pos_k) + 1, theta)")],
        {"test_score_float64_precision"},
    ),
]
