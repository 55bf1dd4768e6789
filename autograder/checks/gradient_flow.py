"""Checks of the gradient_flow assignment: the multiple-choice letter, PostNormStack / PreNormStack, layer_grad_norms.

Inputs: batch >= 2 with different rows and an extra leading dim; every weight random and non-unit, including the
LayerNorm weight and bias, and different in every layer (so a LayerNorm or Linear shared across layers is visible);
Linear weights of scale 1/sqrt(d_model), so the branch relu(Linear(x)) is about as large as x and dropping the
residual, swapping the two structures or moving the Norm or the ReLU changes the output by O(1). The probe net of
layer_grad_norms has numel(target) != d_model != 2, so every loss scaling and the accumulated second call differ.

Naming (VARIANTS): a wrong letter names the wrong option's misconception; a stack output is compared with the
catalogued wrong structures on the same input and weights (the chapter's swapped homework definitions are told
apart from a plain swap by one probe of the other class); parameter names that do not fit are named from the keys;
layer_grad_norms' numbers are compared with the catalogued slips. When nothing matches, a stack's fault is localised
with one single-layer probe (right for one layer: the loop; else a property of that one layer's output) and a
layer_grad_norms result that is the right one times a common factor is said to be a scaling of the loss.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.catalogue.gradient_flow import PRE, VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (
    F32, F64, CheckFailed, ParamKeys, attempt, check, expect_module_matches, expect_numbers, expect_parameters,
    expect_true, expect_weights_loaded, is_float_tensor, is_number, match_variant, module_arg, probe_net_arg,
    module_round_trip, reference_with, same_values,
)
from autograder.checks.diagnosis import named
from autograder.checks.probes import describe_value
from solutions import gradient_flow as ref
from solutions.student_params import student_answers

CLASSES = ("PostNormStack", "PreNormStack")
GRAD_REL = 1e-9  # layer_grad_norms is computed in float64 on both sides



# --- inputs ---------------------------------------------------------------------------------------


def stack_weights(rng, d_model, num_layers, dtype=torch.float64) -> dict:
    """Random weights by the pinned names: Linear ~ 1/sqrt(d), LayerNorm gamma in [0.5, 1.5), beta ~ 0.3."""
    state = {}
    for i in range(num_layers):
        state[f"layers.{i}.weight"] = torch.randn(d_model, d_model, generator=rng, dtype=dtype) / math.sqrt(d_model)
        state[f"layers.{i}.bias"] = 0.2 * torch.randn(d_model, generator=rng, dtype=dtype)
        state[f"norms.{i}.weight"] = 0.5 + torch.rand(d_model, generator=rng, dtype=dtype)
        state[f"norms.{i}.bias"] = 0.3 * torch.randn(d_model, generator=rng, dtype=dtype)
    return state


def expected_param_shapes(d_model: int, num_layers: int) -> dict:
    shapes = {}
    for i in range(num_layers):
        shapes[f"layers.{i}.weight"] = [d_model, d_model]
        shapes[f"layers.{i}.bias"] = [d_model]
        shapes[f"norms.{i}.weight"] = [d_model]
        shapes[f"norms.{i}.bias"] = [d_model]
    return shapes


# --- the stacks' known-wrong variants --------------------------------------------------------------

RIGHT = {"PostNormStack": "post", "PreNormStack": "pre"}
OTHER = {"PostNormStack": "PreNormStack", "PreNormStack": "PostNormStack"}
# formula -> variant, per class (the formulas a student of that class could write for that mistake)
STACK_FORMULAS = {
    "PostNormStack": {"pre": "pre_post_swapped", "third": "norm_on_branch", "post_no_residual": "residual_dropped",
                      "post_relu_after_add": "relu_after_add", "post_no_relu": "relu_missing"},
    "PreNormStack": {"post": "pre_post_swapped", "third": "norm_on_branch", "pre_no_residual": "residual_dropped",
                     "pre_normed_residual": "residual_normed", "pre_relu_after_add": "relu_after_add",
                     "pre_no_relu": "relu_missing"},
}
# what the student's other class computes when both follow the chapter's homework 3 (swapped) definitions
CHAPTER = {"PostNormStack": "pre", "PreNormStack": "third"}


def variant_forward(kind: str, x: torch.Tensor, state: dict, num_layers: int, shared: str | None = None):
    """A stack of `kind` in float64; `shared` ("norms" or "layers"): every layer uses the last one's weights, which
    is what one module put into the ModuleList several times holds after load_state_dict."""
    x = x.double()
    d_model = x.shape[-1]
    last = num_layers - 1
    for i in range(num_layers):
        j, k = (last if shared == "layers" else i), (last if shared == "norms" else i)
        W, b = state[f"layers.{j}.weight"].double(), state[f"layers.{j}.bias"].double()
        gamma, beta = state[f"norms.{k}.weight"].double(), state[f"norms.{k}.bias"].double()

        def norm(h):
            return F.layer_norm(h, (d_model,), gamma, beta, 1e-5)

        def linear(h):
            return F.linear(h, W, b)

        if kind == "post":
            x = norm(x + F.relu(linear(x)))
        elif kind == "pre":
            x = x + F.relu(linear(norm(x)))
        elif kind == "third":
            x = x + norm(F.relu(linear(x)))
        elif kind == "post_no_residual":
            x = norm(F.relu(linear(x)))
        elif kind == "pre_no_residual":
            x = F.relu(linear(norm(x)))
        elif kind == "pre_normed_residual":
            h = norm(x)
            x = h + F.relu(linear(h))
        elif kind == "post_relu_after_add":
            x = norm(F.relu(x + linear(x)))
        elif kind == "pre_relu_after_add":
            x = F.relu(x + linear(norm(x)))
        elif kind == "post_no_relu":
            x = norm(x + linear(x))
        elif kind == "pre_no_relu":
            x = x + linear(norm(x))
        else:
            raise ValueError(kind)
    return x


def forward_only(student, class_name: str, d_model: int, num_layers: int, x: torch.Tensor, state: dict):
    """The student's `class_name` output on `x` with `state` loaded, or None when it cannot give one."""
    run = attempt(student.module, class_name, (d_model, num_layers), state_dict=state, dtype=x.dtype,
                  method="forward", args=(x,))
    if run is None or run.load_error or run.missing_keys or run.unexpected_keys \
            or not isinstance(run.outputs, torch.Tensor):
        return None
    return run.outputs


