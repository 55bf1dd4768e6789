from autograder.examples import alternative, mistake, precision, with_precision_checks

HAND = {"test_hand_q_norm", "test_hand_k_norm_max", "test_hand_logit_bound"}
# the attention checks with more than one token (every attention slip shows there)
# the float64 module checks with a mask: the causal one, the eps one (eps = 0.25 on small inputs), and one varying
# QK-Norm, theta, the mask each
ATTENTION_MASKED = {"test_attention_causal_float64", "test_attention_qk_norm_eps_float64",
                    "test_attention_qk_norm_float64", "test_attention_theta_float64",
                    "test_attention_random_mask_float64"}
BLOCK_MASKED = {"test_block_causal_float64", "test_block_eps_float64", "test_block_qk_norm_float64",
                "test_block_theta_float64", "test_block_random_mask_float64"}
ATTENTION = ATTENTION_MASKED | {"test_attention_heads_equal_seq_len_float32"}
BLOCK = BLOCK_MASKED | {"test_block_float32"}
MASKED = ATTENTION_MASKED | BLOCK_MASKED
QK_NORM = {"test_attention_qk_norm_eps_float64", "test_attention_qk_norm_float64", "test_block_eps_float64",
           "test_block_qk_norm_float64", "test_block_float32"}
THETA = {"test_attention_theta_float64", "test_block_theta_float64"}
BLOCK_ONLY = BLOCK

ROPE_REF = "        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)\n"
SCORES_REF = "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)\n"
BLOCK_REF = ("        h = x + self.attn(self.norm_attn(x), mask)\n"
             "        return h + self.ffn(self.norm_ffn(h))\n")
SPLIT_REF = ("        q = self.W_q(x).view(B, S, self.num_q_heads, self.d_head)\n"
             "        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_head)\n"
             "        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_head)\n"
             "        if self.qk_norm:  # over d_head: each head of each token normalised on its own, before RoPE\n"
             "            q, k = self.q_norm(q), self.k_norm(k)\n")
LAYOUT_REF = ("        q = q.transpose(1, 2)\n"
              "        k = repeat_kv(k, self.n_rep).transpose(1, 2)\n"
              "        v = repeat_kv(v, self.n_rep).transpose(1, 2)\n"
              "        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)\n" + ROPE_REF)
HAND_REF = ("q_norm = math.sqrt(d_head)\n"
            "k_norm_max = math.sqrt(d_head) * max(abs(g) for g in gamma_k)\n"
            "logit_bound = math.sqrt(d_head) * max(abs(g) for g in gamma_q) * max(abs(g) for g in gamma_k)\n")
PERMUTE_REF = "    return w.reshape(n_heads, d_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)"
NORMS_REF = ("            self.q_norm = RMSNorm(self.d_head, eps)\n"
             "            self.k_norm = RMSNorm(self.d_head, eps)\n")

