from autograder.examples import alternative, mistake, precision, with_precision_checks

RMS_LINE = "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)"
HAND_RMS = "rms = math.sqrt(sum(v * v for v in x) / len(x))"
HAND_OUTPUT = "output = [v / rms * g for v, g in zip(x, gamma)]"
GAMMA_PARAM = "self.gamma = nn.Parameter(torch.ones(d_model))"
FORWARD_CALL = "return rms_norm(x, self.gamma, self.eps)"

HAND = {"test_hand_rms", "test_hand_output"}
FUNCTION = {"test_function_float64_batched", "test_function_uses_eps_argument", "test_function_float32_default_eps",
            "test_function_single_vector"}
MODULE_OUTPUT = {"test_module_forward_backward_float64", "test_module_forward_float32", "test_module_uses_eps_argument"}
MODULE = {"test_module_parameters"} | MODULE_OUTPUT
# small-scale float64 inputs only: where eps sits (or its value) is invisible at scale 3, and at unit scale (the
# single-vector check) it is below float32 rounding, which no check reports as a wrong algorithm
SMALL_SCALE = {"test_function_float64_batched", "test_function_uses_eps_argument",
               "test_module_forward_backward_float64", "test_module_uses_eps_argument"}

MISTAKES = [
    mistake(
        "no_sqrt", "RMS without the square root (the chapter's homework-1 formula)",
        [(RMS_LINE, "rms = torch.mean(xc * xc, dim=-1, keepdim=True) + eps"),
         (HAND_RMS, "rms = sum(v * v for v in x) / len(x)")],
        HAND | FUNCTION | MODULE_OUTPUT, diagnosis="no_sqrt",
    ),
    mistake(
        "eps_outside_root", "eps added after the square root",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True)) + eps")],
        SMALL_SCALE, diagnosis="eps_outside_root",
    ),
    mistake(
        "gamma_missing", "the output is not scaled by gamma (hand answer and module)",
        [("return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", "return (xc / rms).to(x.dtype)"),
         (HAND_OUTPUT, "output = [v / rms for v in x]")],
        {"test_hand_output"} | FUNCTION | MODULE_OUTPUT, diagnosis="gamma_missing",
    ),
    mistake(
        "extra_beta", "a LayerNorm-style beta parameter in the module",
        [(GAMMA_PARAM, GAMMA_PARAM + "\n        self.beta = nn.Parameter(torch.zeros(d_model))")],
        {"test_module_parameters", "test_module_forward_backward_float64"}, diagnosis="extra_beta",
    ),
    mistake(
        "sum_not_mean", "the sum of squares instead of their mean (the L2 norm, off by sqrt(d)), hand answer too",
        [(RMS_LINE, "rms = torch.sqrt(torch.sum(xc * xc, dim=-1, keepdim=True) + eps)"),
         (HAND_RMS, "rms = math.sqrt(sum(v * v for v in x))")],
        HAND | FUNCTION | MODULE_OUTPUT, diagnosis="sum_not_mean",
    ),
    mistake(
        "layernorm", "the mean subtracted first (LayerNorm without beta), hand answer too",
        [("xc = x.to(compute_dtype)", "xc = x.to(compute_dtype)\n    xc = xc - xc.mean(dim=-1, keepdim=True)"),
         (HAND_RMS, "mu = sum(x) / len(x)\nrms = math.sqrt(sum((v - mu) ** 2 for v in x) / len(x))"),
         (HAND_OUTPUT, "output = [(v - mu) / rms * g for v, g in zip(x, gamma)]")],
        HAND | FUNCTION | MODULE_OUTPUT, diagnosis="layernorm",
    ),
    mistake(
        "no_eps", "no eps at all: sqrt(mean(x^2))",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True))")],
        SMALL_SCALE, diagnosis="no_eps",
    ),
    mistake(
        "eps_hard_coded", "rms_norm adds a hard-coded 1e-6 instead of its eps argument (the module calls it)",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + 1e-6)")],
        {"test_function_uses_eps_argument", "test_module_uses_eps_argument"}, diagnosis="ignores_eps_argument",
    ),
    mistake(
        "module_drops_eps", "the module's forward calls rms_norm without self.eps (the default eps is used)",
        [(FORWARD_CALL, "return rms_norm(x, self.gamma)")],
        {"test_module_uses_eps_argument"}, diagnosis="ignores_eps_argument",
    ),
    mistake(
        "mean_over_all_elements", "torch.mean without dim: one rms for the whole tensor",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc) + eps)")],
        (FUNCTION - {"test_function_single_vector"}) | MODULE_OUTPUT, diagnosis="mean_over_all_elements",
    ),
    mistake(
        "gamma_named_weight", "the scale is called weight (nn.RMSNorm's and Hugging Face's name), not gamma",
        [(GAMMA_PARAM, "self.weight = nn.Parameter(torch.ones(d_model))"),
         (FORWARD_CALL, "return rms_norm(x, self.weight, self.eps)")],
        MODULE, diagnosis="gamma_renamed",
    ),
    mistake(
        "gamma_plain_tensor", "gamma is a plain tensor attribute, not an nn.Parameter",
        [(GAMMA_PARAM, "self.gamma = torch.ones(d_model)")],
        MODULE, diagnosis="gamma_not_parameter",
    ),
    mistake(
        "gamma_buffer", "gamma registered as a buffer: it loads and the forward is right, but it gets no gradient",
        [(GAMMA_PARAM, "self.register_buffer(\"gamma\", torch.ones(d_model))")],
        {"test_module_forward_backward_float64"}, diagnosis="gamma_not_parameter",
    ),
    mistake(
        "gamma_random_init", "gamma initialised with randn instead of ones",
        [(GAMMA_PARAM, "self.gamma = nn.Parameter(torch.randn(d_model))")],
        {"test_module_parameters"}, diagnosis="gamma_init_not_ones",
    ),
    # --- uncatalogued (no name; the hints localise them) ---
    mistake(
        "rms_over_batch_dim", "the mean of x² taken over the first dim instead of the last (tokens mixed)",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc, dim=0, keepdim=True) + eps)")],
        {"test_function_float64_batched", "test_function_uses_eps_argument", "test_function_float32_default_eps",
         "test_module_forward_backward_float64", "test_module_forward_float32", "test_module_uses_eps_argument"},
    ),
    mistake(
        "module_gemma_gamma", "the module scales by (1 + gamma), Gemma's convention, not by gamma",
        [(FORWARD_CALL, "return rms_norm(x, 1 + self.gamma, self.eps)")],
        MODULE_OUTPUT,
    ),
    mistake(
        "hand_rms_sqrt_before_mean", "the typed rms divides by len(x) outside the square root",
        [(HAND_RMS, "rms = math.sqrt(sum(v * v for v in x)) / len(x)")],
        HAND,
    ),
]