def stack_variants(student, actual, class_name: str, x: torch.Tensor, state: dict, num_layers: int, tol):
    """variants(): (name, output) of the catalogued structures on this input and weights. The chapter's swapped
    definitions give one class the plain swap: that candidate is named chapter_definitions when `actual` shows it
    and one probe of the other class shows the chapter's definition there too."""
    def variants():
        found = []
        with torch.no_grad():
            for kind, name in STACK_FORMULAS[class_name].items():
                candidate = variant_forward(kind, x, state, num_layers)
                if kind == CHAPTER[class_name] and same_values(actual, candidate, tol):
                    other = OTHER[class_name]
                    theirs = forward_only(student, other, x.shape[-1], num_layers, x, state)
                    if theirs is not None and same_values(theirs, variant_forward(CHAPTER[other], x, state, num_layers),
                                                          tol):
                        name = "chapter_definitions"
                found.append((name, candidate))
            for shared, name in (("norms", "shared_norm"), ("layers", "shared_linear")):
                found.append((name, variant_forward(RIGHT[class_name], x, state, num_layers, shared)))
        return found
    return variants


def key_mistakes(d_model: int, num_layers: int) -> dict:
    """The catalogued mistakes the module's parameter names show: a Linear or a Norm without bias, one Norm for all."""
    expected = expected_param_shapes(d_model, num_layers)
    linear = {k for k in expected if k.startswith("layers.")}
    linear_biases = {f"layers.{i}.bias" for i in range(num_layers)}
    norm_keys = set(expected) - linear

    def linears_right(k: ParamKeys) -> bool:
        return linear <= set(k.shapes) and all(k.shapes[n] == expected[n] for n in linear)

    def linear_no_bias(k: ParamKeys) -> bool:
        return set(k.shapes) == set(expected) - linear_biases and all(k.shapes[n] == expected[n] for n in k.shapes)

    def norm_without_bias(k: ParamKeys) -> bool:
        rest = set(k.shapes) - linear
        per_layer = [[n for n in rest if n.startswith(f"norms.{i}.")] for i in range(num_layers)]
        return (linears_right(k) and rest.isdisjoint(norm_keys - {f"norms.{i}.weight" for i in range(num_layers)})
                and all(len(ns) == 1 and k.shapes[ns[0]] == [d_model] for ns in per_layer)
                and sum(len(ns) for ns in per_layer) == len(rest))

    def shared_norm(k: ParamKeys) -> bool:  # one `self.norm` for all layers
        rest = set(k.shapes) - linear
        if not linears_right(k) or any(n.startswith("norms.") for n in rest) or len(rest) != 2:
            return False
        prefixes = {n.rsplit(".", 1)[0] for n in rest}
        return (len(prefixes) == 1 and "." not in next(iter(prefixes))
                and {n.rsplit(".", 1)[1] for n in rest} == {"weight", "bias"} and all(k.shapes[n] == [d_model] for n in rest))

    return {"linear_no_bias": linear_no_bias, "norm_without_bias": norm_without_bias, "shared_norm": shared_norm}


