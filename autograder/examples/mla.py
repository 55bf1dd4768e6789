from autograder.examples import alternative, mistake, precision, with_precision_checks

MODULE_OUT = {"test_module_forward_backward_float64", "test_module_additive_mask", "test_module_float32_no_mask"}
CACHE_ALL = {"test_cache_chapter_version", "test_cache_with_rope_key", "test_cache_bytes_and_layers"}
BONUS_ALL = {"test_absorbed_causal_float64", "test_absorbed_no_mask_float64"}
HAND_ALL = {"test_hand_mha_bytes", "test_hand_gqa_bytes", "test_hand_mla_bytes"}
HAND_LINES = ("mha_bytes = 2 * batch * seq_len * num_heads * head_dim * 2",
              "gqa_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
              "mla_bytes = batch * seq_len * (d_latent + d_rope) * 2")


def hand_bytes(tail: str) -> list[tuple[str, str]]:
    """Edits that end all three hand answers with `tail` instead of FP16's ` * 2` (one unit slip everywhere)."""
    return [(line, line.removesuffix(" * 2") + tail) for line in HAND_LINES]


MISTAKES = [
    mistake(
        "cache_returns_k", "forward returns K = W_k_up(c_kv) as the cache instead of the latent c_kv",
        [("return self.W_o(out), c_kv", "return self.W_o(out), self.W_k_up(c_kv)")],
        {"test_module_forward_backward_float64", "test_module_float32_no_mask"},
        diagnosis="cache_returns_k",
    ),
    mistake(
        "cache_returns_v", "forward returns the per-head V tensor [B, H, S, d_head] as the cache",
        [("return self.W_o(out), c_kv", "return self.W_o(out), v")],
        {"test_module_forward_backward_float64", "test_module_float32_no_mask"},
        diagnosis="cache_returns_v",
    ),
    mistake(
        "no_scale", "scores not divided by sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)", "scores = q @ k.transpose(-2, -1)")],
        MODULE_OUT,
        diagnosis="no_scale",
    ),
    mistake(
        "scale_d_model", "scores divided by sqrt(d_model) instead of sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)",
          "scores = q @ k.transpose(-2, -1) / math.sqrt(D)")],
        MODULE_OUT,
        diagnosis="scale_d_model",
    ),
    mistake(
        "mask_ignored", "the mask argument is never applied",
        [("scores = scores + mask\n        out = (F.softmax", "pass\n        out = (F.softmax")],
        {"test_module_forward_backward_float64", "test_module_additive_mask"},
        diagnosis="mask_ignored",
    ),
    mistake(
        "mask_as_boolean", "only the -inf entries of the mask are used (masked_fill); finite values are ignored",
        [("scores = scores + mask\n        out = (F.softmax",
          "scores = scores.masked_fill(torch.isinf(mask), float(\"-inf\"))\n        out = (F.softmax")],
        {"test_module_additive_mask"},
        diagnosis="mask_as_boolean",
    ),
    mistake(
        "w_k_up_for_v", "V is decompressed with W_k_up (the up-projections mixed up); W_v_up is unused",
        [("v = self.W_v_up(c_kv)", "v = self.W_k_up(c_kv)")],
        MODULE_OUT,
        diagnosis="w_k_up_for_v",
    ),
    mistake(
        "bias_true", "W_q built with bias=True: an extra parameter the pinned weights do not have",
        [("self.W_q = nn.Linear(d_model, d_model, bias=False)", "self.W_q = nn.Linear(d_model, d_model, bias=True)")],
        {"test_module_parameters"} | MODULE_OUT | BONUS_ALL | {"test_absorbed_latent_queries_float64"},
        diagnosis="linear_bias",
    ),
    mistake(
        "latent_for_k_and_v", "the latent counted twice, once for K and once for V (factor 2), function and hand answer",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers"),
         ("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2",
          "mla_bytes = 2 * batch * seq_len * (d_latent + d_rope) * 2")],
        CACHE_ALL | {"test_hand_mla_bytes"},
        diagnosis="latent_for_k_and_v",
    ),
    mistake(
        "rope_key_forgotten", "the decoupled RoPE key left out of the cache (the chapter's count)",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * d_latent * bytes_per_element * num_layers"),
         ("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2", "mla_bytes = batch * seq_len * d_latent * 2")],
        {"test_cache_with_rope_key", "test_hand_mla_bytes"},
        diagnosis="rope_key_forgotten",
    ),
    mistake(
        "latent_per_head", "the MLA hand answer counts one latent per head",
        [("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2",
          "mla_bytes = batch * seq_len * num_heads * (d_latent + d_rope) * 2")],
        {"test_hand_mla_bytes"},
        diagnosis="latent_per_head",
    ),
    mistake(
        "hand_k_only", "MHA and GQA hand answers count K only (no factor 2 for V)",
        [("mha_bytes = 2 * batch * seq_len * num_heads * head_dim * 2", "mha_bytes = batch * seq_len * num_heads * head_dim * 2"),
         ("gqa_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_bytes = batch * seq_len * num_kv_heads * head_dim * 2")],
        {"test_hand_mha_bytes", "test_hand_gqa_bytes"},
        diagnosis="k_only",
    ),
    mistake(
        "absorbed_no_scale", "the absorbed path forgets 1/sqrt(d_head)",
        [("scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(d_head)",
          "scores = q_latent @ c_kv[:, None].transpose(-2, -1)")],
        BONUS_ALL,
        diagnosis="no_scale",
    ),
    mistake(
        "absorbed_w_k_for_v", "the absorbed path applies W_k_up's weight on the value side",
        [("w_v = mla.W_v_up.weight.view(H, d_head, -1)", "w_v = mla.W_k_up.weight.view(H, d_head, -1)")],
        BONUS_ALL,
        diagnosis="w_k_up_for_v",
    ),
    mistake(
        "absorbed_wrong_split", "the absorbed path splits W_k_up.weight.T into heads instead of W_k_up.weight",
        [("w_k = mla.W_k_up.weight.view(H, d_head, -1)", "w_k = mla.W_k_up.weight.t().reshape(H, d_head, -1)")],
        BONUS_ALL,
        diagnosis="absorbed_wrong_split",
    ),
    mistake(
        "absorbed_mask_ignored", "the absorbed path never applies the mask",
        [("scores = scores + mask\n    context_latent", "pass\n    context_latent")],
        {"test_absorbed_causal_float64"},
        diagnosis="mask_ignored",
    ),
    mistake(
        "absorbed_calls_forward", "the bonus just calls the module's forward (which builds K and V) and leaves "
        "mla_absorbed_latents unanswered: right outputs, none of the absorbed path's latents",
        [("H, d_head = mla.num_heads, mla.d_head", "return mla(x, mask)[0]"),
         ("    batch, seq_len, _ = x.shape\n    heads = mla.num_heads", "    raise NotImplementedError()")],
        BONUS_ALL | {"test_absorbed_latent_queries_float64"},
    ),
    mistake(
        "latents_queries_not_absorbed", "mla_absorbed_latents returns the plain queries q (d_head wide), not "
        "q·W_k_up (d_latent wide)",
        [("    return q_latent, torch.softmax(logits, dim=-1) @ latent",
          "    return queries, torch.softmax(logits, dim=-1) @ latent")],
        {"test_absorbed_latent_queries_float64"},
    ),
    mistake(
        "latents_mask_ignored", "mla_absorbed_latents never applies the mask to the latent scores",
        [("        logits = logits + mask\n", "        pass\n")],
        {"test_absorbed_causal_float64"},
    ),
    # --- the attention ---------------------------------------------------------------------------------
    mistake(
        "mask_multiplied", "the additive mask multiplied into the scores (0 * score, score * -inf)",
        [("scores = scores + mask\n        out = (F.softmax", "scores = scores * mask\n        out = (F.softmax")],
        {"test_module_forward_backward_float64", "test_module_additive_mask"},
        diagnosis="mask_multiplied",
    ),
    mistake(
        "softmax_wrong_dim", "softmax over the query positions (dim=-2) instead of the key positions",
        [("out = (F.softmax(scores, dim=-1) @ v)", "out = (F.softmax(scores, dim=-2) @ v)")],
        MODULE_OUT,
        diagnosis="softmax_wrong_dim",
    ),
    mistake(
        "w_v_up_for_k", "K is decompressed with W_v_up (the up-projections mixed up); W_k_up is unused",
        [("k = self.W_k_up(c_kv)", "k = self.W_v_up(c_kv)")],
        MODULE_OUT,
        diagnosis="w_v_up_for_k",
    ),
    mistake(
        "view_without_transpose", "q, k, v viewed straight into [B, H, S, d_head] (no transpose); merged back "
        "with transpose(1, 2) as in the chapter",
        [("q = self.W_q(x).view(B, S, self.num_heads, self.d_head).transpose(1, 2)",
          "q = self.W_q(x).view(B, self.num_heads, S, self.d_head)"),
         ("k = self.W_k_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)",
          "k = self.W_k_up(c_kv).view(B, self.num_heads, S, self.d_head)"),
         ("v = self.W_v_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)",
          "v = self.W_v_up(c_kv).view(B, self.num_heads, S, self.d_head)")],
        MODULE_OUT,
        diagnosis="view_without_transpose",
    ),
    mistake(
        "merge_heads_without_transpose", "the heads merged with reshape straight from [B, H, S, d_head]",
        [("out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)",
          "out = (F.softmax(scores, dim=-1) @ v).reshape(B, S, D)")],
        MODULE_OUT,
        diagnosis="merge_heads_without_transpose",
    ),
    mistake(
        "no_output_projection", "the merged heads returned without the output projection W_o",
        [("return self.W_o(out), c_kv", "return out, c_kv")],
        MODULE_OUT,
        diagnosis="no_output_projection",
    ),
    mistake(
        "no_scale_and_merge_without_transpose", "two slips at once (no scale, heads merged without transpose): "
        "no single variant explains it, so nothing is named; the causal check says the future leaks",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)", "scores = q @ k.transpose(-2, -1)"),
         ("out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)",
          "out = (F.softmax(scores, dim=-1) @ v).reshape(B, S, D)")],
        MODULE_OUT,
    ),
    mistake(
        "kept_w_k_w_v", "MHA's W_k and W_v kept next to the up-projections (unused parameters)",
        [("self.W_o = nn.Linear(d_model, d_model, bias=False)",
          "self.W_k = nn.Linear(d_model, d_model, bias=False)\n"
          "        self.W_v = nn.Linear(d_model, d_model, bias=False)\n"
          "        self.W_o = nn.Linear(d_model, d_model, bias=False)")],
        {"test_module_parameters"} | MODULE_OUT | BONUS_ALL | {"test_absorbed_latent_queries_float64"},
        diagnosis="kept_w_k_w_v",
    ),
    # --- byte counts -------------------------------------------------------------------------------
    mistake(
        "cached_k_and_v", "the MLA hand answer counts the decompressed K and V (the MHA cache)",
        [("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2",
          "mla_bytes = 2 * batch * seq_len * num_heads * head_dim * 2")],
        {"test_hand_mla_bytes"},
        diagnosis="cached_k_and_v",
    ),
    mistake(
        "q_heads_for_kv", "the GQA hand answer uses num_heads KV heads",
        [("gqa_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_bytes = 2 * batch * seq_len * num_heads * head_dim * 2")],
        {"test_hand_gqa_bytes"},
        diagnosis="q_heads_for_kv",
    ),
    mistake(
        "fp32_bytes", "all three hand answers with 4 bytes per element",
        hand_bytes(" * 4"),
        HAND_ALL,
        diagnosis="fp32_bytes",
    ),
    mistake(
        "bits_not_bytes", "all three hand answers in bits (16 per FP16 element)",
        hand_bytes(" * 16"),
        HAND_ALL,
        diagnosis="bits_not_bytes",
    ),
    mistake(
        "elements_not_bytes", "elements counted, not bytes: bytes_per_element left out of the function and the "
        "2 bytes out of the hand answers",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * (d_latent + d_rope) * num_layers")] + hand_bytes(""),
        CACHE_ALL | HAND_ALL,
        diagnosis="elements_not_bytes",
    ),
    mistake(
        "mib_not_bytes", "mla_cache_bytes returns MiB (bytes / 1024**2)",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers / 1024**2")],
        CACHE_ALL,
        diagnosis="mib_not_bytes",
    ),
    mistake(
        "mb_not_bytes", "the hand answers in MB (bytes / 1e6), as the chapter prints them",
        hand_bytes(" * 2 / 1e6"),
        HAND_ALL,
        diagnosis="mb_not_bytes",
    ),
    mistake(
        "ignores_num_layers", "mla_cache_bytes never multiplies by num_layers",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * (d_latent + d_rope) * bytes_per_element")],
        {"test_cache_bytes_and_layers"},
        diagnosis="ignores_num_layers",
    ),
    mistake(
        "ignores_bytes_per_element", "mla_cache_bytes always counts 2 bytes per element",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * (d_latent + d_rope) * 2 * num_layers")],
        {"test_cache_bytes_and_layers"},
        diagnosis="ignores_bytes_per_element",
    ),
    # --- the bonus ---------------------------------------------------------------------------------
    mistake(
        "absorbed_scale_d_latent", "the absorbed scores divided by sqrt(d_latent) (the latent width)",
        [("scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(d_head)",
          "scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(c_kv.shape[-1])")],
        BONUS_ALL,
        diagnosis="absorbed_scale_d_latent",
    ),
    # --- uncatalogued (no name) ---
    mistake(
        "w_o_weight_untransposed", "the output projection applied as out @ W_o.weight (nn.Linear computes out @ W_o.weight.T)",
        [("        return self.W_o(out), c_kv\n", "        return out @ self.W_o.weight, c_kv\n")],
        MODULE_OUT,
    ),
    mistake(
        "cache_rope_key_twice", "mla_cache_bytes counts the decoupled RoPE key twice, as if K and V each had one",
        [("    return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "    return batch * seq_len * (d_latent + 2 * d_rope) * bytes_per_element * num_layers")],
        {"test_cache_with_rope_key"},
    ),
    mistake(
        "hand_gqa_seq_len_forgotten", "the typed GQA cache size leaves out seq_len",
        [(HAND_LINES[1], "gqa_bytes = 2 * batch * num_kv_heads * head_dim * 2")],
        {"test_hand_gqa_bytes"},
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {"test_module_forward_backward_float64": "test_module_float64_precision"}
# returning K or V as the cache leaves out right: the precision check reads out only
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF, forward_right=("cache_returns_k", "cache_returns_v"))

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

ATTENTION_REF = (
    "        c_kv = self.W_kv_down(x)  # [B, S, d_latent]\n"
    "        q = self.W_q(x).view(B, S, self.num_heads, self.d_head).transpose(1, 2)\n"
    "        k = self.W_k_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)\n"
    "        v = self.W_v_up(c_kv).view(B, S, self.num_heads, self.d_head).transpose(1, 2)\n"
    "\n"
    "        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)\n"
    "        if mask is not None:\n"
    "            scores = scores + mask\n"
    "        out = (F.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, D)\n"
    "        return self.W_o(out), c_kv")
CACHE_REF = "    return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers"
HAND_REF = (
    "head_dim = d_model // num_heads\n"
    "mha_bytes = 2 * batch * seq_len * num_heads * head_dim * 2       # K 和 V，每个头各一份\n"
    "gqa_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2    # 只有 num_kv_heads 个 KV 头\n"
    "mla_bytes = batch * seq_len * (d_latent + d_rope) * 2          # 一个 latent + 一个 RoPE key")
ABSORBED_REF = (
    "    q_latent = torch.einsum(\"bhsd,hdl->bhsl\", q, w_k)               # W_k_up absorbed into q\n"
    "    scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(d_head)\n"
    "    if mask is not None:\n"
    "        scores = scores + mask\n"
    "    context_latent = F.softmax(scores, dim=-1) @ c_kv[:, None]       # [B, H, S, d_latent]\n"
    "    out = torch.einsum(\"bhsl,hdl->bhsd\", context_latent, w_v)        # W_v_up applied after the sum\n"
    "    return mla.W_o(out.transpose(1, 2).reshape(B, S, D))")

ALTERNATIVES = [
    alternative(
        "sdpa",
        "F.scaled_dot_product_attention with the additive mask as attn_mask (module and absorbed path, "
        "the latter with scale=1/sqrt(d_head) and the latent expanded over the heads); the hand answers "
        "through d_model = num_heads · head_dim",
        [(ATTENTION_REF,
          "        H, d = self.num_heads, self.d_head\n"
          "        c_kv = self.W_kv_down(x)\n"
          "        q = self.W_q(x).view(B, S, H, d).transpose(1, 2)\n"
          "        k = self.W_k_up(c_kv).view(B, S, H, d).transpose(1, 2)\n"
          "        v = self.W_v_up(c_kv).view(B, S, H, d).transpose(1, 2)\n"
          "        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
          "        return self.W_o(out.transpose(1, 2).reshape(B, S, D)), c_kv"),
         (CACHE_REF, "    return (d_latent + d_rope) * bytes_per_element * batch * seq_len * num_layers"),
         (HAND_REF,
          "mha_bytes = 2 * 2 * batch * seq_len * d_model  # num_heads * head_dim == d_model\n"
          "gqa_bytes = mha_bytes * num_kv_heads // num_heads\n"
          "mla_bytes = 2 * batch * seq_len * d_latent + 2 * batch * seq_len * d_rope"),
         (ABSORBED_REF,
          "    q_latent = torch.einsum(\"bhsd,hdl->bhsl\", q, w_k)\n"
          "    latent = c_kv.unsqueeze(1).expand(B, H, S, c_kv.shape[-1])  # one latent, shared by all heads\n"
          "    context = F.scaled_dot_product_attention(q_latent, latent, latent, attn_mask=mask,\n"
          "                                             scale=1 / math.sqrt(d_head))\n"
          "    out = torch.einsum(\"bhsl,hdl->bshd\", context, w_v).reshape(B, S, D)\n"
          "    return mla.W_o(out)")],
    ),
    alternative(
        "einsum",
        "einsum attention on [B, S, H, d_head] without transposes, scale d_head ** -0.5; math.prod for "
        "the cache; per-token hand counts; the absorbed path with matmul broadcasting over the heads",
        [(ATTENTION_REF,
          "        c_kv = self.W_kv_down(x)\n"
          "        q = self.W_q(x).reshape(B, S, self.num_heads, self.d_head)\n"
          "        k = self.W_k_up(c_kv).reshape(B, S, self.num_heads, self.d_head)\n"
          "        v = self.W_v_up(c_kv).reshape(B, S, self.num_heads, self.d_head)\n"
          "        scores = torch.einsum(\"bqhd,bkhd->bhqk\", q, k) * self.d_head ** -0.5\n"
          "        if mask is not None:\n"
          "            scores = scores + mask\n"
          "        attn = scores.softmax(-1)\n"
          "        out = torch.einsum(\"bhqk,bkhd->bqhd\", attn, v).reshape(B, S, D)\n"
          "        return self.W_o(out), c_kv"),
         (CACHE_REF, "    return math.prod((batch, seq_len, d_latent + d_rope, bytes_per_element, num_layers))"),
         (HAND_REF,
          "head_dim = d_model // num_heads\n"
          "per_token_mha = 2 * num_heads * head_dim      # K and V elements per token\n"
          "per_token_gqa = 2 * num_kv_heads * head_dim\n"
          "per_token_mla = d_latent + d_rope\n"
          "mha_bytes, gqa_bytes, mla_bytes = (batch * seq_len * n * 2 for n in (per_token_mha, per_token_gqa,\n"
          "                                                                    per_token_mla))"),
         (ABSORBED_REF,
          "    q_latent = q @ w_k                                               # [B, H, S, d_latent]\n"
          "    c = c_kv.unsqueeze(1)                                            # [B, 1, S, d_latent]\n"
          "    scores = (q_latent @ c.transpose(-1, -2)) * d_head ** -0.5\n"
          "    if mask is not None:\n"
          "        scores = scores + mask\n"
          "    out = (scores.softmax(dim=-1) @ c) @ w_v.transpose(1, 2)         # [B, H, S, d_head]\n"
          "    return mla.W_o(out.transpose(1, 2).reshape(B, S, D))")],
    ),
    alternative(
        "bmm_full_absorption",
        "the module with torch.bmm on [B·H, S, d_head]; an explicit product for the cache with int(); "
        "the bonus absorbs W_q into W_k_up and W_v_up into W_o (DeepSeek's inference form): "
        "x → latent scores directly, no W_q or W_o call either",
        [(ATTENTION_REF,
          "        H, d = self.num_heads, self.d_head\n"
          "        c_kv = self.W_kv_down(x)\n"
          "\n"
          "        def heads(t):  # [B, S, D] -> [B * H, S, d]\n"
          "            return t.view(B, S, H, d).permute(0, 2, 1, 3).reshape(B * H, S, d)\n"
          "\n"
          "        q, k, v = heads(self.W_q(x)), heads(self.W_k_up(c_kv)), heads(self.W_v_up(c_kv))\n"
          "        scores = torch.bmm(q, k.transpose(1, 2)).view(B, H, S, S) / d ** 0.5\n"
          "        if mask is not None:\n"
          "            scores = scores + mask\n"
          "        attn = torch.softmax(scores, dim=-1).view(B * H, S, S)\n"
          "        out = torch.bmm(attn, v).view(B, H, S, d).permute(0, 2, 1, 3).reshape(B, S, D)\n"
          "        return self.W_o(out), c_kv"),
         (CACHE_REF,
          "    per_token = d_latent + d_rope\n"
          "    return int(batch * seq_len * per_token * bytes_per_element * num_layers)"),
         (HAND_REF,
          "head_dim = d_model // num_heads\n"
          "mha_bytes = batch * seq_len * 2 * num_heads * head_dim * 2\n"
          "gqa_bytes = batch * seq_len * 2 * num_kv_heads * head_dim * 2\n"
          "mla_bytes = (d_latent + d_rope) * 2 * seq_len * batch"),
         ("    q = mla.W_q(x).view(B, S, H, d_head).transpose(1, 2)             # [B, H, S, d_head]\n", ""),
         (ABSORBED_REF,
          "    w_q = mla.W_q.weight.view(H, d_head, D)                          # rows of head h\n"
          "    w_o = mla.W_o.weight.view(D, H, d_head)                          # columns of head h\n"
          "    w_qk = torch.einsum(\"hdD,hdl->hDl\", w_q, w_k)                  # x -> latent query, per head\n"
          "    w_vo = torch.einsum(\"hdl,Dhd->hlD\", w_v, w_o)                  # latent context -> output\n"
          "    scores = torch.einsum(\"bsD,hDl,btl->bhst\", x, w_qk, c_kv) / math.sqrt(d_head)\n"
          "    if mask is not None:\n"
          "        scores = scores + mask\n"
          "    context = torch.einsum(\"bhst,btl->bhsl\", torch.softmax(scores, dim=-1), c_kv)\n"
          "    return torch.einsum(\"bhsl,hlD->bsD\", context, w_vo)")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION = [
    precision(
        "mla_softmax_float32", "the module's softmax in float32 (transformers' eager attention), cast back",
        [('        out = (F.softmax(scores, dim=-1) @ v)', '        out = (F.softmax(scores, dim=-1, dtype=torch.float32).to(v.dtype) @ v)')],
        {"test_module_float64_precision"},
    ),
]
