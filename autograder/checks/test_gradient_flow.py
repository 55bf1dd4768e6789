"""Checks of the gradient_flow assignment: the multiple-choice letter, PostNormStack / PreNormStack, layer_grad_norms.

Inputs: batch >= 2 with different rows and an extra leading dim; every weight random and non-unit, including the
LayerNorm weight and bias, and different in every layer (so a LayerNorm shared across layers is visible); Linear
weights of scale 1/sqrt(d_model), so the branch relu(Linear(x)) is about as large as x and dropping the residual,
swapping the two structures or moving the Norm changes the output by O(1).

Not checked: that layer_grad_norms clears old gradients. Every probe materialises a fresh model, whose .grad fields
are all None, so a function without zero_grad gives the right answer here; the probe API has no way to call the
student's function twice on one model or to hand it a model with stale gradients.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from autograder.checks import (
    F32, F64, CheckFailed, check, expect_module_matches, expect_numbers, expect_true, module_arg,
    probe_net_arg, run_reference,
)
from autograder.probes import describe_value
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


def reference_stack(class_name: str, d_model: int, num_layers: int, state: dict, dtype=torch.float64) -> nn.Module:
    module = getattr(ref, class_name)(d_model, num_layers).to(dtype)
    module.load_state_dict(state)
    return module


def expected_param_shapes(d_model: int, num_layers: int) -> dict:
    shapes = {}
    for i in range(num_layers):
        shapes[f"layers.{i}.weight"] = [d_model, d_model]
        shapes[f"layers.{i}.bias"] = [d_model]
        shapes[f"norms.{i}.weight"] = [d_model]
        shapes[f"norms.{i}.bias"] = [d_model]
    return shapes


# --- known-wrong variants, to name the mistake when a comparison fails -------------------------------

# (formula, what the student most likely did); `shared`: every layer uses the last norm's weights, which is what a
# single LayerNorm put into `norms` several times holds after load_state_dict
_STACK_VARIANTS = {
    "post": "Post-Norm：x = norms[i](x + relu(layers[i](x)))",
    "pre": "Pre-Norm：x = x + relu(layers[i](norms[i](x)))",
    "third": "第三种变体：x = x + norms[i](relu(layers[i](x)))（Norm 在分支出口，既不是 Pre-Norm 也不是 Post-Norm）",
    "post_no_residual": "丢了残差：x = norms[i](relu(layers[i](x)))",
    "pre_no_residual": "丢了残差：x = relu(layers[i](norms[i](x)))",
    "pre_normed_residual": "残差加的是 Norm(x) 而不是 x 本身：h = norms[i](x); x = h + relu(layers[i](h))",
    "post_relu_after_add": "ReLU 放在了相加之后：x = norms[i](relu(x + layers[i](x)))",
}


def _variant_forward(kind: str, x: torch.Tensor, state: dict, num_layers: int, shared: bool = False) -> torch.Tensor:
    d_model = x.shape[-1]
    for i in range(num_layers):
        j = num_layers - 1 if shared else i
        W, b = state[f"layers.{i}.weight"], state[f"layers.{i}.bias"]
        gamma, beta = state[f"norms.{j}.weight"], state[f"norms.{j}.bias"]

        def norm(h):
            return F.layer_norm(h, (d_model,), gamma, beta, 1e-5)

        def branch(h):
            return F.relu(F.linear(h, W, b))

        if kind == "post":
            x = norm(x + branch(x))
        elif kind == "pre":
            x = x + branch(norm(x))
        elif kind == "third":
            x = x + norm(branch(x))
        elif kind == "post_no_residual":
            x = norm(branch(x))
        elif kind == "pre_no_residual":
            x = branch(norm(x))
        elif kind == "pre_normed_residual":
            h = norm(x)
            x = h + branch(h)
        elif kind == "post_relu_after_add":
            x = norm(F.relu(x + F.linear(x, W, b)))
        else:
            raise ValueError(kind)
    return x


def diagnose_stack(actual, class_name: str, x: torch.Tensor, state: dict, num_layers: int) -> str | None:
    """The catalogued structure the student's output matches, if any (None when it matches nothing we know)."""
    if not isinstance(actual, torch.Tensor) or actual.shape != x.shape or actual.dtype != x.dtype:
        return None
    right = "post" if class_name == "PostNormStack" else "pre"
    tol = 1e-6 if x.dtype == torch.float64 else 1e-4
    with torch.no_grad():
        for shared in (False, True):
            for kind, text in _STACK_VARIANTS.items():
                if kind == right and not shared:
                    continue
                candidate = _variant_forward(kind, x, state, num_layers, shared)
                if torch.allclose(actual, candidate, rtol=tol, atol=tol):
                    if kind == right:
                        return ("公式对，但每一层用的都是同一组 LayerNorm 参数：norms 里是不是放了同一个 "
                                "nn.LayerNorm 对象多次？每层要各自构造一个")
                    what = f"你的 {class_name} 的输出与这种写法一致——{text}"
                    if {kind, right} == {"post", "pre"}:
                        what += "。PostNormStack 和 PreNormStack 写反了？"
                    if shared:
                        what += "；而且各层共用了同一个 LayerNorm"
                    return what
    return None