MISTAKES = [
    # --- the block
    mistake("post_norm_order", "the block in Post-Norm order: h = norm_attn(x + attn(x)), out = norm_ffn(h + ffn(h))",
            [(BLOCK_REF, "        h = self.norm_attn(x + self.attn(x, mask))\n"
                         "        return self.norm_ffn(h + self.ffn(h))\n")],
            BLOCK, diagnosis="post_norm_order"),
    mistake("attn_residual_dropped", "the attention sub-layer without its residual: h = attn(norm_attn(x))",
            [(BLOCK_REF, "        h = self.attn(self.norm_attn(x), mask)\n"
                         "        return h + self.ffn(self.norm_ffn(h))\n")],
            BLOCK, diagnosis="attn_residual_dropped"),
    mistake("ffn_residual_dropped", "the FFN sub-layer without its residual: out = ffn(norm_ffn(h))",
            [(BLOCK_REF, "        h = x + self.attn(self.norm_attn(x), mask)\n"
                         "        return self.ffn(self.norm_ffn(h))\n")],
            BLOCK, diagnosis="ffn_residual_dropped"),
    mistake("norm_ffn_for_attention", "norm_ffn used in front of the attention too (norm_attn left unused)",
            [(BLOCK_REF, "        h = x + self.attn(self.norm_ffn(x), mask)\n"
                         "        return h + self.ffn(self.norm_ffn(h))\n")],
            BLOCK, diagnosis="norm_ffn_for_attention"),
    mistake("norm_attn_for_ffn", "norm_attn used in front of the FFN too (norm_ffn left unused)",
            [(BLOCK_REF, "        h = x + self.attn(self.norm_attn(x), mask)\n"
                         "        return h + self.ffn(self.norm_attn(h))\n")],
            BLOCK, diagnosis="norm_attn_for_ffn"),
    mistake("block_gate_up_swapped", "the FFN written out inside the block with W_gate and W_up swapped",
            [(BLOCK_REF, "        h = x + self.attn(self.norm_attn(x), mask)\n"
                         "        n = self.norm_ffn(h)\n"
                         "        return h + self.ffn.W_down(F.silu(self.ffn.W_up(n)) * self.ffn.W_gate(n))\n")],
            BLOCK, diagnosis="gate_up_swapped"),
    mistake("block_mask_not_passed", "the block calls the attention without the mask",
            [(BLOCK_REF, "        h = x + self.attn(self.norm_attn(x))\n"
                         "        return h + self.ffn(self.norm_ffn(h))\n")],
            BLOCK_MASKED, diagnosis="mask_ignored"),
    mistake("attn_renamed", "the attention sub-module named `attention` instead of the pinned `attn`",
            [("        self.attn = LlamaAttention(", "        self.attention = LlamaAttention("),
             (BLOCK_REF, "        h = x + self.attention(self.norm_attn(x), mask)\n"
                         "        return h + self.ffn(self.norm_ffn(h))\n")],
            {"test_block_parameters", "test_block_float64_precision"} | BLOCK, diagnosis="parameters_renamed"),
    # --- RoPE's place and layout
    mistake("rope_on_bshd_layout",
            "apply_rotary_emb called on the [B, S, H, D] layout (K after repeat_kv): rotated by head index, silent when "
            "H == S, a shape error otherwise",
            [(LAYOUT_REF, "        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)\n"
                          "        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(repeat_kv(k, self.n_rep), cos, sin)\n"
                          "        q, k = q.transpose(1, 2), k.transpose(1, 2)\n"
                          "        v = repeat_kv(v, self.n_rep).transpose(1, 2)\n")],
            # q and k of one head turn by the same (head-indexed) angle: no RoPE in the scores, which is what is named
            ATTENTION | BLOCK, diagnosis="no_rope"),
    mistake("rotate_half_unpermuted", "the student's own RoPE in Hugging Face's rotate_half pairing (i, i + d/2), the "
            "weights not permuted",
            [(ROPE_REF, "        half = self.d_head // 2\n"
                        "        c, s = torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)\n"
                        "        q = q * c + torch.cat([-q[..., half:], q[..., :half]], dim=-1) * s\n"
                        "        k = k * c + torch.cat([-k[..., half:], k[..., :half]], dim=-1) * s\n")],
            ATTENTION | BLOCK, diagnosis="rotate_half_unpermuted"),
    mistake("rope_k_missing", "RoPE on q only", [(ROPE_REF, "        q = apply_rotary_emb(q, cos, sin)\n")],
            ATTENTION | BLOCK, diagnosis="rope_k_missing"),
    mistake("rope_on_v", "RoPE on v too",
            [(ROPE_REF, ROPE_REF + "        v = apply_rotary_emb(v, cos, sin)\n")],
            ATTENTION | BLOCK, diagnosis="rope_on_v"),
    mistake("no_rope", "no RoPE at all (the chapter's §5 block)", [(ROPE_REF, "")],
            ATTENTION | BLOCK, diagnosis="no_rope"),
    # --- QK-Norm
    mistake("rope_before_qk_norm", "QK-Norm applied after RoPE instead of before",
            [(SPLIT_REF, SPLIT_REF.rsplit("        if self.qk_norm", 1)[0]),
             (ROPE_REF, ROPE_REF + "        if self.qk_norm:\n            q, k = self.q_norm(q), self.k_norm(k)\n")],
            QK_NORM, diagnosis="rope_before_qk_norm"),
    mistake("k_through_q_norm", "k normalised by q_norm as well (k_norm left unused)",
            [("            q, k = self.q_norm(q), self.k_norm(k)\n", "            q, k = self.q_norm(q), self.q_norm(k)\n")],
            QK_NORM | {"test_attention_float64_precision", "test_block_float64_precision"},
            diagnosis="shared_qk_norm"),
    mistake("one_qk_norm_module", "one RMSNorm module under both names: self.k_norm = self.q_norm",
            [(NORMS_REF, "            self.q_norm = RMSNorm(self.d_head, eps)\n"
                         "            self.k_norm = self.q_norm\n")],
            QK_NORM | {"test_attention_float64_precision", "test_block_float64_precision"},
            diagnosis="shared_qk_norm"),
    mistake("qk_norm_over_d_model", "QK-Norm over the whole projection (before the head split): RMSNorm(H * d_head)",
            [(NORMS_REF, "            self.q_norm = RMSNorm(num_q_heads * self.d_head, eps)\n"
                         "            self.k_norm = RMSNorm(num_kv_heads * self.d_head, eps)\n"),
             (SPLIT_REF, "        q, k = self.W_q(x), self.W_k(x)\n"
                         "        if self.qk_norm:\n"
                         "            q, k = self.q_norm(q), self.k_norm(k)\n"
                         "        q = q.view(B, S, self.num_q_heads, self.d_head)\n"
                         "        k = k.view(B, S, self.num_kv_heads, self.d_head)\n"
                         "        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_head)\n")],
            {"test_attention_parameters", "test_block_parameters"} | QK_NORM
            | {"test_attention_float64_precision", "test_block_float64_precision"},
            diagnosis="qk_norm_over_d_model"),
    # --- GQA and the attention itself
    mistake("chapter_mod_mapping", "K/V tiled with x.repeat: query head h reads KV head h % num_kv_heads (§7.1's mapping)",
            [("        k = repeat_kv(k, self.n_rep).transpose(1, 2)\n        v = repeat_kv(v, self.n_rep).transpose(1, 2)\n",
              "        k = k.repeat(1, 1, self.n_rep, 1).transpose(1, 2)\n        v = v.repeat(1, 1, self.n_rep, 1).transpose(1, 2)\n")],
            ATTENTION | BLOCK, diagnosis="mod_mapping"),
    mistake("no_scale", "scores not divided by sqrt(d_head)",
            [(SCORES_REF, "        scores = q @ k.transpose(-2, -1)\n")], ATTENTION | BLOCK, diagnosis="no_scale"),
    mistake("scale_d_model", "scores divided by sqrt(d_model)",
            [(SCORES_REF, "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.num_q_heads * self.d_head)\n")],
            ATTENTION | BLOCK, diagnosis="scale_d_model"),
    mistake("mask_ignored", "the attention never uses its mask argument",
            [("            scores = scores + mask\n", "            pass\n")], MASKED, diagnosis="mask_ignored"),
    mistake("mask_multiplied", "the additive mask multiplied onto the scores",
            [("            scores = scores + mask\n", "            scores = scores * mask\n")], MASKED,
            diagnosis="mask_multiplied"),
    mistake("no_output_projection", "the merged heads returned without W_o",
            [("        return self.W_o(out)\n", "        return out\n")], ATTENTION | BLOCK,
            diagnosis="no_output_projection"),
    mistake("softmax_wrong_dim", "softmax over the query axis",
            [("        weights = F.softmax(scores, dim=-1)\n", "        weights = F.softmax(scores, dim=-2)\n")],
            ATTENTION | BLOCK, diagnosis="softmax_wrong_dim"),
    mistake("merge_heads_without_transpose", "heads merged with reshape straight from [B, H, S, d_head]",
            [("        out = (weights @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)\n",
              "        out = (weights @ v).reshape(B, S, self.num_q_heads * self.d_head)\n")],
            ATTENTION | BLOCK, diagnosis="merge_heads_without_transpose"),
    mistake("linear_bias", "W_q built with nn.Linear's default bias (found when the weights are loaded by name)",
            [("        self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)\n",
              "        self.W_q = nn.Linear(d_model, num_q_heads * self.d_head)\n")],
            {"test_attention_parameters", "test_block_parameters", "test_attention_float64_precision",
             "test_block_float64_precision"} | ATTENTION | BLOCK,
            diagnosis="linear_bias"),
    # --- the hand part
    mistake("hand_length_one", "the chapter's §8 claim: lengths ≈ 1 after QK-Norm",
            [(HAND_REF, "q_norm = 1.0\n"
                        "k_norm_max = max(abs(g) for g in gamma_k)\n"
                        "logit_bound = max(abs(g) for g in gamma_q) * max(abs(g) for g in gamma_k) / math.sqrt(d_head)\n")],
            HAND, diagnosis="qk_length_one"),
    mistake("hand_max_without_abs", "max(γ) instead of max|γ| (the largest |γ| is negative)",
            [(HAND_REF, "q_norm = math.sqrt(d_head)\n"
                        "k_norm_max = math.sqrt(d_head) * max(gamma_k)\n"
                        "logit_bound = math.sqrt(d_head) * max(gamma_q) * max(gamma_k)\n")],
            {"test_hand_k_norm_max", "test_hand_logit_bound"}, diagnosis="gamma_max_without_abs"),
    mistake("hand_bound_unscaled", "the logit bound without the division by sqrt(d_head)",
            [(HAND_REF, HAND_REF.replace("logit_bound = math.sqrt(d_head) *", "logit_bound = d_head *"))],
            {"test_hand_logit_bound"}, diagnosis="bound_unscaled"),
    mistake("hand_squared_length", "squared lengths: d_head and d_head · max|γ_k|²",
            [(HAND_REF, "q_norm = d_head\n"
                        "k_norm_max = d_head * max(abs(g) for g in gamma_k) ** 2\n"
                        "logit_bound = math.sqrt(d_head) * max(abs(g) for g in gamma_q) * max(abs(g) for g in gamma_k)\n")],
            {"test_hand_q_norm", "test_hand_k_norm_max"}, diagnosis="qk_squared_length"),
    mistake("hand_gamma_ignored", "the norm weights left out of the largest length and of the bound",
            [(HAND_REF, "q_norm = math.sqrt(d_head)\n"
                        "k_norm_max = math.sqrt(d_head)\n"
                        "logit_bound = math.sqrt(d_head)\n")],
            {"test_hand_k_norm_max", "test_hand_logit_bound"}, diagnosis="qk_gamma_ignored"),
    # --- permute_for_rotate_half
    mistake("inverse_permutation", "the inverse reordering: the first half of a head's rows go to the even rows",
            [(PERMUTE_REF, "    return w.reshape(n_heads, 2, d_head // 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)")],
            {"test_permute_projection_float64", "test_permute_norm_weight", "test_permute_key_projection_float32"},
            diagnosis="inverse_permutation"),
    mistake("permute_across_heads", "all rows reordered as one head",
            [(PERMUTE_REF, "    return w.reshape(1, n_heads * d_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)")],
            {"test_permute_projection_float64", "test_permute_key_projection_float32"},
            diagnosis="permute_across_heads"),
    # --- uncatalogued (no name) ---
    mistake(
        "hand_k_norm_mean_gamma", "the typed bound on |k| uses the mean of |gamma_k| instead of its maximum",
        [("k_norm_max = math.sqrt(d_head) * max(abs(g) for g in gamma_k)",
          "k_norm_max = math.sqrt(d_head) * sum(abs(g) for g in gamma_k) / len(gamma_k)")],
        {"test_hand_k_norm_max"},
    ),
    mistake(
        "parallel_block", "the FFN reads norm_ffn(x), not norm_ffn(h): a parallel block (GPT-J style), not LLaMA's",
        [("        return h + self.ffn(self.norm_ffn(h))\n", "        return h + self.ffn(self.norm_ffn(x))\n")],
        BLOCK_ONLY,
    ),
    mistake(
        "permute_pairs_swapped", "permute_for_rotate_half swaps the two rows of every pair before regrouping them",
        [(PERMUTE_REF, "    return w.reshape(n_heads, d_head // 2, 2, *w.shape[1:]).flip(2).transpose(1, 2).reshape(w.shape)")],
        {"test_permute_projection_float64", "test_permute_norm_weight", "test_permute_key_projection_float32"},
    ),
]

