from autograder.examples import mistake

MODULE_OUT = {"test_module_forward_backward_float64", "test_module_additive_mask", "test_module_float32_no_mask"}
CACHE_ALL = {"test_cache_chapter_version", "test_cache_with_rope_key", "test_cache_bytes_and_layers"}
BONUS_ALL = {"test_absorbed_causal_float64", "test_absorbed_no_mask_float64"}

MISTAKES = [
    mistake(
        "cache_returns_k", "forward returns K = W_k_up(c_kv) as the cache instead of the latent c_kv",
        [("return self.W_o(out), c_kv", "return self.W_o(out), self.W_k_up(c_kv)")],
        {"test_module_forward_backward_float64", "test_module_float32_no_mask"},
    ),
    mistake(
        "cache_returns_v", "forward returns the per-head V tensor [B, H, S, d_head] as the cache",
        [("return self.W_o(out), c_kv", "return self.W_o(out), v")],
        {"test_module_forward_backward_float64", "test_module_float32_no_mask"},
    ),
    mistake(
        "no_scale", "scores not divided by sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)", "scores = q @ k.transpose(-2, -1)")],
        MODULE_OUT,
    ),
    mistake(
        "scale_d_model", "scores divided by sqrt(d_model) instead of sqrt(d_head)",
        [("scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)",
          "scores = q @ k.transpose(-2, -1) / math.sqrt(D)")],
        MODULE_OUT,
    ),
    mistake(
        "mask_ignored", "the mask argument is never applied",
        [("scores = scores + mask\n        out = (F.softmax", "pass\n        out = (F.softmax")],
        {"test_module_forward_backward_float64", "test_module_additive_mask"},
    ),
    mistake(
        "mask_as_boolean", "only the -inf entries of the mask are used (masked_fill); finite values are ignored",
        [("scores = scores + mask\n        out = (F.softmax",
          "scores = scores.masked_fill(torch.isinf(mask), float(\"-inf\"))\n        out = (F.softmax")],
        {"test_module_additive_mask"},
    ),
    mistake(
        "w_k_up_for_v", "V is decompressed with W_k_up (the up-projections mixed up); W_v_up is unused",
        [("v = self.W_v_up(c_kv)", "v = self.W_k_up(c_kv)")],
        MODULE_OUT,
    ),
    mistake(
        "bias_true", "W_q built with bias=True: an extra parameter the pinned weights do not have",
        [("self.W_q = nn.Linear(d_model, d_model, bias=False)", "self.W_q = nn.Linear(d_model, d_model, bias=True)")],
        {"test_module_parameters"} | MODULE_OUT | BONUS_ALL,
    ),
    mistake(
        "latent_for_k_and_v", "the latent counted twice, once for K and once for V (factor 2), function and hand answer",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return 2 * batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers"),
         ("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2",
          "mla_bytes = 2 * batch * seq_len * (d_latent + d_rope) * 2")],
        CACHE_ALL | {"test_hand_mla_bytes"},
    ),
    mistake(
        "rope_key_forgotten", "the decoupled RoPE key left out of the cache (the chapter's count)",
        [("return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers",
          "return batch * seq_len * d_latent * bytes_per_element * num_layers"),
         ("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2", "mla_bytes = batch * seq_len * d_latent * 2")],
        {"test_cache_with_rope_key", "test_hand_mla_bytes"},
    ),
    mistake(
        "latent_per_head", "the MLA hand answer counts one latent per head",
        [("mla_bytes = batch * seq_len * (d_latent + d_rope) * 2",
          "mla_bytes = batch * seq_len * num_heads * (d_latent + d_rope) * 2")],
        {"test_hand_mla_bytes"},
    ),
    mistake(
        "hand_k_only", "MHA and GQA hand answers count K only (no factor 2 for V)",
        [("mha_bytes = 2 * batch * seq_len * num_heads * head_dim * 2", "mha_bytes = batch * seq_len * num_heads * head_dim * 2"),
         ("gqa_bytes = 2 * batch * seq_len * num_kv_heads * head_dim * 2",
          "gqa_bytes = batch * seq_len * num_kv_heads * head_dim * 2")],
        {"test_hand_mha_bytes", "test_hand_gqa_bytes"},
    ),
    mistake(
        "absorbed_no_scale", "the absorbed path forgets 1/sqrt(d_head)",
        [("scores = q_latent @ c_kv[:, None].transpose(-2, -1) / math.sqrt(d_head)",
          "scores = q_latent @ c_kv[:, None].transpose(-2, -1)")],
        BONUS_ALL,
    ),
    mistake(
        "absorbed_w_k_for_v", "the absorbed path applies W_k_up's weight on the value side",
        [("w_v = mla.W_v_up.weight.view(H, d_head, -1)", "w_v = mla.W_k_up.weight.view(H, d_head, -1)")],
        BONUS_ALL,
    ),
    mistake(
        "absorbed_wrong_split", "the absorbed path splits W_k_up.weight.T into heads instead of W_k_up.weight",
        [("w_k = mla.W_k_up.weight.view(H, d_head, -1)", "w_k = mla.W_k_up.weight.t().reshape(H, d_head, -1)")],
        BONUS_ALL,
    ),
    mistake(
        "absorbed_mask_ignored", "the absorbed path never applies the mask",
        [("scores = scores + mask\n    context_latent", "pass\n    context_latent")],
        {"test_absorbed_causal_float64"},
    ),
    mistake(
        "absorbed_calls_forward", "the bonus just calls the module's forward, which materialises K and V",
        [("H, d_head = mla.num_heads, mla.d_head", "return mla(x, mask)[0]")],
        {"test_absorbed_causal_float64", "test_absorbed_no_mask_float64"},
    ),
]