def check_stack_module(student, class_name: str, d_model: int, num_layers: int, x: torch.Tensor, state: dict,
                       grad=None):
    """Student's `class_name` with `state` loaded: forward (and backward with `grad`) against the reference."""
    reference = reference_stack(class_name, d_model, num_layers, state, x.dtype)
    kwargs = dict(grad_outputs=[grad], requires_grad=[0]) if grad is not None else {}
    expected = run_reference(reference, (x,), **kwargs)
    run = student.module(class_name, (d_model, num_layers), state_dict=state, dtype=x.dtype, method="forward",
                         args=(x,), **kwargs)
    tol = F64 if x.dtype == torch.float64 else F32
    try:
        expect_module_matches(run, expected, tol, class_name, outputs=f"{class_name} 的输出")
    except CheckFailed as failure:
        if failure.diagnosis is None and run.outputs is not None:
            failure.diagnosis = diagnose_stack(run.outputs, class_name, x, state, num_layers)
        raise


class _ProbeNet(nn.Module):
    """The sandbox's probe net (autograder.sandbox.runner.Runner.probe_net), rebuilt here for the expected values."""

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


def diagnose_grad_norms(actual, weight_norms: list[float], bias_norms: list[float], numel: int,
                        d_model: int) -> str | None:
    """Which catalogued slip of layer_grad_norms the returned numbers match, if any."""
    if not isinstance(actual, list) or len(actual) != len(weight_norms):
        return None
    if not all(isinstance(v, float) for v in actual):
        return None
    variants = [
        (weight_norms[::-1], "顺序反了：第 0 项应该对应 layers[0]（输入侧），不是最后一层"),
        (bias_norms, "返回的是 layers[i].bias 的梯度范数，应该是 layers[i].weight 的"),
        (bias_norms[::-1], "返回的是 bias 的梯度范数，而且顺序反了"),
        ([v * numel for v in weight_norms], "loss 用的是平方误差之和（reduction='sum'），应该是 F.mse_loss 默认的平均"),
        ([v * d_model for v in weight_norms], "loss 只对最后一维求和、再对其余维取平均，应该对所有元素取平均"),
        ([v * v for v in weight_norms], "返回的是范数的平方，应该是 L2 范数本身"),
        ([2 * v for v in weight_norms], "结果是正确值的 2 倍：是不是梯度累加了两次（没有先清旧梯度），或 loss 多乘了 2？"),
    ]
    for candidate, text in variants:
        if all(math.isclose(a, e, rel_tol=1e-6) for a, e in zip(actual, candidate)):
            return text
    return None


def reference_grad_norms(state, d_model, num_layers, x, target):
    net = _ProbeNet(d_model, num_layers).to(x.dtype)
    net.load_state_dict(state)
    weights = ref.layer_grad_norms(net, x, target)
    biases = [layer.bias.grad.norm().item() for layer in net.layers]
    return weights, biases


# --- gradient_flow_choice -------------------------------------------------------------------------


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
    expect_true(answer == student_answers("gradient_flow", student_id)["answer"],
                f"你选的 {answer} 不是最准确的解释。注意选项顺序由学号决定，评分按学号 {student_id} 的顺序核对"
                "（在自己电脑上做题时，STUDENT_ID 要填你自己的学号）")


# --- norm_stacks ----------------------------------------------------------------------------------


@check("norm_stacks", points=0.5)
def test_stacks_parameter_names(student):
    """PostNormStack(d_model, num_layers) 和 PreNormStack 的参数名和形状符合约定：layers.i.weight/bias、norms.i.weight/bias"""
    expected = expected_param_shapes(12, 3)
    for class_name in CLASSES:
        run = student.module(class_name, (12, 3))
        shapes = run.param_shapes
        extra, missing = sorted(set(shapes) - set(expected)), sorted(set(expected) - set(shapes))
        expect_true(not extra and not missing,
                    f"{class_name}(12, 3) 的参数名不符合约定：多出 {extra[:6]}，缺少 {missing[:6]}",
                    {"class": class_name, "extra": extra, "missing": missing})
        wrong = sorted(k for k in expected if shapes[k] != expected[k])
        expect_true(not wrong, f"{class_name}(12, 3) 里这些参数的形状不对：{wrong[:6]}（应该是 nn.Linear(d_model, d_model) "
                    "和 nn.LayerNorm(d_model)）", {"class": class_name, "wrong_shapes": wrong})


