from autograder.examples import alternative, mistake

# the forward lines and the __init__ line of each class, made unique by what surrounds them
POST_FORWARD = "x = norm(x + F.relu(layer(x)))"
PRE_FORWARD = "x = x + F.relu(layer(norm(x)))"
INIT_BODY = ("\n    def __init__(self, d_model, num_layers):\n"
             "        super().__init__()\n        ### BEGIN SOLUTION\n        if num_layers < 1:\n"
             "            raise ValueError(f\"num_layers must be >= 1, got {num_layers}\")\n"
             "        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])\n"
             "        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])")
PRE_INIT_NORMS = "norms（nn.LayerNorm 的 ModuleList）。\n    \"\"\"\n" + INIT_BODY
POST_INIT = "（每层各有自己的 Norm）。\n    \"\"\"\n" + INIT_BODY
LINEARS = "nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])"
NORMS = "nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])"
GRAD_NORMS = "return [layer.weight.grad.norm().item() for layer in model.layers]"
CHOICE = "if text == CHOICE_OPTIONS[1])"

STACK_VALUE_CHECKS = {"test_postnorm_forward_backward_float64", "test_prenorm_forward_backward_float64",
                      "test_stacks_forward_float32_unbatched"}
POST_VALUE_CHECKS = {"test_postnorm_forward_backward_float64", "test_stacks_forward_float32_unbatched"}
PRE_VALUE_CHECKS = {"test_prenorm_forward_backward_float64", "test_stacks_forward_float32_unbatched"}
# a module whose parameter names break the convention: every check that loads weights into it fails
KEYS_CHECKS = {"test_stacks_parameter_names", "test_stacks_layers_are_independent",
               "test_stacks_forward_float32_unbatched", "test_grad_norms_on_own_stacks"}
GRAD_VALUE_CHECKS = {"test_grad_norms_match_reference", "test_grad_norms_on_own_stacks",
                     "test_grad_norms_clears_old_gradients"}

