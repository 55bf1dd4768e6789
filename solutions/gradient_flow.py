"""Pre-Norm vs Post-Norm gradient flow (chapter §3, homework 3 corrected).

    Post-Norm:  x = Norm(x + F(x))     the residual path itself goes through every Norm
    Pre-Norm:   x = x + F(Norm(x))     the residual path is the identity, Norm sits on the branch

The chapter's homework 3 swapped the two definitions (it called x + SubLayer(Norm(x)) Post-Norm);
x + Norm(F(x)) is a third, real variant. Its check `answer in "ABCD"` accepted "" and "AB".
"""

import torch.nn as nn
import torch.nn.functional as F

from solutions.student_params import student_rng

# The options of the multiple-choice question, in a fixed order; each student sees them shuffled.
CHOICE_OPTIONS = [
    "Pre-Norm 把 Norm 放在子层之后，让每层的输出更平滑，所以梯度更稳定",
    "Pre-Norm 的残差路径上没有 Norm：x_L = x_l + Σ F(Norm(x_k))，∂x_L/∂x_l 里有一个恒等项，梯度有一条不被任何 Norm 缩放的通路直接传回浅层",
    "Post-Norm 没有残差连接，所以梯度只能穿过每一层的子层",
    "Pre-Norm 的参数比 Post-Norm 少，所以梯度更稳定",
]
_CORRECT_OPTION = 1  # index into CHOICE_OPTIONS; never shown to students


def choice_options(student_id):
    """你这份作业里选择题的选项顺序（由学号决定）：返回 {字母: 选项} 的字典。"""
    rng = student_rng("gradient_flow", student_id)
    order = list(range(len(CHOICE_OPTIONS)))
    rng.shuffle(order)
    return {letter: CHOICE_OPTIONS[i] for letter, i in zip("ABCD", order)}


def hand_inputs(student_id):
    """The student's option order (what the notebook prints)."""
    return {"options": choice_options(student_id)}


def hand_answers(inputs: dict) -> dict:
    """The letter under which this student sees the right option."""
    right = CHOICE_OPTIONS[_CORRECT_OPTION]
    return {"answer": next(letter for letter, text in inputs["options"].items() if text == right)}


class PostNormStack(nn.Module):
    """num_layers 层的 Post-Norm 网络：每层计算 x = norms[i](x + relu(layers[i](x)))。

    参数名是固定的：layers 是 nn.Linear(d_model, d_model) 组成的 nn.ModuleList，
    norms 是 nn.LayerNorm(d_model) 组成的 nn.ModuleList（每层各有自己的 Norm）。
    """

    def __init__(self, d_model, num_layers):
        super().__init__()
        ### BEGIN SOLUTION
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        for layer, norm in zip(self.layers, self.norms):
            x = norm(x + F.relu(layer(x)))
        return x
        ### END SOLUTION


class PreNormStack(nn.Module):
    """num_layers 层的 Pre-Norm 网络：每层计算 x = x + relu(layers[i](norms[i](x)))。

    参数名与 PostNormStack 相同：layers（nn.Linear 的 ModuleList）和 norms（nn.LayerNorm 的 ModuleList）。
    """

    def __init__(self, d_model, num_layers):
        super().__init__()
        ### BEGIN SOLUTION
        if num_layers < 1:
            raise ValueError(f"num_layers must be >= 1, got {num_layers}")
        self.layers = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(num_layers)])
        self.norms = nn.ModuleList([nn.LayerNorm(d_model) for _ in range(num_layers)])
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        for layer, norm in zip(self.layers, self.norms):
            x = x + F.relu(layer(norm(x)))
        return x
        ### END SOLUTION


def layer_grad_norms(model, x, target):
    """对 model(x) 和 target 求 MSE loss 并反向传播，返回每一层 layers[i].weight 梯度的 L2 范数。

    返回 Python float 的列表，输入侧（layers[0]）在前。先清掉旧的梯度，所以连续调用两次结果相同。
    """
    ### BEGIN SOLUTION
    if not hasattr(model, "layers"):
        raise ValueError("model must have a `layers` ModuleList (PostNormStack or PreNormStack)")
    model.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), target)
    loss.backward()
    return [layer.weight.grad.norm().item() for layer in model.layers]
    ### END SOLUTION