@check("norm_stacks", points=0.5)
def test_stacks_layers_are_independent(student, rng):
    """每一层有自己的 Linear 和 LayerNorm：按名字加载各不相同的权重后，每个参数都是加载进去的值"""
    state = stack_weights(rng, 10, 4)
    for class_name in CLASSES:
        run = student.module(class_name, (10, 4), state_dict=state, dtype=torch.float64, return_state=True)
        if run.load_error:
            raise CheckFailed(f"无法把权重加载进你的 `{class_name}`：{run.load_error[:200]}")
        missing = sorted(k for k in state if k not in (run.state or {}))
        expect_true(not missing, f"{class_name} 缺少约定的参数 {missing[:6]}", {"class": class_name, "missing": missing})
        for name, loaded in state.items():
            got = run.state[name]
            if got.shape == loaded.shape and torch.equal(got.to(loaded.dtype), loaded):
                continue
            kind, index, _ = name.split(".")
            twin = next((other for other in range(4) if other != int(index)
                         and torch.equal(got.to(loaded.dtype), state[f"{kind}.{other}.{name.split('.')[-1]}"])), None)
            if twin is not None:
                raise CheckFailed(
                    f"{class_name}：加载权重后 {kind}.{index} 的参数变成了 {kind}.{twin} 的：{kind} 里放的是同一个对象"
                    f"（例如 [nn.LayerNorm(d_model)] * num_layers），每一层要各自构造一个",
                    {"class": class_name, "parameter": name, "same_as": f"{kind}.{twin}"})
            raise CheckFailed(f"{class_name}：加载权重后参数 `{name}` 不是加载进去的值", {"class": class_name,
                                                                                       "parameter": name})


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
    weights, biases = reference_grad_norms(state, d_model, num_layers, x, target)
    actual = as_floats(student.call("layer_grad_norms", probe_net_arg(state, d_model, num_layers), x, target))
    try:
        expect_numbers(actual, weights, "layer_grad_norms 的返回值", rel=GRAD_REL)
    except CheckFailed as failure:
        failure.diagnosis = diagnose_grad_norms(actual, weights, biases, target.numel(), d_model)
        raise


@check("layer_grad_norms", points=0.5)
def test_grad_norms_clears_old_gradients(student, rng):
    """在同一个模型上连续调用两次，两次结果相同、都正确（先清掉旧的梯度）"""
    d_model, num_layers = 8, 3
    state = probe_net_weights(rng, d_model, num_layers)
    x = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    target = torch.randn(5, d_model, generator=rng, dtype=torch.float64)
    weights, _ = reference_grad_norms(state, d_model, num_layers, x, target)
    first, second = student.call_repeatedly(2, "layer_grad_norms", probe_net_arg(state, d_model, num_layers), x, target)
    expect_numbers(as_floats(first), weights, "第一次调用的返回值", rel=GRAD_REL)
    try:
        expect_numbers(as_floats(second), weights, "同一个模型上第二次调用的返回值", rel=GRAD_REL)
    except CheckFailed as failure:
        raise CheckFailed("同一个模型上第二次调用的结果不对：旧的梯度没有清掉，反向传播把梯度累加了"
                          "（先 model.zero_grad()）", failure.details) from None


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
        usable = (not run.load_error and isinstance(run.outputs, torch.Tensor) and run.outputs.shape == target.shape
                  and run.outputs.dtype == torch.float64)
        expect_true(usable, f"这一项在你自己的 {class_name} 上检查 layer_grad_norms，但你的 {class_name} 加载权重后"
                    "不能对 [2, 4, 8] 的 float64 输入给出同形状的输出：请先完成第 2 部分")
        grad = 2 * (run.outputs - target) / target.numel()  # d mse_loss / d output
        run = student.module(class_name, (d_model, num_layers), state_dict=state, dtype=torch.float64,
                             method="forward", args=(x,), grad_outputs=[grad])
        own = [run.param_grads.get(f"layers.{i}.weight") for i in range(num_layers)]
        expect_true(all(isinstance(g, torch.Tensor) for g in own),
                    f"你的 {class_name} 的 layers.i.weight 没有全部得到梯度：请先完成第 2 部分")
        expected = [g.norm().item() for g in own]
        actual = as_floats(student.call("layer_grad_norms", module_arg(class_name, d_model, num_layers,
                                                                       state_dict=state, dtype=torch.float64),
                                        x, target))
        expect_numbers(actual, expected, f"layer_grad_norms(你的 {class_name}, x, target)", rel=GRAD_REL)
