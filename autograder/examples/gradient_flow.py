from autograder.examples import alternative, mistake

# the forward lines and the __init__ line of each class, made unique by what surrounds them
POST_FORWARD = "x = norm(x + F.relu(layer(x)))"
PRE_FORWARD = "x = x + F.relu(layer(norm(x)))"
PRE_INIT_NORMS = ("norms（nn.LayerNorm 的 ModuleList）。\n    \"\"\"\n\n    def __init__(self, d_model, num_layers):\n"
                  "        super().__init__()\n        ### BEGIN SOLUTION\n        if num_layers < 1:\n"
                  "            raise ValueError(f\"num_layers must be >= 1, got {num_layers}\")\n"
                  "        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])\n"
                  "        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])")
GRAD_NORMS = "return [layer.weight.grad.norm().item() for layer in model.layers]"

STACK_VALUE_CHECKS = {"test_postnorm_forward_backward_float64", "test_prenorm_forward_backward_float64",
                      "test_stacks_forward_float32_unbatched"}
GRAD_VALUE_CHECKS = {"test_grad_norms_match_reference", "test_grad_norms_on_own_stacks",
                     "test_grad_norms_clears_old_gradients"}

MISTAKES = [
    mistake(
        "wrong_letter", "the choice answer is another option's letter (the 'smoother output' distractor)",
        [("if text == CHOICE_OPTIONS[1])", "if text == CHOICE_OPTIONS[0])")],
        {"test_choice_letter"},
    ),
    mistake(
        "lowercase_letter", "the right letter, but typed in lower case (graded as is: wrong, with a format message)",
        [("if text == CHOICE_OPTIONS[1])", "if text == CHOICE_OPTIONS[1]).lower()")],
        {"test_choice_letter"},
    ),
    mistake(
        "stacks_swapped", "PostNormStack computes Pre-Norm and PreNormStack computes Post-Norm",
        [(POST_FORWARD, "x = F.relu(layer(norm(x))) + x"),
         (PRE_FORWARD, POST_FORWARD)],
        STACK_VALUE_CHECKS,
    ),
    mistake(
        "chapter_homework_definitions",
        "the chapter's swapped homework 3: 'Post-Norm' as x + F(Norm(x)), 'Pre-Norm' as x + Norm(F(x))",
        [(POST_FORWARD, "x = F.relu(layer(norm(x))) + x"),
         (PRE_FORWARD, "x = x + norm(F.relu(layer(x)))")],
        STACK_VALUE_CHECKS,
    ),
    mistake(
        "pre_residual_dropped", "PreNormStack without the residual: x = relu(layers[i](norms[i](x)))",
        [(PRE_FORWARD, "x = F.relu(layer(norm(x)))")],
        {"test_prenorm_forward_backward_float64", "test_stacks_forward_float32_unbatched"},
    ),
    mistake(
        "post_residual_dropped", "PostNormStack without the residual: x = norms[i](relu(layers[i](x)))",
        [(POST_FORWARD, "x = norm(F.relu(layer(x)))")],
        {"test_postnorm_forward_backward_float64", "test_stacks_forward_float32_unbatched"},
    ),
    mistake(
        "shared_norm", "PreNormStack puts one LayerNorm object into `norms` num_layers times",
        [(PRE_INIT_NORMS, PRE_INIT_NORMS.replace("nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])",
                                                 "nn.ModuleList([nn.LayerNorm(d_model)] * num_layers)"))],
        {"test_stacks_layers_are_independent", "test_prenorm_forward_backward_float64",
         "test_stacks_forward_float32_unbatched"},
    ),
    mistake(
        "single_norm_attribute", "PostNormStack has one `self.norm` used by every layer instead of a `norms` list",
        [("        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])\n"
          "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
          "        for layer, norm in zip(self.layers, self.norms):\n            " + POST_FORWARD,
          "        self.norm = nn.LayerNorm(d_model)\n"
          "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
          "        for layer in self.layers:\n            x = self.norm(x + F.relu(layer(x)))")],
        {"test_stacks_parameter_names", "test_stacks_layers_are_independent", "test_postnorm_forward_backward_float64",
         "test_stacks_forward_float32_unbatched",
         "test_grad_norms_on_own_stacks"},  # its own stack, with the wrong names, cannot take the weights
    ),
    mistake(
        "grad_norms_of_bias", "layer_grad_norms returns the norms of layers[i].bias.grad",
        [(GRAD_NORMS, "return [layer.bias.grad.norm().item() for layer in model.layers]")],
        GRAD_VALUE_CHECKS,
    ),
    mistake(
        "grad_norms_reversed", "layer_grad_norms returns the output side first",
        [(GRAD_NORMS, "return [layer.weight.grad.norm().item() for layer in reversed(model.layers)]")],
        GRAD_VALUE_CHECKS,
    ),
    mistake(
        "sum_loss", "the sum of squared errors instead of their mean",
        [("loss = F.mse_loss(model(x), target)", "loss = F.mse_loss(model(x), target, reduction=\"sum\")")],
        GRAD_VALUE_CHECKS,
    ),
    mistake(
        "grad_norms_as_tensors", "the norms are returned as 0-d tensors (no .item())",
        [(GRAD_NORMS, "return [layer.weight.grad.norm() for layer in model.layers]")],
        {"test_grad_norms_returns_list_of_floats"},
    ),
    mistake(
        "no_zero_grad", "layer_grad_norms does not clear old gradients: a second call accumulates",
        [("model.zero_grad(set_to_none=True)", "pass  # no zero_grad")],
        {"test_grad_norms_clears_old_gradients"},
    ),
]