def localise_stack(student, class_name: str, x: torch.Tensor, state: dict, tol, actual, expected) -> str:
    """Where the fault is, when a finite output of the right shape and dtype matches nothing catalogued (shape, dtype
    and NaN are said by the comparison itself): one probe with a single layer."""
    if not (is_float_tensor(actual, expected.shape) and actual.dtype == expected.dtype):
        return ""
    one = {k: v for k, v in state.items() if k.startswith(("layers.0.", "norms.0."))}
    y = forward_only(student, class_name, x.shape[-1], 1, x, one)
    if y is None or y.shape != x.shape or not y.dtype.is_floating_point or not torch.isfinite(y).all():
        return ""
    y, x64 = y.detach().double(), x.double()
    right = variant_forward(RIGHT[class_name], x, one, 1)
    if bool(((y - right).abs() <= tol.atol + tol.rtol * right.abs()).all()):
        return (f"只有 1 层时你的 {class_name} 输出正确，叠成多层才不对：检查 forward 里的循环——第 i 层用 layers[i] 和 "
                "norms[i]，输入是上一层的输出，每一层都要执行")
    if class_name == "PostNormStack":
        z = (y - one["norms.0.bias"].double()) / one["norms.0.weight"].double()
        is_norm = bool(z.mean(-1).abs().max() < 1e-4 and (z.std(-1, unbiased=False) - 1).abs().max() < 1e-3)
        if is_norm:
            return ("只有 1 层时输出就不对。输出确实是 norms[0](...) 的结果（每一行减去 β、除以 γ 后均值为 0、方差为 1），"
                    "所以问题在送进 Norm 的东西：应该是 x + relu(layers[0](x))")
        return ("只有 1 层时输出就不对，而且输出不是 norms[0](...) 的结果（每一行减去 β、除以 γ 后均值不为 0 或方差不为 1）："
                "Post-Norm 每层的最后一步是 norms[i](...)")
    if bool(((y - x64) < -1e-6).any()):
        return ("只有 1 层时输出就不对：y - x 里有负数，而 Pre-Norm 每层是 x 本身加上一个 relu(...) 分支（≥ 0）："
                "残差原样加回 x，ReLU 是分支的最后一步")
    return "只有 1 层时输出就不对：问题出在单层的公式里，Pre-Norm 每层是 x = " + PRE


