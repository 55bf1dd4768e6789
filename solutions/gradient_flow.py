"""Pre-Norm vs Post-Norm gradient flow (chapter §3, homework 3 corrected).

    Post-Norm:  x = Norm(x + F(x))     the residual path itself goes through every Norm
    Pre-Norm:   x = x + F(Norm(x))     the residual path is the identity, Norm sits on the branch

The chapter's homework 3 swapped the two definitions (it called x + SubLayer(Norm(x)) Post-Norm);
x + Norm(F(x)) is a third, real variant. Its check `answer in "ABCD"` accepted "" and "AB".
"""

import torch.nn as nn
import torch.nn.functional as F

from solutions.hand.gradient_flow import (  # noqa: F401 (re-exported: the checks take them from the reference)
    CHOICE_OPTIONS, _CORRECT_OPTION, choice_options, hand_answers, hand_inputs,
)


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