# --- norms slightly off, within float32 rounding at the default eps on unit-scale inputs (no name): the checks with a
# large eps on small inputs (test_*_eps_float64) show them, so the precision checks do not call them a precision (issue 22) ---
QK_NORM_CALL = ("        if self.qk_norm:  # over d_head: each head of each token normalised on its own, before RoPE\n"
                "            q, k = self.q_norm(q), self.k_norm(k)\n")
LARGE_EPS = {"test_attention_qk_norm_eps_float64", "test_block_eps_float64"}
# an eps of 1e-5 for 1e-6 moves a unit-scale norm by ~5e-6: a few float32 roundings, which the gradients of the float32
# block check (F32_BLOCK) amplify past its tolerance for some ids (the block norms' also past float32 rounding in the
# float64 block checks at the default eps, by ~3x for some ids); whether those fail depends on the id, the large-eps checks always do
EPS_1E5_FLOAT32 = {"test_block_float32", "test_block_qk_norm_float64"}
OWN_NORM = ("class LlamaAttention(nn.Module):\n",
            "def own_rms_norm(x, gamma, eps):  # eps after the square root\n"
            "    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * gamma\n"
            "\n"
            "\n"
            "class LlamaAttention(nn.Module):\n")
MISTAKES += [
    mistake(
        "qk_norm_eps_outside_root", "the student's own QK-Norm adds eps after the square root",
        [OWN_NORM, (QK_NORM_CALL, "        if self.qk_norm:\n"
                                  "            q = own_rms_norm(q, self.q_norm.gamma, self.q_norm.eps)\n"
                                  "            k = own_rms_norm(k, self.k_norm.gamma, self.k_norm.eps)\n")],
        LARGE_EPS,
    ),
    mistake(
        "qk_norm_f_normalize", "QK-Norm as F.normalize(q) * sqrt(d_head) * gamma (no eps)",
        [(QK_NORM_CALL, "        if self.qk_norm:\n"
                        "            q = F.normalize(q, dim=-1) * math.sqrt(self.d_head) * self.q_norm.gamma\n"
                        "            k = F.normalize(k, dim=-1) * math.sqrt(self.d_head) * self.k_norm.gamma\n")],
        LARGE_EPS,
    ),
    mistake(
        "qk_norm_eps_1e5", "QK-Norm built with its own eps of 1e-5 (the eps argument not passed on)",
        [(NORMS_REF, "            self.q_norm = RMSNorm(self.d_head, 1e-5)\n"
                     "            self.k_norm = RMSNorm(self.d_head, 1e-5)\n")],
        LARGE_EPS, may_fail=EPS_1E5_FLOAT32 | {"test_attention_qk_norm_float64"},
    ),
    mistake(
        "block_norms_eps_outside_root", "the block's two norms add eps after the square root (the student's own norm)",
        [OWN_NORM, (BLOCK_REF, "        a = own_rms_norm(x, self.norm_attn.gamma, self.norm_attn.eps)\n"
                               "        h = x + self.attn(a, mask)\n"
                               "        return h + self.ffn(own_rms_norm(h, self.norm_ffn.gamma, self.norm_ffn.eps))\n")],
        {"test_block_eps_float64"},
    ),
    mistake(
        "block_norms_f_normalize", "the block's norms as F.normalize(x) * sqrt(d_model) * gamma (no eps)",
        [(BLOCK_REF, "        d = x.shape[-1]\n"
                     "        h = x + self.attn(F.normalize(x, dim=-1) * math.sqrt(d) * self.norm_attn.gamma, mask)\n"
                     "        return h + self.ffn(F.normalize(h, dim=-1) * math.sqrt(d) * self.norm_ffn.gamma)\n")],
        {"test_block_eps_float64"},
    ),
    mistake(
        "block_norms_eps_1e5", "the block's norms built with their own eps of 1e-5 (the eps argument not passed on)",
        [("        self.norm_attn = RMSNorm(d_model, eps)\n", "        self.norm_attn = RMSNorm(d_model, 1e-5)\n"),
         ("        self.norm_ffn = RMSNorm(d_model, eps)\n", "        self.norm_ffn = RMSNorm(d_model, 1e-5)\n")],
        {"test_block_eps_float64"}, may_fail=EPS_1E5_FLOAT32 | {"test_block_causal_float64", "test_block_theta_float64",
                                                              "test_block_random_mask_float64"},
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {**{c: "test_attention_float64_precision" for c in ATTENTION_MASKED},
                **{c: "test_block_float64_precision" for c in BLOCK_MASKED}}
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF)
# wrong only where theta is not the default, which the precision checks (default theta) never pass: it keeps them
MISTAKES.append(mistake(
    "rope_theta_not_passed", "LlamaAttention builds its RoPE table without self.theta (always 10000; uncatalogued)",
    [("        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)\n",
      "        cos, sin = precompute_rope_freqs(self.d_head, S, dtype=x.dtype)\n")],
    THETA,
))

# a causal mask made in the block in place of the given one: wrong where the given mask is not causal or is None; the
# precision checks pass a causal mask, which it keeps
MISTAKES.append(mistake(
    "block_always_causal", "LlamaBlock passes a causal mask of its own to attn instead of `mask`",
    [(BLOCK_REF, "        S = x.shape[1]\n"
                 "        causal = torch.triu(torch.full((S, S), float(\"-inf\"), dtype=x.dtype), diagonal=1)\n"
                 "        h = x + self.attn(self.norm_attn(x), causal)\n"
                 "        return h + self.ffn(self.norm_ffn(h))\n")],
    {"test_block_random_mask_float64", "test_block_float32"}, diagnosis="always_causal",
))
# uncatalogued, localised: the block's own FFN is wrong (the sub-module probe names ffn, nothing else)
MISTAKES.append(mistake(
    "block_own_ffn_gelu", "LlamaBlock builds its FFN as a subclass of the given one with GELU in place of swish",
    [("        self.ffn = FeedForward_SwiGLU(d_model, d_ff)\n",
      "        class GeluFFN(FeedForward_SwiGLU):\n"
      "            def forward(self, t):\n"
      "                return self.W_down(F.gelu(self.W_gate(t)) * self.W_up(t))\n"
      "\n"
      "        self.ffn = GeluFFN(d_model, d_ff)\n")],
    BLOCK | {"test_block_float64_precision"},
))

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

ATTENTION_REF = SPLIT_REF + "\n        # [B, H, S, d_head]: the position is dim -2, where apply_rotary_emb expects it\n" + LAYOUT_REF + (
    "\n" + SCORES_REF +
    "        if mask is not None:\n"
    "            scores = scores + mask\n"
    "        weights = F.softmax(scores, dim=-1)\n"
    "        out = (weights @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)\n"
    "        return self.W_o(out)\n")

ALTERNATIVES = [
    alternative(
        "sdpa_enable_gqa",
        "F.scaled_dot_product_attention(..., enable_gqa=True) on the un-repeated K/V; the block as a loop over its "
        "two sub-layers; permute_for_rotate_half by an index tensor; the hand answers with d_head ** 0.5",
        [(ATTENTION_REF,
          "        H, H_kv, D = self.num_q_heads, self.num_kv_heads, self.d_head\n"
          "        q = self.W_q(x).view(B, S, H, D)\n"
          "        k = self.W_k(x).view(B, S, H_kv, D)\n"
          "        if self.qk_norm:\n"
          "            q, k = self.q_norm(q), self.k_norm(k)\n"
          "        q, k = q.transpose(1, 2), k.transpose(1, 2)\n"
          "        v = self.W_v(x).view(B, S, H_kv, D).transpose(1, 2)\n"
          "        cos, sin = precompute_rope_freqs(D, S, self.theta, dtype=x.dtype)\n"
          "        q, k = apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)\n"
          "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n"
          "        return self.W_o(out.transpose(1, 2).reshape(B, S, H * D))\n"),
         (BLOCK_REF,
          "        for norm, sublayer in ((self.norm_attn, lambda t: self.attn(t, mask)), (self.norm_ffn, self.ffn)):\n"
          "            x = x + sublayer(norm(x))\n"
          "        return x\n"),
         (PERMUTE_REF,
          "    half = torch.arange(d_head // 2)\n"
          "    within = torch.cat([2 * half, 2 * half + 1])  # new row j of a head is old row within[j]\n"
          "    index = (torch.arange(n_heads)[:, None] * d_head + within[None, :]).flatten()\n"
          "    return w[index].clone()"),
         (HAND_REF,
          "q_norm = d_head ** 0.5\n"
          "k_norm_max = d_head ** 0.5 * max(map(abs, gamma_k))\n"
          "logit_bound = q_norm * max(map(abs, gamma_q)) * k_norm_max / d_head ** 0.5\n")],
    ),
    alternative(
        "complex_rope",
        "the student's own RoPE with complex numbers (torch.polar, view_as_complex), Meta's llama style, in the "
        "input's precision; K/V repeated with repeat_interleave",
        [(LAYOUT_REF,
          "        angles = torch.outer(torch.arange(S, dtype=torch.float64),\n"
          "                             self.theta ** (-torch.arange(0, self.d_head, 2, dtype=torch.float64) / self.d_head))\n"
          "        complex_dtype = torch.complex128 if x.dtype == torch.float64 else torch.complex64\n"
          "        freqs_cis = torch.polar(torch.ones_like(angles), angles).to(complex_dtype)  # [S, d_head // 2]\n"
          "\n"
          "        def rotate(t):  # t: [B, S, H, d_head]\n"
          "            pairs = torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2).contiguous())\n"
          "            return torch.view_as_real(pairs * freqs_cis[None, :, None, :]).flatten(-2).to(t.dtype)\n"
          "\n"
          "        q = rotate(q).transpose(1, 2)\n"
          "        k = rotate(k).repeat_interleave(self.n_rep, dim=2).transpose(1, 2)\n"
          "        v = v.repeat_interleave(self.n_rep, dim=2).transpose(1, 2)\n")],
    ),
    alternative(
        "einsum_grouped",
        "einsum attention over grouped queries [B, S, G, R, D] without repeating K/V; RoPE on the [B, H, S, D] view "
        "of each; permute_for_rotate_half with torch.cat of even and odd rows",
        [(LAYOUT_REF + "\n" + SCORES_REF +
          "        if mask is not None:\n"
          "            scores = scores + mask\n"
          "        weights = F.softmax(scores, dim=-1)\n"
          "        out = (weights @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)\n",
          "        G, R, D = self.num_kv_heads, self.n_rep, self.d_head\n"
          "        cos, sin = precompute_rope_freqs(D, S, self.theta, dtype=x.dtype)\n"
          "        q = apply_rotary_emb(q.transpose(1, 2), cos, sin).transpose(1, 2).reshape(B, S, G, R, D)\n"
          "        k = apply_rotary_emb(k.transpose(1, 2), cos, sin).transpose(1, 2)  # [B, S, G, D]\n"
          "        scores = torch.einsum(\"bqgrd,bkgd->bgrqk\", q, k) / D ** 0.5\n"
          "        if mask is not None:\n"
          "            scores = scores + mask\n"
          "        weights = scores.softmax(dim=-1)\n"
          "        out = torch.einsum(\"bgrqk,bkgd->bqgrd\", weights, v).reshape(B, S, G * R * D)\n"),
         (PERMUTE_REF,
          "    heads = w.reshape(n_heads, d_head, *w.shape[1:])\n"
          "    return torch.cat([heads[:, 0::2], heads[:, 1::2]], dim=1).reshape(w.shape)")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION = [
    precision(
        "llama_softmax_float32", "transformers' eager attention: softmax(scores, dtype=torch.float32) cast back",
        [("        weights = F.softmax(scores, dim=-1)\n",
          "        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)\n")],
        {"test_attention_float64_precision", "test_block_float64_precision"},
    ),
    precision(
        "llama_rope_float32_angles", "the RoPE table built in float32 whatever the input's dtype",
        [("        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)\n",
          "        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta)  # float32 by default\n")],
        {"test_attention_float64_precision", "test_block_float64_precision"},
    ),
    precision(
        "transformers_style_float32_internals",
        "the literal transformers style (LlamaRMSNorm's float32 cast for QK-Norm and the block's norms, "
        "LlamaRotaryEmbedding's float32 angles, eager attention's float32 softmax), right algorithm otherwise",
        [("class LlamaAttention(nn.Module):\n",
          "class HFRMSNorm(nn.Module):  # transformers' LlamaRMSNorm, with the pinned parameter name\n"
          "    def __init__(self, hidden_size, eps=1e-6):\n"
          "        super().__init__()\n"
          "        self.gamma = nn.Parameter(torch.ones(hidden_size))\n"
          "        self.variance_epsilon = eps\n"
          "\n"
          "    def forward(self, hidden_states):\n"
          "        input_dtype = hidden_states.dtype\n"
          "        hidden_states = hidden_states.to(torch.float32)\n"
          "        variance = hidden_states.pow(2).mean(-1, keepdim=True)\n"
          "        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)\n"
          "        return self.gamma * hidden_states.to(input_dtype)\n"
          "\n"
          "\n"
          "class LlamaAttention(nn.Module):\n"),
         (NORMS_REF, "            self.q_norm = HFRMSNorm(self.d_head, eps)\n"
                     "            self.k_norm = HFRMSNorm(self.d_head, eps)\n"),
         ("        cos, sin = precompute_rope_freqs(self.d_head, S, self.theta, dtype=x.dtype)\n",
          "        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.d_head, 2, dtype=torch.int64).float() / self.d_head))\n"
          "        freqs = torch.arange(S, dtype=torch.int64).float()[:, None] * inv_freq[None, :]  # float32 angles\n"
          "        cos, sin = freqs.cos().to(x.dtype), freqs.sin().to(x.dtype)\n"),
         ("        weights = F.softmax(scores, dim=-1)\n",
          "        weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)\n"),
         ("        self.norm_attn = RMSNorm(d_model, eps)\n", "        self.norm_attn = HFRMSNorm(d_model, eps)\n"),
         ("        self.norm_ffn = RMSNorm(d_model, eps)\n", "        self.norm_ffn = HFRMSNorm(d_model, eps)\n")],
        {"test_attention_float64_precision", "test_block_float64_precision"},
    ),
]