# --- correct work in other styles: full marks, no diagnosis -------------------------------------------

CHOICE_REF = "answer = next(letter for letter, text in my_options.items() if text == CHOICE_OPTIONS[1])"
POST_INIT_FORWARD = (
    "        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])\n"
    "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
    "        for layer, norm in zip(self.layers, self.norms):\n            " + POST_FORWARD)
LOSS_AND_NORMS = ("    model.zero_grad(set_to_none=True)\n"
                  "    loss = F.mse_loss(model(x), target)\n"
                  "    loss.backward()\n"
                  "    " + GRAD_NORMS)

ALTERNATIVES = [
    alternative(
        "index_loops",
        "index loops over range(len(self.layers)) with torch.relu and a named intermediate; the loss "
        "written out as ((y - t) ** 2).mean(), gradients cleared by hand, norms via torch.linalg.vector_norm",
        [(CHOICE_REF, "answer = {text: letter for letter, text in my_options.items()}[CHOICE_OPTIONS[1]]"),
         (POST_INIT_FORWARD,
          "        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])\n"
          "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
          "        for i in range(len(self.layers)):\n"
          "            x = self.norms[i](x + torch.relu(self.layers[i](x)))"),
         ("        for layer, norm in zip(self.layers, self.norms):\n            " + PRE_FORWARD,
          "        for i in range(len(self.layers)):\n"
          "            h = self.norms[i](x)\n"
          "            x = x + torch.relu(self.layers[i](h))"),
         (LOSS_AND_NORMS,
          "    for p in model.parameters():\n"
          "        p.grad = None\n"
          "    y = model(x)\n"
          "    loss = ((y - target) ** 2).mean()\n"
          "    loss.backward()\n"
          "    norms = []\n"
          "    for i in range(len(model.layers)):\n"
          "        norms.append(torch.linalg.vector_norm(model.layers[i].weight.grad).item())\n"
          "    return norms")],
    ),
    alternative(
        "modules_and_autograd_grad",
        "ModuleLists built by append, nn.ReLU modules and the .relu() method; layer_grad_norms takes the "
        "gradients with torch.autograd.grad (no .grad to clear) and nn.MSELoss",
        [(CHOICE_REF, "answer = \"ABCD\"[list(my_options.values()).index(CHOICE_OPTIONS[1])]"),
         (PRE_INIT_NORMS,
          PRE_INIT_NORMS.replace(
              "        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])\n"
              "        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])",
              "        self.layers, self.norms = nn.ModuleList(), nn.ModuleList()\n"
              "        for _ in range(num_layers):\n"
              "            self.layers.append(nn.Linear(d_model, d_model))\n"
              "            self.norms.append(nn.LayerNorm(d_model))\n"
              "        self.act = nn.ReLU()")),
         (PRE_FORWARD, "x = x + self.act(layer(norm(x)))"),
         (POST_FORWARD, "x = norm(x + layer(x).relu())"),
         (LOSS_AND_NORMS,
          "    loss = nn.MSELoss()(model(x), target)\n"
          "    weights = [layer.weight for layer in model.layers]\n"
          "    grads = torch.autograd.grad(loss, weights)\n"
          "    return [float(g.norm()) for g in grads]")],
    ),
    alternative(
        "sequential_style",
        "Pre-Norm written with torch.add and an explicit residual variable, Post-Norm with F.relu on a "
        "separate line; zero_grad(set_to_none=False), the mean reduction spelled out, and the norm as "
        "sqrt(sum of squares)",
        [(CHOICE_REF, "answer = [letter for letter, text in my_options.items() if \"恒等项\" in text][0]"),
         (POST_FORWARD,
          "branch = F.relu(layer(x))\n            x = norm(x + branch)"),
         (PRE_FORWARD,
          "residual = x\n            x = torch.add(residual, F.relu(layer(norm(x))))"),
         (LOSS_AND_NORMS,
          "    model.zero_grad(set_to_none=False)\n"
          "    F.mse_loss(model(x), target, reduction=\"mean\").backward()\n"
          "    return [math.sqrt(float((layer.weight.grad ** 2).sum())) for layer in model.layers]")],
    ),
]