def check_stack_module(student, class_name: str, d_model: int, num_layers: int, x: torch.Tensor, state: dict,
                       grad=None):
    """Student's `class_name` with `state` loaded: forward (and backward with `grad`) against the reference."""
    kwargs = dict(grad_outputs=[grad], requires_grad=[0]) if grad is not None else {}
    run, expected = module_round_trip(student, ref, class_name, (d_model, num_layers), weights=state, args=(x,),
                                      dtype=x.dtype, **kwargs)
    tol = F64 if x.dtype == torch.float64 else F32
    expect_module_matches(run, expected, tol, class_name, outputs=f"{class_name} 的输出",
                          variants=stack_variants(student, run.outputs, class_name, x, state, num_layers, tol),
                          hint=lambda actual, expected: localise_stack(student, class_name, x, state, tol, actual, expected),
                          keys=key_mistakes(d_model, num_layers))


# --- layer_grad_norms -----------------------------------------------------------------------------


class _ProbeNet(nn.Module):
    """The sandbox's probe net (autograder.running.sandbox.probe_server.Runner.probe_net), rebuilt here for the expected values."""

    def __init__(self, d_model, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x


def probe_net_weights(rng, d_model, num_layers, dtype=torch.float64) -> dict:
    state = {}
    for i in range(num_layers):
        scale = 1.5 / math.sqrt(d_model)
        state[f"layers.{i}.weight"] = scale * torch.randn(d_model, d_model, generator=rng, dtype=dtype)
        state[f"layers.{i}.bias"] = 0.3 * torch.randn(d_model, generator=rng, dtype=dtype)
    return state


def as_floats(value):
    """Lenient view of a returned list for the value checks: 0-d / one-element tensors become floats.

    Whether the list holds Python floats is checked (and scored) separately.
    """
    if isinstance(value, torch.Tensor) and value.dim() == 1:
        return [float(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [float(v.reshape(-1)[0]) if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in value]
    return value


def grad_truth(weights: dict, weight_grads: list, bias_grads: list, target: torch.Tensor) -> dict:
    """What the catalogued slips of layer_grad_norms need: the layers' weights and gradients, the loss's shape."""
    return {"w": [g.norm().item() for g in weight_grads], "b": [g.norm().item() for g in bias_grads],
            "p": [weights[f"layers.{i}.weight"].norm().item() for i in range(len(weight_grads))],
            "numel": target.numel(), "d_model": target.shape[-1]}


def grad_norm_variants(truth: dict) -> list:
    """(name, the numbers that slip of layer_grad_norms returns)."""
    w, b = truth["w"], truth["b"]
    return [
        ("reversed_order", w[::-1]),
        ("bias_grad", b),
        ("weight_and_bias", [math.sqrt(u * u + v * v) for u, v in zip(w, b)]),
        ("weight_not_grad", truth["p"]),
        ("squared_norm", [v * v for v in w]),
        ("sum_loss", [v * truth["numel"] for v in w]),
        ("sum_last_dim", [v * truth["d_model"] for v in w]),
    ]


def localise_grad_norms(actual, expected: list) -> str:
    """Honest localisation when no slip matches: every entry off by one common factor is a scaling of the loss."""
    if not (isinstance(actual, list) and all(map(is_number, actual))) or len(actual) != len(expected) or not all(e > 0 for e in expected):
        return ""
    ratios = [a / e for a, e in zip(actual, expected)]
    if all(math.isclose(r, ratios[0], rel_tol=1e-6) for r in ratios) and not math.isclose(ratios[0], 1, rel_tol=1e-6):
        return ("每一项都是正确值的同一个倍数：各层之间的相对大小是对的，整体缩放不对——检查 loss 的写法"
                "（MSE loss 对所有元素取平均）和范数的算法")
    return ""


def check_grad_norms(actual, expected: list, truth: dict, what: str):
    """`actual` (already as_floats) equals `expected`; else the slip it matches, or where it goes wrong."""
    expect_numbers(actual, expected, what, rel=GRAD_REL, variants=lambda: grad_norm_variants(truth),
                   hint=localise_grad_norms)


def reference_grad_norms(state, d_model, num_layers, x, target):
    """The right answer on the probe net, and what the slips need."""
    net = reference_with(_ProbeNet(d_model, num_layers), state, x.dtype)
    weights = ref.layer_grad_norms(net, x, target)
    truth = grad_truth(state, [layer.weight.grad for layer in net.layers], [layer.bias.grad for layer in net.layers],
                       target)
    return weights, truth


# --- gradient_flow_choice -------------------------------------------------------------------------

# index into CHOICE_OPTIONS -> the misconception of that option
CHOICE_VARIANTS = {0: "choice_norm_after_sublayer", 2: "choice_postnorm_no_residual", 3: "choice_fewer_params"}


@check("gradient_flow_choice", points=2)
def test_choice_letter(student, student_id):
    """选择题 answer 是按你的学号打乱后正确选项的字母（一个大写字母，原样比较）"""
    answer = student.variable("answer")
    expect_true(isinstance(answer, str), f"`answer` 应该是一个字符串，例如 \"A\"，你的是 {describe_value(answer)}")
    if answer not in ("A", "B", "C", "D"):
        if answer.strip().strip(".。").upper() in ("A", "B", "C", "D"):
            raise CheckFailed(
                f"`answer` 应该恰好是一个大写字母（\"A\"、\"B\"、\"C\" 或 \"D\"），你的是 {answer!r}："
                "不要小写、空格或标点。评分按原样比较，所以这一题不得分",
                {"format": "letter with case or padding"})
        raise CheckFailed(f"`answer` 应该是 \"A\"、\"B\"、\"C\"、\"D\" 中的一个大写字母，你的是 {answer[:20]!r}",
                          {"format": "not a letter"})
    if answer != student_answers("gradient_flow", student_id)["answer"]:
        failure = CheckFailed(f"你选的 {answer} 不是最准确的解释。注意选项顺序由学号决定，评分按学号 {student_id} 的顺序核对"
                              "（在自己电脑上做题时，STUDENT_ID 要填你自己的学号）")
        chosen = ref.CHOICE_OPTIONS.index(ref.choice_options(student_id)[answer])
        raise named(failure, VARIANTS.get(CHOICE_VARIANTS.get(chosen, "")))


# --- norm_stacks ----------------------------------------------------------------------------------


@check("norm_stacks", points=0.5)
def test_stacks_parameter_names(student):
    """PostNormStack(d_model, num_layers) 和 PreNormStack 的参数名和形状符合约定：layers.i.weight/bias、norms.i.weight/bias"""
    expected = expected_param_shapes(12, 3)
    for class_name in CLASSES:
        expect_parameters(student.module(class_name, (12, 3)).param_shapes, expected, f"{class_name}(12, 3)",
                          keys=key_mistakes(12, 3))


@check("norm_stacks", points=0.5)
def test_stacks_layers_are_independent(student, rng):
    """每一层有自己的 Linear 和 LayerNorm：只换掉第 0 层加载进去的权重，输出就会变（float64）"""
    # judged by behaviour, never by the module's own state_dict() (which it can forge): one module put into the
    # ModuleList several times ends up holding the last layer's weights, so what is loaded into layer 0 is lost
    state = stack_weights(rng, 10, 4)
    x = torch.randn(3, 5, 10, generator=rng, dtype=torch.float64)
    other = stack_weights(rng, 10, 4)
    for class_name in CLASSES:
        run = student.module(class_name, (10, 4), state_dict=state, dtype=torch.float64, method="forward", args=(x,))
        expect_weights_loaded(run, class_name, keys=key_mistakes(10, 4))
        expect_true(isinstance(run.outputs, torch.Tensor) and run.outputs.shape == x.shape,
                    f"{class_name} 的输出应该是形状 {list(x.shape)} 的张量", {"class": class_name})
        for kind, variant in (("norms", "shared_norm"), ("layers", "shared_linear")):
            changed = dict(state, **{k: v for k, v in other.items() if k.startswith(f"{kind}.0.")})
            again = student.module(class_name, (10, 4), state_dict=changed, dtype=torch.float64, method="forward",
                                   args=(x,)).outputs
            unchanged = isinstance(again, torch.Tensor) and again.shape == x.shape and torch.equal(again, run.outputs)
            if unchanged:  # named only if the output is that sharing's (and not another structure's)
                shown = match_variant(run.outputs, variant_forward(RIGHT[class_name], x, state, 4),
                                      stack_variants(student, run.outputs, class_name, x, state, 4, F64),
                                      lambda a, c: same_values(a, c, F64))
            expect_true(not unchanged, f"{class_name}：换掉第 0 层 {kind}（{'LayerNorm' if kind == 'norms' else 'Linear'}）"
                        "加载进去的权重后输出完全没变：各层是否共用了同一个模块？",
                        {"class": class_name, "unchanged_by": f"{kind}.0"},
                        diagnosis=variant if unchanged and shown is not None and shown.name == variant else None)


def _stack_probe(rng):
    state = stack_weights(rng, 12, 4)
    x = torch.randn(3, 5, 12, generator=rng, dtype=torch.float64)
    grad = torch.randn(3, 5, 12, generator=rng, dtype=torch.float64)
    return state, x, grad


@check("norm_stacks", points=1.25)
def test_postnorm_forward_backward_float64(student, rng):
    """PostNormStack 加载给定权重后，输出、输入的梯度和每个参数的梯度都与参考实现一致（float64，多个 batch 维）"""
    state, x, grad = _stack_probe(rng)
    check_stack_module(student, "PostNormStack", 12, 4, x, state, grad)


@check("norm_stacks", points=1.25)
def test_prenorm_forward_backward_float64(student, rng):
    """PreNormStack 加载给定权重后，输出、输入的梯度和每个参数的梯度都与参考实现一致（float64，多个 batch 维）"""
    state, x, grad = _stack_probe(rng)
    check_stack_module(student, "PreNormStack", 12, 4, x, state, grad)


@check("norm_stacks", points=0.5)
def test_stacks_forward_float32_unbatched(student, rng):
    """两个类在 float32、没有 batch 维的输入 [seq, d_model] 上 forward 与参考实现一致"""
    state = stack_weights(rng, 16, 3, torch.float32)
    x = torch.randn(6, 16, generator=rng)
    for class_name in CLASSES:
        check_stack_module(student, class_name, 16, 3, x, state)


# --- layer_grad_norms -----------------------------------------------------------------------------


@check("layer_grad_norms", points=1.5)
def test_grad_norms_match_reference(student, rng):
    """在一个有 layers 的模型上，每层 weight 梯度的 L2 范数与参考实现一致（float64，MSE loss，输入侧在前）"""
    d_model, num_layers = 10, 5
    state = probe_net_weights(rng, d_model, num_layers)
    x = torch.randn(4, 3, d_model, generator=rng, dtype=torch.float64)
    target = torch.randn(4, 3, d_model, generator=rng, dtype=torch.float64)
    weights, truth = reference_grad_norms(state, d_model, num_layers, x, target)
    actual = as_floats(student.call("layer_grad_norms", probe_net_arg(state, d_model, num_layers), x, target))
    check_grad_norms(actual, weights, truth, "layer_grad_norms 的返回值")


@check("layer_grad_norms", points=0.5)
def test_grad_norms_clears_old_gradients(student, rng):
    """在同一个模型上连续调用两次，两次结果相同、都正确（先清掉旧的梯度）"""
    d_model, num_layers = 8, 3
    state = probe_net_weights(rng, d_model, num_layers)
    x = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    target = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    weights, truth = reference_grad_norms(state, d_model, num_layers, x, target)
    first, second = student.call_repeatedly(2, "layer_grad_norms", probe_net_arg(state, d_model, num_layers), x, target)
    check_grad_norms(as_floats(first), weights, truth, "第一次调用的返回值")
    expect_numbers(as_floats(second), weights, "同一个模型上第二次调用的返回值（第一次调用的结果正确）", rel=GRAD_REL,
                   variants=[("no_zero_grad", [2 * v for v in weights])], hint="上一次调用在模型上留下了影响结果的状态")


@check("layer_grad_norms", points=1)
def test_grad_norms_returns_list_of_floats(student, rng):
    """返回 Python float 组成的 list，长度等于层数（张量要用 .item() 转成 float）"""
    d_model, num_layers = 6, 3
    state = probe_net_weights(rng, d_model, num_layers)
    x = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    target = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    actual = student.call("layer_grad_norms", probe_net_arg(state, d_model, num_layers), x, target)
    expect_true(type(actual) is list, f"layer_grad_norms 应该返回 list，你返回的是 {type(actual).__name__}",
                {"type": type(actual).__name__})
    expect_true(len(actual) == num_layers, f"{num_layers} 层的模型应该返回 {num_layers} 个数，你返回了 {len(actual)} 个",
                {"length": len(actual)})
    kinds = sorted({type(v).__name__ for v in actual if type(v) is not float})
    expect_true(not kinds, f"list 里的每一项都应该是 Python float，你的里面有 {kinds}（张量可以用 .item() 转换）",
                {"element_types": kinds})


@check("layer_grad_norms", points=1)
def test_grad_norms_on_own_stacks(student, rng):
    """用在你自己的 PostNormStack 和 PreNormStack 上时，结果与你的模型反向传播得到的 layers[i].weight 梯度一致"""
    d_model, num_layers = 8, 3
    x = torch.randn(2, 4, d_model, generator=rng, dtype=torch.float64)
    target = torch.randn(2, 4, d_model, generator=rng, dtype=torch.float64)
    for class_name in CLASSES:
        state = stack_weights(rng, d_model, num_layers)
        # the student's own module, the student's own forward: only layer_grad_norms is judged here
        run = student.module(class_name, (d_model, num_layers), state_dict=state, dtype=torch.float64,
                             method="forward", args=(x,))
        usable = (not run.load_error and not run.missing_keys and not run.unexpected_keys
                  and isinstance(run.outputs, torch.Tensor) and run.outputs.shape == target.shape
                  and run.outputs.dtype == torch.float64)
        expect_true(usable, f"这一项在你自己的 {class_name} 上检查 layer_grad_norms，但你的 {class_name} 不能按约定的参数名"
                    "加载权重、对 [2, 4, 8] 的 float64 输入给出同形状的输出：请先完成第 2 部分")
        grad = 2 * (run.outputs - target) / target.numel()  # d mse_loss / d output
        run = student.module(class_name, (d_model, num_layers), state_dict=state, dtype=torch.float64,
                             method="forward", args=(x,), grad_outputs=[grad])
        own = [run.param_grads.get(f"layers.{i}.{p}") for i in range(num_layers) for p in ("weight", "bias")]
        expect_true(all(isinstance(g, torch.Tensor) for g in own),
                    f"你的 {class_name} 的 layers.i.weight 和 layers.i.bias 没有全部得到梯度：请先完成第 2 部分")
        truth = grad_truth(state, own[0::2], own[1::2], target)
        actual = as_floats(student.call("layer_grad_norms", module_arg(class_name, d_model, num_layers,
                                                                       state_dict=state, dtype=torch.float64),
                                        x, target))
        check_grad_norms(actual, truth["w"], truth, f"layer_grad_norms(你的 {class_name}, x, target)")