MISTAKES = [
    # --- the multiple-choice letter ---
    mistake(
        "wrong_letter", "the choice answer is another option's letter (the 'smoother output' distractor)",
        [(CHOICE, "if text == CHOICE_OPTIONS[0])")],
        {"test_choice_letter"}, diagnosis="choice_norm_after_sublayer",
    ),
    mistake(
        "letter_postnorm_no_residual", "the choice answer is the option 'Post-Norm has no residual connection'",
        [(CHOICE, "if text == CHOICE_OPTIONS[2])")],
        {"test_choice_letter"}, diagnosis="choice_postnorm_no_residual",
    ),
    mistake(
        "letter_fewer_params", "the choice answer is the option 'Pre-Norm has fewer parameters'",
        [(CHOICE, "if text == CHOICE_OPTIONS[3])")],
        {"test_choice_letter"}, diagnosis="choice_fewer_params",
    ),
    mistake(
        "lowercase_letter", "the right letter, but typed in lower case (graded as is: wrong, with a format message)",
        [(CHOICE, "if text == CHOICE_OPTIONS[1]).lower()")],
        {"test_choice_letter"},
    ),
    # --- PostNormStack / PreNormStack ---
    mistake(
        "stacks_swapped", "PostNormStack computes Pre-Norm and PreNormStack computes Post-Norm",
        [(POST_FORWARD, "x = F.relu(layer(norm(x))) + x"),
         (PRE_FORWARD, POST_FORWARD)],
        STACK_VALUE_CHECKS, diagnosis="pre_post_swapped",
    ),
    mistake(
        "chapter_homework_definitions",
        "the chapter's swapped homework 3: 'Post-Norm' as x + F(Norm(x)), 'Pre-Norm' as x + Norm(F(x))",
        [(POST_FORWARD, "x = F.relu(layer(norm(x))) + x"),
         (PRE_FORWARD, "x = x + norm(F.relu(layer(x)))")],
        STACK_VALUE_CHECKS, diagnosis="chapter_definitions",
    ),
    mistake(
        "post_norm_on_branch", "PostNormStack puts the Norm at the branch's exit: x = x + norms[i](relu(layers[i](x)))",
        [(POST_FORWARD, "x = x + norm(F.relu(layer(x)))")],
        POST_VALUE_CHECKS, diagnosis="norm_on_branch",
    ),
    mistake(
        "pre_residual_dropped", "PreNormStack without the residual: x = relu(layers[i](norms[i](x)))",
        [(PRE_FORWARD, "x = F.relu(layer(norm(x)))")],
        PRE_VALUE_CHECKS, diagnosis="residual_dropped",
    ),
    mistake(
        "post_residual_dropped", "PostNormStack without the residual: x = norms[i](relu(layers[i](x)))",
        [(POST_FORWARD, "x = norm(F.relu(layer(x)))")],
        POST_VALUE_CHECKS, diagnosis="residual_dropped",
    ),
    mistake(
        "pre_normed_residual", "PreNormStack adds Norm(x) instead of x: h = norms[i](x); x = h + relu(layers[i](h))",
        [(PRE_FORWARD, "x = norm(x)\n            x = x + F.relu(layer(x))")],
        PRE_VALUE_CHECKS, diagnosis="residual_normed",
    ),
    mistake(
        "post_relu_after_add", "PostNormStack puts the ReLU after the residual sum: norms[i](relu(x + layers[i](x)))",
        [(POST_FORWARD, "x = norm(F.relu(x + layer(x)))")],
        POST_VALUE_CHECKS, diagnosis="relu_after_add",
    ),
    mistake(
        "pre_no_relu", "PreNormStack without the ReLU: x = x + layers[i](norms[i](x))",
        [(PRE_FORWARD, "x = x + layer(norm(x))")],
        PRE_VALUE_CHECKS, diagnosis="relu_missing",
    ),
    mistake(
        "shared_norm", "PreNormStack puts one LayerNorm object into `norms` num_layers times",
        [(PRE_INIT_NORMS, PRE_INIT_NORMS.replace(NORMS, "nn.ModuleList([nn.LayerNorm(d_model)] * num_layers)"))],
        {"test_stacks_layers_are_independent"} | PRE_VALUE_CHECKS, diagnosis="shared_norm",
    ),
    mistake(
        "single_norm_attribute", "PostNormStack has one `self.norm` used by every layer instead of a `norms` list",
        [("        self.norms = " + NORMS + "\n"
          "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
          "        for layer, norm in zip(self.layers, self.norms):\n            " + POST_FORWARD,
          "        self.norm = nn.LayerNorm(d_model)\n"
          "        ### END SOLUTION\n\n    def forward(self, x):\n        ### BEGIN SOLUTION\n"
          "        for layer in self.layers:\n            x = self.norm(x + F.relu(layer(x)))")],
        KEYS_CHECKS | {"test_postnorm_forward_backward_float64"},  # its own stack cannot take the weights
        diagnosis="shared_norm",
    ),
    mistake(
        "shared_linear", "PostNormStack puts one Linear object into `layers` num_layers times",
        [(POST_INIT, POST_INIT.replace(LINEARS, "nn.ModuleList([nn.Linear(d_model, d_model)] * num_layers)"))],
        # with one shared Linear, its own stack has no separate layers.i.weight gradients for layer_grad_norms
        {"test_stacks_layers_are_independent", "test_grad_norms_on_own_stacks"} | POST_VALUE_CHECKS,
        diagnosis="shared_linear",
    ),
    mistake(
        "linear_without_bias", "PreNormStack's Linear layers are built with bias=False",
        [(PRE_INIT_NORMS, PRE_INIT_NORMS.replace(LINEARS,
                                                 "nn.ModuleList([nn.Linear(d_model, d_model, bias=False) "
                                                 "for _ in range(num_layers)])"))],
        KEYS_CHECKS | {"test_prenorm_forward_backward_float64"}, diagnosis="linear_no_bias",
    ),
    mistake(
        "rmsnorm_norms", "PostNormStack uses nn.RMSNorm (no bias) in `norms` instead of nn.LayerNorm",
        [(POST_INIT, POST_INIT.replace(NORMS, "nn.ModuleList([nn.RMSNorm(d_model) for _ in range(num_layers)])"))],
        KEYS_CHECKS | {"test_postnorm_forward_backward_float64"}, diagnosis="norm_without_bias",
    ),
    # --- layer_grad_norms ---
    mistake(
        "grad_norms_of_bias", "layer_grad_norms returns the norms of layers[i].bias.grad",
        [(GRAD_NORMS, "return [layer.bias.grad.norm().item() for layer in model.layers]")],
        GRAD_VALUE_CHECKS, diagnosis="bias_grad",
    ),
    mistake(
        "grad_norms_reversed", "layer_grad_norms returns the output side first",
        [(GRAD_NORMS, "return [layer.weight.grad.norm().item() for layer in reversed(model.layers)]")],
        GRAD_VALUE_CHECKS, diagnosis="reversed_order",
    ),
    mistake(
        "grad_norms_of_all_params", "layer_grad_norms takes the norm of all of a layer's gradients (weight and bias)",
        [(GRAD_NORMS, "return [torch.cat([p.grad.flatten() for p in layer.parameters()]).norm().item() "
                      "for layer in model.layers]")],
        GRAD_VALUE_CHECKS, diagnosis="weight_and_bias",
    ),
    mistake(
        "norms_of_weights", "layer_grad_norms returns the norms of the weights, not of their gradients",
        [(GRAD_NORMS, "return [layer.weight.norm().item() for layer in model.layers]")],
        GRAD_VALUE_CHECKS, diagnosis="weight_not_grad",
    ),
    mistake(
        "squared_norms", "layer_grad_norms returns the sum of squares (no square root)",
        [(GRAD_NORMS, "return [(layer.weight.grad ** 2).sum().item() for layer in model.layers]")],
        GRAD_VALUE_CHECKS, diagnosis="squared_norm",
    ),
    mistake(
        "sum_loss", "the sum of squared errors instead of their mean",
        [("loss = F.mse_loss(model(x), target)", "loss = F.mse_loss(model(x), target, reduction=\"sum\")")],
        GRAD_VALUE_CHECKS, diagnosis="sum_loss",
    ),
    mistake(
        "sum_over_features", "the squared error summed over the last dim, then averaged over the rest",
        [("loss = F.mse_loss(model(x), target)", "loss = ((model(x) - target) ** 2).sum(dim=-1).mean()")],
        GRAD_VALUE_CHECKS, diagnosis="sum_last_dim",
    ),
    mistake(
        "grad_norms_as_tensors", "the norms are returned as 0-d tensors (no .item())",
        [(GRAD_NORMS, "return [layer.weight.grad.norm() for layer in model.layers]")],
        {"test_grad_norms_returns_list_of_floats"},
    ),
    mistake(
        "no_zero_grad", "layer_grad_norms does not clear old gradients: a second call accumulates",
        [("model.zero_grad(set_to_none=True)", "pass  # no zero_grad")],
        {"test_grad_norms_clears_old_gradients"}, diagnosis="no_zero_grad",
    ),
    # --- uncatalogued (no name; the hints localise them) ---
    mistake(
        "prenorm_half_branch", "PreNormStack scales the branch by a half: x = x + 0.5 * relu(layers[i](norms[i](x)))",
        [(PRE_FORWARD, "x = x + 0.5 * F.relu(layer(norm(x)))")],
        PRE_VALUE_CHECKS,
    ),
    mistake(
        "grad_norms_half_loss", "layer_grad_norms halves the MSE loss: every norm is half the right one",
        [("loss = F.mse_loss(model(x), target)", "loss = 0.5 * F.mse_loss(model(x), target)")],
        GRAD_VALUE_CHECKS,
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
