from autograder.examples import alternative, mistake, precision, with_precision_checks

HAND = {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes", "test_hand_saving_ratio"}
# the module checks whose inputs have seq_len > 1 and no KV-head pairing that hides the mistake
ATTENTION = {"test_module_no_mask_float32", "test_module_causal_float64", "test_module_random_mask_float64",
             "test_module_mha_and_mqa"}
MASKED = {"test_module_causal_float64", "test_module_random_mask_float64"}

MISTAKES = [
    mistake(
        "chapter_mod_mapping",
        "repeat_kv inserts the new axis before the KV-head axis (the chapter's §7.1 expand): query head h "
        "reads KV head h % num_kv_heads; the module inherits it",
        [("return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)",
          "return x[:, :, None, :, :].expand(B, S, n_rep, num_kv_heads, head_dim).flatten(2, 3)")],
        {"test_repeat_kv_layout_float64", "test_module_single_token", "test_module_no_mask_float32",
         "test_module_causal_float64", "test_module_random_mask_float64"},
        diagnosis="mod_mapping",
    ),
    mistake(
        "repeat_on_sequence_dim", "repeat_kv repeats along the sequence axis (dim=1) instead of the head axis",
        [("return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)",
          "return torch.repeat_interleave(x, n_rep, dim=1)")],
        # in the module, K/V then have n_rep copies of every token: a shape error when 1 < num_kv_heads <
        # num_q_heads; with one KV head (MQA) the copies only duplicate keys, which softmax averages away
        {"test_repeat_kv_layout_float64", "test_repeat_kv_single_kv_head_float32", "test_module_single_token",
         "test_module_no_mask_float32", "test_module_causal_float64", "test_module_random_mask_float64"},
        diagnosis="repeat_wrong_dim",
    ),
    mistake(
        "no_scale", "attention scores not divided by sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)", "scores = q @ k.transpose(-2, -1)")],
        ATTENTION,
        diagnosis="no_scale",
    ),
    mistake(
        "scale_d_model", "scores divided by sqrt(d_model) instead of sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)",
          "scores = q @ k.transpose(-2, -1) / math.sqrt(self.num_q_heads * self.d_head)")],
        ATTENTION,
        diagnosis="scale_d_model",
    ),
    mistake(
        "mask_ignored", "forward accepts mask but never uses it",
        [("            scores = scores + mask\n", "            pass\n")],
        MASKED,
        diagnosis="mask_ignored",
    ),
    mistake(
        "mask_multiplied", "the additive mask multiplied onto the scores",
        [("            scores = scores + mask\n", "            scores = scores * mask\n")],
        MASKED,
        diagnosis="mask_multiplied",
    ),
    mistake(
        "softmax_wrong_dim", "softmax over the query axis (dim=-2) instead of the key axis",
        [("attn = F.softmax(scores, dim=-1)", "attn = F.softmax(scores, dim=-2)")],
        ATTENTION,
        diagnosis="softmax_wrong_dim",
    ),
    mistake(
        "merge_heads_without_transpose", "heads merged with reshape straight from [B, H, S, d_head], without transpose",
        [("out = (attn @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)",
          "out = (attn @ v).reshape(B, S, self.num_q_heads * self.d_head)")],
        ATTENTION,
        diagnosis="merge_heads_without_transpose",
    ),
    mistake(
        "view_without_transpose", "Q reshaped to [B, H, S, d_head] instead of transposed",
        [("q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)",
          "q, k, v = q.reshape(B, self.num_q_heads, S, self.d_head), k.transpose(1, 2), v.transpose(1, 2)")],
        ATTENTION,
        diagnosis="view_without_transpose",
    ),
    mistake(
        "linear_bias", "W_q built with a bias (found when the weights are loaded by name)",
        [("self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)",
          "self.W_q = nn.Linear(d_model, num_q_heads * self.d_head)")],
        {"test_module_parameters", "test_module_single_token", "test_module_no_mask_float32",
         "test_module_causal_float64", "test_module_random_mask_float64", "test_module_mha_and_mqa"},
        diagnosis="linear_bias",
    ),
    mistake(
        "k_only", "only K counted (factor 2 for K and V missing), in the function and in the hand answers",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers"),
         ("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2",
          "mha_kv_bytes = batch * seq_len * num_q_heads * head_dim * 2"),
         ("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = batch * seq_len * num_kv_heads * head_dim * 2")],
        {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes", "test_kv_cache_bytes_fp16_one_layer"},
        diagnosis="k_only",
    ),
    mistake(
        "percent_not_fraction", "saving_ratio typed as a percentage",
        [("saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes", "saving_ratio = (1 - gqa_kv_bytes / mha_kv_bytes) * 100")],
        {"test_hand_saving_ratio"},
        diagnosis="percent_not_fraction",
    ),
    mistake(
        "forgot_one_minus", "saving_ratio = gqa / mha (what is kept, not what is saved)",
        [("saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes", "saving_ratio = gqa_kv_bytes / mha_kv_bytes")],
        {"test_hand_saving_ratio"},
        diagnosis="forgot_one_minus",
    ),
    mistake(
        "q_heads_for_kv", "the GQA cache computed with num_q_heads KV heads",
        [("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2")],
        {"test_hand_gqa_kv_bytes", "test_hand_saving_ratio"},
        diagnosis="q_heads_for_kv",
    ),
    mistake(
        "mib_not_bytes", "kv_cache_bytes converts to MiB (a float) instead of returning bytes",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers / 1024**2")],
        {"test_kv_cache_bytes_fp16_one_layer", "test_kv_cache_bytes_returns_int"},
        diagnosis="mib_not_bytes",
    ),
    mistake(
        "ignores_num_layers", "kv_cache_bytes leaves out num_layers",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element")],
        {"test_kv_cache_bytes_uses_dtype_and_layers"},
        diagnosis="ignores_num_layers",
    ),
    mistake(
        "repeat_tiles_heads",
        "repeat_kv tiles all KV heads with x.repeat(1, 1, n_rep, 1): KV heads 0, 1, 0, 1, ..., i.e. query head h "
        "reads KV head h % num_kv_heads; the module inherits it",
        [("return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)",
          "return x.repeat(1, 1, n_rep, 1)")],
        {"test_repeat_kv_layout_float64", "test_module_single_token", "test_module_no_mask_float32",
         "test_module_causal_float64", "test_module_random_mask_float64"},
        diagnosis="mod_mapping",
    ),
    mistake(
        "always_causal", "forward ignores the mask argument and always adds its own causal mask",
        [("            scores = scores + mask\n",
          "            pass\n"
          "        causal = torch.triu(torch.full((S, S), float(\"-inf\"), dtype=scores.dtype), diagonal=1)\n"
          "        scores = scores + causal\n")],
        {"test_module_no_mask_float32", "test_module_random_mask_float64", "test_module_mha_and_mqa"},
        diagnosis="always_causal",
    ),
    mistake(
        "no_output_projection", "the merged heads are returned without the output projection W_o",
        [("        return self.W_o(out)\n", "        return out\n")],
        {"test_module_single_token"} | ATTENTION,
        diagnosis="no_output_projection",
    ),
    mistake(
        "kv_projections_mha_sized", "W_k and W_v built with num_q_heads * d_head outputs (MHA-sized K/V)",
        [("self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)",
          "self.W_k = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)"),
         ("self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)",
          "self.W_v = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)")],
        {"test_module_parameters", "test_module_single_token", "test_module_no_mask_float32",
         "test_module_causal_float64", "test_module_random_mask_float64", "test_module_mha_and_mqa"},
        diagnosis="q_heads_for_kv",
    ),
    mistake(
        "fp32_bytes", "the hand answers computed with 4 bytes per element (FP32) instead of 2 (FP16)",
        [("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2",
          "mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 4"),
         ("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 4")],
        {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes"},
        diagnosis="fp32_bytes",
    ),
    mistake(
        "bits_not_bytes", "the hand answers in bits (16 bits per FP16 element)",
        [("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2",
          "mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 16"),
         ("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 16")],
        {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes"},
        diagnosis="bits_not_bytes",
    ),
    mistake(
        "mb_not_bytes", "the hand answers divided by 1e6 (the chapter's \"MB\") instead of bytes",
        [("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2",
          "mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2 / 1e6"),
         ("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2 / 1e6")],
        {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes"},
        diagnosis="mb_not_bytes",
    ),
    mistake(
        "factor_not_ratio", "saving_ratio = mha / gqa (how many times smaller, not the share saved)",
        [("saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes", "saving_ratio = mha_kv_bytes / gqa_kv_bytes")],
        {"test_hand_saving_ratio"},
        diagnosis="factor_not_ratio",
    ),
    mistake(
        "ignores_bytes_per_element", "kv_cache_bytes hard-codes 2 bytes per element",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * head_dim * 2 * num_layers")],
        {"test_kv_cache_bytes_uses_dtype_and_layers"},
        diagnosis="ignores_bytes_per_element",
    ),
    # --- uncatalogued (no name; the hints localise them) ---
    mistake(
        "hand_seq_len_forgotten", "the typed KV cache sizes leave out seq_len",
        [("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2\n"
          "gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "mha_kv_bytes = 2 * batch * num_q_heads * head_dim * 2\n"
          "gqa_kv_bytes = 2 * batch * num_kv_heads * head_dim * 2")],
        {"test_hand_mha_kv_bytes", "test_hand_gqa_kv_bytes"},
    ),
    mistake(
        "kv_bytes_heads_squared", "kv_cache_bytes multiplies by num_kv_heads twice",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * num_kv_heads * head_dim * bytes_per_element * num_layers")],
        {"test_kv_cache_bytes_fp16_one_layer"},
    ),
    mistake(
        "repeat_kv_positions_mixed", "repeat_kv repeats along the head axis of the transposed tensor, then reshapes "
        "without transposing back: positions and heads mixed",
        [("return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)",
          "return x.transpose(1, 2).repeat_interleave(n_rep, dim=1).reshape(B, S, num_kv_heads * n_rep, head_dim)")],
        {"test_repeat_kv_layout_float64", "test_repeat_kv_single_kv_head_float32", "test_repeat_kv_n_rep_one",
         "test_module_no_mask_float32", "test_module_causal_float64", "test_module_random_mask_float64",
         "test_module_mha_and_mqa"},
    ),
    mistake(
        "v_from_w_k", "v projected with W_k (a copy-paste slip): W_v never used",
        [("        v = repeat_kv(self.W_v(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)\n",
          "        v = repeat_kv(self.W_k(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)\n")],
        {"test_module_single_token"} | ATTENTION,
    ),
    mistake(
        "scale_after_softmax", "the attention weights divided by sqrt(d_head) after the softmax of the unscaled scores "
        "(the single-token check names it: its weight is 1/sqrt(d_head), not 1)",
        [("        attn = F.softmax(scores, dim=-1)\n        out = (attn @ v)",
          "        attn = F.softmax(scores * math.sqrt(self.d_head), dim=-1) / math.sqrt(self.d_head)\n"
          "        out = (attn @ v)")],
        {"test_module_single_token"} | ATTENTION,
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {"test_module_causal_float64": "test_module_float64_precision"}
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF)

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

HAND_REF = ("mha_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2\n"
            "gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2\n"
            "saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes")
KV_BYTES_REF = "    return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers"
REPEAT_REF = ("    B, S, num_kv_heads, head_dim = x.shape\n"
              "    # a new axis right after the KV-head axis, so that each head is followed by its own copies\n"
              "    return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)")
INIT_REF = (
    "        self.num_q_heads = num_q_heads\n"
    "        self.num_kv_heads = num_kv_heads\n"
    "        self.d_head = d_model // num_q_heads\n"
    "        self.n_rep = num_q_heads // num_kv_heads\n"
    "\n"
    "        self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)\n"
    "        self.W_k = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
    "        self.W_v = nn.Linear(d_model, num_kv_heads * self.d_head, bias=False)\n"
    "        self.W_o = nn.Linear(num_q_heads * self.d_head, d_model, bias=False)")
ATTENTION_REF = (
    "        q = self.W_q(x).view(B, S, self.num_q_heads, self.d_head)\n"
    "        k = repeat_kv(self.W_k(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)\n"
    "        v = repeat_kv(self.W_v(x).view(B, S, self.num_kv_heads, self.d_head), self.n_rep)\n"
    "        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # [B, H, S, d_head]\n"
    "\n"
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)\n"
    "        if mask is not None:\n"
    "            scores = scores + mask\n"
    "        attn = F.softmax(scores, dim=-1)\n"
    "        out = (attn @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)\n"
    "        return self.W_o(out)")

ALTERNATIVES = [
    alternative(
        "sdpa_enable_gqa",
        "the module calls F.scaled_dot_product_attention(..., enable_gqa=True) on the un-repeated K/V; "
        "repeat_kv with torch.repeat_interleave; kv_cache_bytes with math.prod; the hand answers per token",
        [(HAND_REF,
          "bytes_per_token_per_head = 2 * head_dim * 2  # K and V, FP16\n"
          "mha_kv_bytes = batch * seq_len * num_q_heads * bytes_per_token_per_head\n"
          "gqa_kv_bytes = batch * seq_len * num_kv_heads * bytes_per_token_per_head\n"
          "saving_ratio = 1 - num_kv_heads / num_q_heads"),
         (KV_BYTES_REF,
          "    return math.prod([2, batch, seq_len, num_kv_heads, head_dim, bytes_per_element, num_layers])"),
         (REPEAT_REF, "    return torch.repeat_interleave(x, n_rep, dim=2)"),
         (ATTENTION_REF,
          "        H, H_kv, d = self.num_q_heads, self.num_kv_heads, self.d_head\n"
          "        q = self.W_q(x).view(B, S, H, d).transpose(1, 2)\n"
          "        k = self.W_k(x).view(B, S, H_kv, d).transpose(1, 2)\n"
          "        v = self.W_v(x).view(B, S, H_kv, d).transpose(1, 2)\n"
          "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)\n"
          "        return self.W_o(out.transpose(1, 2).reshape(B, S, H * d))")],
    ),
    alternative(
        "einsum_grouped",
        "einsum attention over [B, S, kv_group, n_rep, d_head] queries without repeating K/V, the additive "
        "mask added in place; repeat_kv by unsqueeze + repeat + reshape; integer hand answers via //",
        [(HAND_REF,
          "mha_kv_bytes = 2 * 2 * batch * seq_len * num_q_heads * head_dim\n"
          "gqa_kv_bytes = mha_kv_bytes // (num_q_heads // num_kv_heads)\n"
          "saving_ratio = (mha_kv_bytes - gqa_kv_bytes) / mha_kv_bytes"),
         (KV_BYTES_REF,
          "    elements = batch * seq_len * num_kv_heads * head_dim  # per layer, for K (and as many for V)\n"
          "    return 2 * elements * bytes_per_element * num_layers"),
         (REPEAT_REF,
          "    B, S, H_kv, D = x.shape\n"
          "    return x.unsqueeze(3).repeat(1, 1, 1, n_rep, 1).reshape(B, S, H_kv * n_rep, D)"),
         (INIT_REF,
          "        self.n_kv = num_kv_heads\n"
          "        self.group = num_q_heads // num_kv_heads\n"
          "        self.head_dim = d_model // num_q_heads\n"
          "        self.W_q = nn.Linear(d_model, d_model // num_q_heads * num_q_heads, bias=False)\n"
          "        self.W_k = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)\n"
          "        self.W_v = nn.Linear(d_model, num_kv_heads * self.head_dim, bias=False)\n"
          "        self.W_o = nn.Linear(self.W_q.out_features, d_model, bias=False)"),
         (ATTENTION_REF,
          "        G, R, D = self.n_kv, self.group, self.head_dim\n"
          "        q = self.W_q(x).view(B, S, G, R, D)  # query head g * R + r uses KV head g\n"
          "        k = self.W_k(x).view(B, S, G, D)\n"
          "        v = self.W_v(x).view(B, S, G, D)\n"
          "        scores = torch.einsum(\"bqgrd,bkgd->bgrqk\", q, k) * D ** -0.5\n"
          "        if mask is not None:\n"
          "            scores += mask\n"
          "        weights = scores.softmax(dim=-1)\n"
          "        out = torch.einsum(\"bgrqk,bkgd->bqgrd\", weights, v)\n"
          "        return self.W_o(out.reshape(B, S, G * R * D))")],
    ),
    alternative(
        "per_head_loop",
        "a Python loop over the query heads, each reading KV head h // n_rep, with torch.matmul and "
        "torch.stack; repeat_kv by advanced indexing; no input checks in kv_cache_bytes",
        [(HAND_REF,
          "kv_heads_mha, kv_heads_gqa = num_q_heads, num_kv_heads\n"
          "mha_kv_bytes = int(2 * batch * seq_len * kv_heads_mha * head_dim * 2)\n"
          "gqa_kv_bytes = int(2 * batch * seq_len * kv_heads_gqa * head_dim * 2)\n"
          "saving_ratio = 1.0 - gqa_kv_bytes / mha_kv_bytes"),
         ("    for name, value in [(\"batch\", batch), (\"seq_len\", seq_len), (\"num_kv_heads\", num_kv_heads),\n"
          "                        (\"head_dim\", head_dim), (\"bytes_per_element\", bytes_per_element),\n"
          "                        (\"num_layers\", num_layers)]:\n"
          "        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:\n"
          "            raise ValueError(f\"{name} must be a positive integer, got {value!r}\")\n" + KV_BYTES_REF,
          "    per_token_per_layer = 2 * num_kv_heads * head_dim * bytes_per_element\n"
          "    return per_token_per_layer * batch * seq_len * num_layers"),
         (REPEAT_REF,
          "    num_kv_heads = x.shape[2]\n"
          "    index = torch.arange(num_kv_heads * n_rep, device=x.device) // n_rep\n"
          "    return x[:, :, index, :]"),
         (ATTENTION_REF,
          "        q = self.W_q(x).view(B, S, self.num_q_heads, self.d_head)\n"
          "        k = self.W_k(x).view(B, S, self.num_kv_heads, self.d_head)\n"
          "        v = self.W_v(x).view(B, S, self.num_kv_heads, self.d_head)\n"
          "        heads = []\n"
          "        for h in range(self.num_q_heads):\n"
          "            g = h // self.n_rep\n"
          "            q_h, k_h, v_h = q[:, :, h], k[:, :, g], v[:, :, g]  # [B, S, d_head]\n"
          "            scores = torch.matmul(q_h, k_h.transpose(1, 2)) / self.d_head ** 0.5\n"
          "            if mask is not None:\n"
          "                scores = scores + mask\n"
          "            heads.append(torch.matmul(torch.softmax(scores, dim=-1), v_h))\n"
          "        return self.W_o(torch.stack(heads, dim=2).reshape(B, S, -1))")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION = [
    precision(
        "gqa_softmax_float32", "transformers' eager attention: softmax(scores, dtype=torch.float32) cast back to q.dtype",
        [('        attn = F.softmax(scores, dim=-1)', '        attn = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)')],
        {"test_module_float64_precision"},
    ),
]
