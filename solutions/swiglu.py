"""SwiGLU feed-forward (chapter §2).

    FFN(x) = W_down(silu(W_gate x) * W_up x),   silu(a) = swish(a) = a * sigmoid(a)

Three bias-free matrices instead of two, so the default hidden size shrinks from 4 d to about
8/3 d, rounded up to a multiple of 256 and at least d_model. The rounding is why the parameter
ratio against the ReLU FFN is not "≈ 1" as the chapter prints: 1.125 at d_model = 512
(1365 rounds up to 1536), about 1.5 at 64 and 1.008 at 4096.
"""

import torch
import torch.nn as nn


def default_d_ff(d_model):
    """SwiGLU 默认的隐藏维度：先取 int(8/3 * d_model)，向上取整到 256 的倍数，再和 d_model 取较大者。返回 int。"""
    ### BEGIN SOLUTION
    if not isinstance(d_model, int) or d_model <= 0:
        raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
    d_ff = 8 * d_model // 3  # == int(8 / 3 * d_model), without floating-point rounding
    d_ff = (d_ff + 255) // 256 * 256
    return max(d_ff, d_model)
    ### END SOLUTION


def swish(a):
    """Swish（也叫 SiLU）：a * sigmoid(a)，逐元素计算，返回与 a 同形状、同 dtype 的张量。"""
    ### BEGIN SOLUTION
    if not a.is_floating_point():
        raise TypeError(f"a must be a floating-point tensor, got dtype {a.dtype}")
    return a * torch.sigmoid(a)
    ### END SOLUTION


class FeedForward_SwiGLU(nn.Module):
    """SwiGLU 前馈网络：W_down(swish(W_gate x) * W_up x)。

    参数名是固定的，全部是没有 bias 的 nn.Linear：
        W_gate: d_model -> d_ff（门控通道，过 swish）   W_up: d_model -> d_ff（信息通道）
        W_down: d_ff -> d_model
    d_ff 为 None 时用 default_d_ff(d_model)。输入 [..., d_model]，输出形状相同。
    """

    def __init__(self, d_model, d_ff=None):
        super().__init__()
        ### BEGIN SOLUTION
        if not isinstance(d_model, int) or d_model <= 0:
            raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
        if d_ff is None:
            d_ff = default_d_ff(d_model)
        if not isinstance(d_ff, int) or d_ff <= 0:
            raise ValueError(f"d_ff must be a positive integer or None, got {d_ff!r}")
        self.W_gate = nn.Linear(d_model, d_ff, bias=False)
        self.W_up = nn.Linear(d_model, d_ff, bias=False)
        self.W_down = nn.Linear(d_ff, d_model, bias=False)
        ### END SOLUTION

    def forward(self, x):
        ### BEGIN SOLUTION
        return self.W_down(swish(self.W_gate(x)) * self.W_up(x))
        ### END SOLUTION


def ffn_param_counts(d_model):
    """返回 (ReLU FFN 的参数量, SwiGLU FFN 的参数量)，都是 int。

    ReLU FFN 是教学版的 FeedForward_Old：fc1 = nn.Linear(d_model, 4 * d_model)，
    fc2 = nn.Linear(4 * d_model, d_model)，都带 bias。SwiGLU 用默认 d_ff、不带 bias。
    """
    ### BEGIN SOLUTION
    if not isinstance(d_model, int) or d_model <= 0:
        raise ValueError(f"d_model must be a positive integer, got {d_model!r}")
    d_hidden = 4 * d_model
    relu_ffn = (d_model * d_hidden + d_hidden) + (d_hidden * d_model + d_model)
    swiglu_ffn = 3 * d_model * default_d_ff(d_model)
    return relu_ffn, swiglu_ffn
    ### END SOLUTION
