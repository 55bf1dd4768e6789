from autograder.examples import mistake

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
    ),
    mistake(
        "repeat_on_sequence_dim", "repeat_kv repeats along the sequence axis (dim=1) instead of the head axis",
        [("return x[:, :, :, None, :].expand(B, S, num_kv_heads, n_rep, head_dim).flatten(2, 3)",
          "return torch.repeat_interleave(x, n_rep, dim=1)")],
        # in the module, K/V then have n_rep copies of every token: a shape error when 1 < num_kv_heads <
        # num_q_heads; with one KV head (MQA) the copies only duplicate keys, which softmax averages away
        {"test_repeat_kv_layout_float64", "test_repeat_kv_single_kv_head_float32", "test_module_single_token",
         "test_module_no_mask_float32", "test_module_causal_float64", "test_module_random_mask_float64"},
    ),
    mistake(
        "no_scale", "attention scores not divided by sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)", "scores = q @ k.transpose(-2, -1)")],
        ATTENTION,
    ),
    mistake(
        "sqrt_d_model", "scores divided by sqrt(d_model) instead of sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)",
          "scores = q @ k.transpose(-2, -1) / math.sqrt(self.num_q_heads * self.d_head)")],
        ATTENTION,
    ),
    mistake(
        "mask_ignored", "forward accepts mask but never uses it",
        [("            scores = scores + mask\n", "            pass\n")],
        MASKED,
    ),
    mistake(
        "mask_multiplied", "the additive mask multiplied onto the scores",
        [("            scores = scores + mask\n", "            scores = scores * mask\n")],
        MASKED,
    ),
    mistake(
        "softmax_wrong_dim", "softmax over the query axis (dim=-2) instead of the key axis",
        [("attn = F.softmax(scores, dim=-1)", "attn = F.softmax(scores, dim=-2)")],
        ATTENTION,
    ),
    mistake(
        "no_transpose_out", "heads merged with reshape straight from [B, H, S, d_head], without transpose",
        [("out = (attn @ v).transpose(1, 2).reshape(B, S, self.num_q_heads * self.d_head)",
          "out = (attn @ v).reshape(B, S, self.num_q_heads * self.d_head)")],
        ATTENTION,
    ),
    mistake(
        "q_reshaped_not_transposed", "Q reshaped to [B, H, S, d_head] instead of transposed",
        [("q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)",
          "q, k, v = q.reshape(B, self.num_q_heads, S, self.d_head), k.transpose(1, 2), v.transpose(1, 2)")],
        ATTENTION,
    ),
    mistake(
        "bias_in_projection", "W_q built with a bias (found when the weights are loaded by name)",
        [("self.W_q = nn.Linear(d_model, num_q_heads * self.d_head, bias=False)",
          "self.W_q = nn.Linear(d_model, num_q_heads * self.d_head)")],
        {"test_module_parameters", "test_module_single_token", "test_module_no_mask_float32",
         "test_module_causal_float64", "test_module_random_mask_float64", "test_module_mha_and_mqa"},
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
    ),
    mistake(
        "percent_not_fraction", "saving_ratio typed as a percentage",
        [("saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes", "saving_ratio = (1 - gqa_kv_bytes / mha_kv_bytes) * 100")],
        {"test_hand_saving_ratio"},
    ),
    mistake(
        "forgot_one_minus", "saving_ratio = gqa / mha (what is kept, not what is saved)",
        [("saving_ratio = 1 - gqa_kv_bytes / mha_kv_bytes", "saving_ratio = gqa_kv_bytes / mha_kv_bytes")],
        {"test_hand_saving_ratio"},
    ),
    mistake(
        "q_heads_for_kv", "the GQA cache computed with num_q_heads KV heads",
        [("gqa_kv_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_kv_bytes = 2 * batch * seq_len * num_q_heads * head_dim * 2")],
        {"test_hand_gqa_kv_bytes", "test_hand_saving_ratio"},
    ),
    mistake(
        "mib_not_bytes", "kv_cache_bytes converts to MiB (a float) instead of returning bytes",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers / 1024**2")],
        {"test_kv_cache_bytes_fp16_one_layer", "test_kv_cache_bytes_returns_int"},
    ),
    mistake(
        "ignores_num_layers", "kv_cache_bytes leaves out num_layers",
        [("return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element")],
        {"test_kv_cache_bytes_uses_dtype_and_layers"},
    ),
]
