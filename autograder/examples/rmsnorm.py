from autograder.examples import mistake

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