# --- slips within float32 rounding at unit scale and the default eps (issue 22): the small-scale and large-eps checks
# show them, so the precision checks do not call them a precision ---
MISTAKES += [
    mistake(
        "f_normalize_sqrt_d", "rms_norm as F.normalize(x) * sqrt(d) * gamma: no eps (the module calls it)",
        [("    rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)\n    return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", "    return F.normalize(x, dim=-1) * x.shape[-1] ** 0.5 * gamma")],
        SMALL_SCALE, diagnosis="no_eps",
    ),
    mistake(
        "eps_hard_coded_1e5", "rms_norm adds a hard-coded 1e-5 instead of its eps argument (the module calls it)",
        [(RMS_LINE, "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + 1e-5)")],
        SMALL_SCALE, diagnosis="ignores_eps_argument",
    ),
    mistake(
        "module_eps_1e5", "the module keeps an eps of 1e-5 of its own, whatever eps it is given",
        [("        self.eps = eps\n        self.gamma = nn.Parameter(torch.ones(d_model))",
          "        self.eps = 1e-5\n        self.gamma = nn.Parameter(torch.ones(d_model))")],
        {"test_module_forward_backward_float64", "test_module_uses_eps_argument"}, diagnosis="ignores_eps_argument",
    ),
]

# a mistake that fails a part's float64 check fails its precision check too
PRECISION_OF = {"test_function_float64_batched": "test_function_float64_precision",
                "test_module_forward_backward_float64": "test_module_float64_precision"}
MISTAKES = with_precision_checks(MISTAKES, PRECISION_OF, forward_right=("gamma_buffer",))

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

HAND_REF = ("rms = math.sqrt(sum(v * v for v in x) / len(x))\n"
            "output = [v / rms * g for v, g in zip(x, gamma)]")
FUNCTION_REF = (
    "    compute_dtype = torch.promote_types(x.dtype, torch.float32)\n"
    "    xc = x.to(compute_dtype)\n"
    "    rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)\n"
    "    return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)")
