from autograder.examples import alternative, mistake, precision, with_precision_checks

FORWARD = "return self.W_down(swish(self.W_gate(x)) * self.W_up(x))"
LINEARS = ("self.W_gate = nn.Linear(d_model, d_ff, bias=False)\n"
           "        self.W_up = nn.Linear(d_model, d_ff, bias=False)\n"
           "        self.W_down = nn.Linear(d_ff, d_model, bias=False)")
ROUND_UP = "d_ff = (d_ff + 255) // 256 * 256"
MODULE_FORWARD_CHECKS = {"test_module_forward_backward_float64", "test_module_forward_float32"}
SWISH_CHECKS = {"test_swish_float64", "test_swish_float32"}
D_FF_CHECKS = {"test_default_d_ff", "test_module_default_d_ff"}

MISTAKES = [
    mistake(
        "swish_is_relu", "swish written as ReLU (used by the module as well)",
        [("return a * torch.sigmoid(a)", "return torch.relu(a)")],
        SWISH_CHECKS | MODULE_FORWARD_CHECKS,
        diagnosis="relu_gate",
    ),
    mistake(
        "swish_is_gelu", "swish written as GELU (used by the module as well)",
        [("return a * torch.sigmoid(a)", "return F.gelu(a)")],
        SWISH_CHECKS | MODULE_FORWARD_CHECKS,
        diagnosis="gelu_gate",
    ),
    mistake(
        "swish_overflows", "swish as a·e^a / (1 + e^a): NaN once e^a overflows (float32, a > 88)",
        [("return a * torch.sigmoid(a)", "return a * torch.exp(a) / (1 + torch.exp(a))")],
        {"test_swish_float32"},
        diagnosis="swish_overflow",
    ),
    mistake(
        "relu_gate", "the module's gate uses ReLU instead of swish (swish itself is right)",
        [(FORWARD, "return self.W_down(torch.relu(self.W_gate(x)) * self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="relu_gate",
    ),
    mistake(
        "sigmoid_gate", "the original GLU's sigmoid gate instead of swish",
        [(FORWARD, "return self.W_down(torch.sigmoid(self.W_gate(x)) * self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="sigmoid_gate",
    ),
    mistake(
        "gate_up_swapped", "swish on the up branch: W_down(W_gate x * swish(W_up x))",
        [(FORWARD, "return self.W_down(self.W_gate(x) * swish(self.W_up(x)))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="gate_up_swapped",
    ),
    mistake(
        "activation_after_product", "swish applied after the product: W_down(swish(W_gate x * W_up x))",
        [(FORWARD, "return self.W_down(swish(self.W_gate(x) * self.W_up(x)))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="activation_after_product",
    ),
    mistake(
        "plus_instead_of_times", "the two branches added instead of multiplied",
        [(FORWARD, "return self.W_down(swish(self.W_gate(x)) + self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="plus_instead_of_times",
    ),
    mistake(
        "bias_true", "nn.Linear with its default bias=True: found at weight loading (parameters the weights lack)",
        [(LINEARS, LINEARS.replace("bias=False", "bias=True"))],
        {"test_module_parameters_explicit_d_ff"} | MODULE_FORWARD_CHECKS,
        diagnosis="bias_true",
    ),
    mistake(
        "d_ff_4x", "default d_ff = 4·d_model (the ReLU FFN's hidden size)",
        [("d_ff = 8 * d_model // 3  # == int(8 / 3 * d_model), without floating-point rounding\n"
          "    d_ff = (d_ff + 255) // 256 * 256", "d_ff = 4 * d_model")],
        D_FF_CHECKS | {"test_param_counts_swiglu_exact_multiple", "test_param_counts_swiglu_rounded"},
        diagnosis="d_ff_4x",
    ),
    mistake(
        "d_ff_no_rounding", "default d_ff = int(8/3·d_model), not rounded up to a multiple of 256",
        [(ROUND_UP, "pass")],
        D_FF_CHECKS | {"test_param_counts_swiglu_rounded"},
        diagnosis="d_ff_no_rounding",
    ),
    mistake(
        "d_ff_round_down", "default d_ff rounded down to a multiple of 256 (then max with d_model)",
        [(ROUND_UP, "d_ff = d_ff // 256 * 256")],
        D_FF_CHECKS | {"test_param_counts_swiglu_rounded"},
        diagnosis="d_ff_round_down",
    ),
    mistake(
        "module_ignores_default", "FeedForward_SwiGLU uses 4·d_model when d_ff is None (default_d_ff itself is right)",
        [("            d_ff = default_d_ff(d_model)", "            d_ff = 4 * d_model")],
        {"test_module_default_d_ff"},
        diagnosis="d_ff_4x",
    ),
    mistake(
        "relu_ffn_without_biases", "the ReLU FFN counted without its two biases (8·d²)",
        [("relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_model)",
          "relu_ffn = d_model * d_hidden + d_hidden * d_model")],
        {"test_param_counts_relu"},
        diagnosis="relu_ffn_without_biases",
    ),
    mistake(
        "swiglu_counted_with_biases", "biases counted for the three SwiGLU matrices",
        [("swiglu_ffn = 3 * d_model * default_d_ff(d_model)",
          "swiglu_ffn = 3 * d_model * default_d_ff(d_model) + 2 * default_d_ff(d_model) + d_model")],
        {"test_param_counts_swiglu_exact_multiple", "test_param_counts_swiglu_rounded"},
        diagnosis="bias_true",
    ),
    mistake(
        "gelu_tanh_gate", "the module's gate uses GELU with the tanh approximation (swish itself is right)",
        [(FORWARD, "return self.W_down(F.gelu(self.W_gate(x), approximate=\"tanh\") * self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="gelu_gate",
    ),
    mistake(
        "no_activation", "no activation on the gate: the bilinear layer W_down(W_gate x * W_up x)",
        [(FORWARD, "return self.W_down(self.W_gate(x) * self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="no_activation",
    ),
    mistake(
        "swish_exp_sign_flipped", "swish as a / (1 + e^a): the sign of the exponent flipped (used by the module too)",
        [("return a * torch.sigmoid(a)", "return a / (1 + torch.exp(a))")],
        SWISH_CHECKS | MODULE_FORWARD_CHECKS,
        diagnosis="exp_sign_flipped",
    ),
    mistake(
        "swish_on_both_branches", "swish on both branches: W_down(swish(W_gate x) * swish(W_up x))",
        [(FORWARD, "return self.W_down(swish(self.W_gate(x)) * swish(self.W_up(x)))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="swish_on_both_branches",
    ),
    mistake(
        "up_branch_unused", "W_up built but never used: W_down(swish(W_gate x))",
        [(FORWARD, "return self.W_down(swish(self.W_gate(x)))")],
        MODULE_FORWARD_CHECKS,
        diagnosis="up_branch_unused",
    ),
    mistake(
        "d_ff_argument_ignored", "FeedForward_SwiGLU always uses default_d_ff(d_model), even when d_ff is given",
        [("        if d_ff is None:\n            d_ff = default_d_ff(d_model)",
          "        d_ff = default_d_ff(d_model)")],
        {"test_module_parameters_explicit_d_ff"} | MODULE_FORWARD_CHECKS,
        diagnosis="d_ff_argument_ignored",
    ),
    mistake(
        "d_ff_round_nearest", "default d_ff rounded to the nearest multiple of 256 (then max with d_model)",
        [(ROUND_UP, "d_ff = round(d_ff / 256) * 256")],
        D_FF_CHECKS | {"test_param_counts_swiglu_rounded"},
        diagnosis="d_ff_round_nearest",
    ),
    mistake(
        "relu_ffn_fc2_bias_4d", "the ReLU FFN's fc2 bias counted with 4·d_model entries instead of d_model",
        [("relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_model)",
          "relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_hidden)")],
        {"test_param_counts_relu"},
        diagnosis="relu_ffn_fc2_bias_4d",
    ),
    mistake(
        "relu_ffn_fc1_bias_only", "the ReLU FFN counted with fc1's bias only",
        [("relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_model)",
          "relu_ffn = (d_model * d_hidden + d_hidden) + d_hidden * d_model")],
        {"test_param_counts_relu"},
        diagnosis="relu_ffn_fc1_bias_only",
    ),
    mistake(
        "swiglu_two_matrices", "the SwiGLU count with two matrices, as if it were the old FFN without biases",
        [("swiglu_ffn = 3 * d_model * default_d_ff(d_model)", "swiglu_ffn = 2 * d_model * default_d_ff(d_model)")],
        {"test_param_counts_swiglu_exact_multiple", "test_param_counts_swiglu_rounded"},
        diagnosis="swiglu_two_matrices",
    ),
    # --- uncatalogued (no name; the hints localise them) ---
    mistake(
        "sigmoid_on_up_branch", "the gate is linear and the sigmoid sits on the up branch: W_gate x * sigmoid(W_up x)",
        [(FORWARD, "return self.W_down(self.W_gate(x) * torch.sigmoid(self.W_up(x)))")],
        MODULE_FORWARD_CHECKS,
    ),
    mistake(
        "residual_inside_ffn", "the FFN adds its input back (a residual inside the FFN; the block adds it)",
        [(FORWARD, "return x + self.W_down(swish(self.W_gate(x)) * self.W_up(x))")],
        MODULE_FORWARD_CHECKS,
    ),
    mistake(
        "d_ff_multiple_of_128", "default_d_ff rounds up to a multiple of 128 instead of 256",
        [(ROUND_UP, "d_ff = (d_ff + 127) // 128 * 128")],
        D_FF_CHECKS | {"test_param_counts_swiglu_rounded"},
    ),
    mistake(
        "swiglu_params_extra_d_model", "the SwiGLU count adds d_model (a bias of W_down counted)",
        [("swiglu_ffn = 3 * d_model * default_d_ff(d_model)", "swiglu_ffn = 3 * d_model * default_d_ff(d_model) + d_model")],
        {"test_param_counts_swiglu_rounded", "test_param_counts_swiglu_exact_multiple"},
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {"test_swish_float64": "test_swish_float64_precision",
                "test_module_forward_backward_float64": "test_module_float64_precision"}
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF)
# wrong only where a < -10, which the precision check's inputs never reach: it keeps that check
MISTAKES.append(mistake(
    "swish_clamped", "swish clamps its input at -10 'for stability': wrong for very negative inputs (uncatalogued)",
    [("return a * torch.sigmoid(a)", "return a / (1 + torch.exp(-a.clamp(min=-10)))")],
    SWISH_CHECKS,
))

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

SWISH_REF = "    return a * torch.sigmoid(a)"
D_FF_REF = ("    d_ff = 8 * d_model // 3  # == int(8 / 3 * d_model), without floating-point rounding\n"
            "    " + ROUND_UP + "\n"
            "    return max(d_ff, d_model)")
INIT_D_FF_REF = ("        if d_ff is None:\n"
                 "            d_ff = default_d_ff(d_model)\n"
                 "        if not isinstance(d_ff, int) or d_ff <= 0:\n"
                 "            raise ValueError(f\"d_ff must be a positive integer or None, got {d_ff!r}\")\n")
COUNTS_REF = ("    d_hidden = 4 * d_model\n"
              "    relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_model)\n"
              "    swiglu_ffn = 3 * d_model * default_d_ff(d_model)\n"
              "    return relu_ffn, swiglu_ffn")

ALTERNATIVES = [
    alternative(
        "silu_einsum_ceil",
        "swish is F.silu; default d_ff with int(8/3·d) and math.ceil; the forward applies the three weight "
        "matrices with torch.einsum; the counts as closed formulas (8d² + 5d, 3·d·d_ff)",
        [(SWISH_REF, "    return F.silu(a)"),
         (D_FF_REF,
          "    hidden = int(8 / 3 * d_model)\n"
          "    return max(math.ceil(hidden / 256) * 256, d_model)"),
         (FORWARD,
          "gate = torch.einsum(\"...i,fi->...f\", x, self.W_gate.weight)\n"
          "        up = torch.einsum(\"...i,fi->...f\", x, self.W_up.weight)\n"
          "        return torch.einsum(\"...f,of->...o\", swish(gate) * up, self.W_down.weight)"),
         (COUNTS_REF,
          "    relu_ffn = 8 * d_model ** 2 + 5 * d_model  # two 4d×d matrices, biases 4d and d\n"
          "    swiglu_ffn = 3 * d_model * default_d_ff(d_model)\n"
          "    return relu_ffn, swiglu_ffn")],
    ),
    alternative(
        "exp_formula_modulo",
        "swish as a / (1 + exp(-a)) (no overflow to NaN: exp(-a) = inf gives -0); default d_ff padded "
        "with a modulo; the module uses `d_ff or default_d_ff(d_model)` and F.silu on named branches; "
        "the counts summed over (in, out) shapes",
        [(SWISH_REF, "    return a / (1 + torch.exp(-a))"),
         (D_FF_REF,
          "    d_ff = int(d_model * 8 / 3)\n"
          "    if d_ff % 256 != 0:\n"
          "        d_ff += 256 - d_ff % 256\n"
          "    return max(d_ff, d_model)"),
         (INIT_D_FF_REF, "        d_ff = d_ff or default_d_ff(d_model)\n"),
         (FORWARD,
          "gate = self.W_gate(x)\n"
          "        up = self.W_up(x)\n"
          "        hidden = F.silu(gate) * up\n"
          "        return self.W_down(hidden)"),
         (COUNTS_REF,
          "    relu_shapes = [(d_model, 4 * d_model), (4 * d_model, d_model)]\n"
          "    relu_ffn = sum(n_in * n_out + n_out for n_in, n_out in relu_shapes)  # weight + bias\n"
          "    d_ff = default_d_ff(d_model)\n"
          "    swiglu_shapes = [(d_model, d_ff), (d_model, d_ff), (d_ff, d_model)]\n"
          "    swiglu_ffn = sum(n_in * n_out for n_in, n_out in swiglu_shapes)\n"
          "    return relu_ffn, swiglu_ffn")],
    ),
    alternative(
        "tanh_sigmoid_meta_count",
        "swish through the identity sigmoid(a) = (1 + tanh(a/2)) / 2; default d_ff by negative floor "
        "division; F.linear in the forward; the counts from real modules built on the meta device "
        "(no memory), summing p.numel()",
        [(SWISH_REF, "    return a * 0.5 * (1 + torch.tanh(a / 2))"),
         (D_FF_REF,
          "    d_ff = -(-(8 * d_model // 3) // 256) * 256  # ceil division\n"
          "    return d_ff if d_ff > d_model else d_model"),
         (FORWARD,
          "h = swish(F.linear(x, self.W_gate.weight)) * F.linear(x, self.W_up.weight)\n"
          "        return F.linear(h, self.W_down.weight)"),
         (COUNTS_REF,
          "    with torch.device(\"meta\"):\n"
          "        relu = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.ReLU(), nn.Linear(4 * d_model, d_model))\n"
          "        swiglu = FeedForward_SwiGLU(d_model)\n"
          "    relu_ffn = sum(p.numel() for p in relu.parameters())\n"
          "    swiglu_ffn = sum(p.numel() for p in swiglu.parameters())\n"
          "    return relu_ffn, swiglu_ffn")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION = [
    precision(
        "swish_in_float32", "swish computed in float32 and cast back (the module uses it)",
        [("    return a * torch.sigmoid(a)", "    return (a.float() * torch.sigmoid(a.float())).to(a.dtype)")],
        {"test_swish_float64_precision", "test_module_float64_precision"},
    ),
]
