"""RMSNorm (chapter §1, homework 1).

    rms(x) = sqrt(mean(x_i ** 2) + eps)      eps inside the root, mean over the last dim only
    y      = x / rms(x) * gamma

LayerNorm also subtracts the mean and adds a beta; RMSNorm keeps only the rescaling. The chapter's
homework 1 forgot the square root in its formula and its hint; the answer for x = [3, 4] is
x / sqrt(12.5) = [0.8485, 1.1314].
"""


import torch
import torch.nn as nn

from solutions.hand.rmsnorm import (  # noqa: F401 (re-exported: the checks take them from the reference)
    hand_answers, hand_inputs, hand_slips,
)


def rms_norm(x, gamma, eps=1e-6):
    """RMSNorm 函数：沿最后一维计算 rms = sqrt(mean(x**2) + eps)，返回 x / rms * gamma。

    参数:
        x:     [..., d] 的浮点张量（前面可以有任意多个 batch 维）
        gamma: [d] 的缩放向量
        eps:   加在根号里面的小常数
    返回:
        与 x 形状相同、dtype 相同的张量
    """
    ### BEGIN SOLUTION
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() == 0 or gamma.shape != x.shape[-1:]:
        raise ValueError(
            f"gamma must have shape [{x.shape[-1] if x.dim() else '?'}] to match the last dimension of x "
            f"{list(x.shape)}, got {list(gamma.shape)}"
        )
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    # half types are normalised in float32; float64 stays float64
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    xc = x.to(compute_dtype)
    rms = torch.sqrt(torch.mean(xc * xc, dim=-1, keepdim=True) + eps)
    return (xc / rms * gamma.to(compute_dtype)).to(x.dtype)
    ### END SOLUTION


class RMSNorm(nn.Module):
    """RMSNorm 模块。

    参数名是固定的（评分时按名字加载权重）：可学习的缩放向量叫 `gamma`，形状 [d_model]，初始化为全 1。
    RMSNorm 没有 beta（偏置）。forward 的输入是 [..., d_model]，输出形状和 dtype 与输入相同。
    """

    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        ### BEGIN SOLUTION
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return rms_norm(x, self.gamma, self.eps)
        ### END SOLUTION
