from autograder.examples import alternative, mistake

MISTAKES = [
    mistake(
        "no_sqrt", "RMS without the square root (the chapter's homework-1 formula)",
        [("rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)",
          "rms = torch.mean(xc * xc, dim=-1, keepdim=True) + eps"),
         ("rms = math.sqrt(sum(v * v for v in x) / len(x))", "rms = sum(v * v for v in x) / len(x)")],
        {"test_hand_rms", "test_hand_output", "test_function_float64_batched", "test_function_uses_eps_argument",
         "test_function_float32_default_eps", "test_function_single_vector", "test_module_forward_backward_float64",
         "test_module_forward_float32"},
    ),
    mistake(
        "eps_outside_root", "eps added after the square root",
        [("rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)",
          "rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True)) + eps")],
        {"test_function_float64_batched", "test_function_uses_eps_argument", "test_function_single_vector",
         "test_module_forward_backward_float64"},
    ),
    mistake(
        "gamma_missing", "the output is not scaled by gamma (hand answer and module)",
        [("return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)", "return (xc / rms).to(x.dtype)"),
         ("output = [v / rms * g for v, g in zip(x, gamma)]", "output = [v / rms for v in x]")],
        {"test_hand_output", "test_function_float64_batched", "test_function_uses_eps_argument",
         "test_function_float32_default_eps", "test_function_single_vector", "test_module_forward_backward_float64",
         "test_module_forward_float32"},
    ),
    mistake(
        "extra_beta", "a LayerNorm-style beta parameter in the module",
        [("self.gamma = nn.Parameter(torch.ones(d_model))",
          "self.gamma = nn.Parameter(torch.ones(d_model))\n        self.beta = nn.Parameter(torch.zeros(d_model))")],
        {"test_module_parameters", "test_module_forward_backward_float64"},
    ),
]

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