FUNCTION_BODY = "    # half types are normalised in float32; float64 stays float64\n" + FUNCTION_REF
# the whole solution region of rms_norm, input checks included (a student who writes none)
FUNCTION_REF_ALL = (
    "    if not x.is_floating_point():\n"
    "        raise TypeError(f\"x must be a floating-point tensor, got dtype {x.dtype}\")\n"
    "    if x.dim() == 0 or gamma.shape != x.shape[-1:]:\n"
    "        raise ValueError(\n"
    "            f\"gamma must have shape [{x.shape[-1] if x.dim() else '?'}] to match the last dimension of x \"\n"
    "            f\"{list(x.shape)}, got {list(gamma.shape)}\"\n"
    "        )\n"
    "    if eps < 0:\n"
    "        raise ValueError(f\"eps must be >= 0, got {eps}\")\n" + FUNCTION_BODY)
INIT_REF = (
    "        if not isinstance(d_model, int) or d_model <= 0:\n"
    "            raise ValueError(f\"d_model must be a positive integer, got {d_model!r}\")\n"
    "        self.eps = eps\n"
    "        self.gamma = nn.Parameter(torch.ones(d_model))")
FORWARD_REF = "        return rms_norm(x, self.gamma, self.eps)"

ALTERNATIVES = [
    alternative(
        "functional_rms_norm",
        "torch's own F.rms_norm in the function and in the module (which holds gamma and calls it directly); "
        "the hand answer with ** 0.5 and gamma first",
        [(HAND_REF, "rms = (sum(v ** 2 for v in x) / len(x)) ** 0.5\n"
                    "output = [g * v / rms for v, g in zip(x, gamma)]"),
         (FUNCTION_REF_ALL, "    return F.rms_norm(x, (x.shape[-1],), weight=gamma, eps=eps)"),
         (INIT_REF, "        self.eps = eps\n        self.gamma = nn.Parameter(torch.ones(d_model))"),
         (FORWARD_REF, "        return F.rms_norm(x, self.gamma.shape, weight=self.gamma, eps=self.eps)")],
    ),
    alternative(
        "rsqrt_inline",
        "x * rsqrt(mean(x²) + eps) * gamma in one line, no input checks; the module repeats the formula "
        "inline instead of calling rms_norm; the hand rms through math.hypot",
        [(HAND_REF, "rms = math.hypot(*x) / math.sqrt(len(x))\n"
                    "output = [x[i] * gamma[i] / rms for i in range(len(x))]"),
         (FUNCTION_REF_ALL, "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma"),
         (INIT_REF, "        self.eps = eps\n        self.gamma = nn.Parameter(torch.full((d_model,), 1.0))"),
         (FORWARD_REF,
          "        inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)\n"
          "        return self.gamma * (x * inv_rms)")],
    ),
    alternative(
        "vector_norm",
        "the mean square from torch.linalg.vector_norm (||x||² / d), divided rather than multiplied; "
        "gamma registered with register_parameter; the hand sum with math.fsum",
        [(HAND_REF, "mean_square = math.fsum(v * v for v in x) / len(x)\n"
                    "rms = math.sqrt(mean_square)\n"
                    "output = [v * g / rms for v, g in zip(x, gamma)]"),
         (FUNCTION_BODY,
          "    d = x.shape[-1]\n"
          "    mean_square = torch.linalg.vector_norm(x, ord=2, dim=-1, keepdim=True) ** 2 / d\n"
          "    return gamma * x / torch.sqrt(mean_square + eps)"),
         (INIT_REF, "        self.eps = eps\n"
                    "        self.register_parameter(\"gamma\", nn.Parameter(torch.ones(d_model)))"),
         (FORWARD_REF, "        return rms_norm(x, gamma=self.gamma, eps=self.eps)")],
    ),
]

# --- right algorithms with float32 internals: only the precision checks are lost -------------------------

PRECISION_CHECKS = set(PRECISION_OF.values())
PRECISION = [
    precision(
        "float64_downcast", "every input computed in float32 and cast back (the module calls the function)",
        [("compute_dtype = torch.promote_types(x.dtype, torch.float32)", "compute_dtype = torch.float32")],
        PRECISION_CHECKS,
    ),
    precision(
        "llama_rmsnorm_style", "transformers' LlamaRMSNorm: float32, rsqrt of the variance, cast back, times gamma",
        [(FUNCTION_REF,
          "    hidden = x.to(torch.float32)\n"
          "    variance = hidden.pow(2).mean(-1, keepdim=True)\n"
          "    hidden = hidden * torch.rsqrt(variance + eps)\n"
          "    return gamma.to(x.dtype) * hidden.to(x.dtype)")],
        PRECISION_CHECKS,
    ),
]
