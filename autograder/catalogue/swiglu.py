"""The catalogue of `swiglu`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/swiglu.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue, family

ROUND_UP = "正确的做法是向上取整：(d_ff + 255) // 256 * 256（或 math.ceil(d_ff / 256) * 256），再与 d_model 取较大者"

VARIANTS = catalogue(
    PRECISION,  # float64 inputs with float32 internals: only the parts' precision checks are lost
    # --- the gate's activation: in swish itself or in the module's forward ---
    Variant("relu_gate", "激活用成了 ReLU：SwiGLU 的门是 swish(a) = a·sigmoid(a)（即 SiLU），a < 0 时它是一个小的负数、"
                         "处处光滑，而 ReLU 在负半轴恒为 0。swish 函数和 forward 里的门都应该是 a·sigmoid(a)（或 F.silu）",
            title="门用了 ReLU"),
    Variant("gelu_gate", "激活用成了 GELU：GELU 是 a·Φ(a)（Φ 是标准正态分布函数），形状和 swish 相近但数值不同；"
                         "SwiGLU 的门是 swish(a) = a·sigmoid(a)（F.silu）",
            title="门用了 GELU"),
    Variant("sigmoid_gate", "门只用了 sigmoid(a)（这是原始 GLU 的门），少乘了 a：SwiGLU 的门是 swish(a) = a·sigmoid(a)",
            title="门只用了 sigmoid"),
    Variant("no_activation", "门控通道没有经过任何激活（swish 直接返回了 a，或 forward 里 W_gate x 直接与 W_up x 相乘，"
                             "成了双线性层）：应该先算 swish(W_gate x) = W_gate x·sigmoid(W_gate x)，再与 W_up x 逐元素相乘",
            title="门没有激活"),
    Variant("exp_sign_flipped", "sigmoid 里指数的符号写反了：你算的是 a / (1 + e^a) = a·sigmoid(−a)；"
                                "正确的是 swish(a) = a / (1 + e^(−a)) = a·sigmoid(a)",
            title="sigmoid 的指数符号反了"),
    Variant("swish_overflow", "直接用 e^a 计算（如 a·e^a / (1 + e^a)）：a 很大时 e^a 在 float32 下溢出成 inf，inf/inf 得到 "
                              "NaN。用 torch.sigmoid(a)（或 a / (1 + e^(−a))），它对很大和很小的 a 都稳定",
            title="e^a 溢出"),
    # --- the module's structure ---
    *family("gate_up_swapped"),  # shared with llama_block (an FFN written out inside the block)
    Variant("activation_after_product", "swish 用在了两路相乘之后（swish(W_gate x * W_up x)）：swish 只作用在 W_gate x 上，"
                                        "再与 W_up x 逐元素相乘，最后过 W_down",
            title="swish 用在了相乘之后"),
    Variant("plus_instead_of_times", "两路是相加而不是逐元素相乘：门控的意思是用 swish(W_gate x) 逐元素地缩放 W_up x，"
                                     "应该用 *",
            title="两路相加而不是相乘"),
    Variant("swish_on_both_branches", "两路都过了 swish：只有门控通道 W_gate x 过 swish，信息通道 W_up x 保持线性，"
                                      "即 W_down(swish(W_gate x) * W_up x)",
            title="两路都过了 swish"),
    Variant("up_branch_unused", "没有用到 W_up 这一路（输出是 W_down(swish(W_gate x))，成了普通的两层 FFN）："
                                "SwiGLU 要把 swish(W_gate x) 与 W_up x 逐元素相乘，再过 W_down",
            title="没有用 W_up"),
    # --- parameters ---
    Variant("bias_true", "SwiGLU 带了 bias：nn.Linear 默认 bias=True，W_gate、W_up、W_down 都应该显式写 bias=False"
                         "（LLaMA 的 FFN 没有 bias），参数量里也不算 bias",
            title="带了 bias"),
    Variant("d_ff_argument_ignored", "给了 d_ff 时没有使用它，隐藏维度仍然只由 d_model 决定：只有 d_ff 为 None 时才用 "
                                     "default_d_ff(d_model)，否则原样使用传入的 d_ff",
            title="没有使用传入的 d_ff"),
    # --- the default d_ff (default_d_ff, the module without d_ff, the SwiGLU count) ---
    Variant("d_ff_4x", "默认 d_ff 用了 4·d_model，那是两个矩阵的 ReLU FFN 的隐藏维度；SwiGLU 有三个矩阵，为了参数量相当取 "
                       "int(8/3·d_model)，再向上取整到 256 的倍数、并与 d_model 取较大者",
            title="默认 d_ff 用了 4·d_model"),
    Variant("d_ff_no_rounding", "默认 d_ff 停在了 int(8/3·d_model)，没有取整到 256 的倍数（对硬件更友好）。" + ROUND_UP,
            title="默认 d_ff 没有取整"),
    Variant("d_ff_round_down", "默认 d_ff 向下取整到了 256 的倍数。" + ROUND_UP,
            title="默认 d_ff 向下取整"),
    Variant("d_ff_round_nearest", "默认 d_ff 取整到了最近的 256 的倍数（round）。" + ROUND_UP,
            title="默认 d_ff 取整到最近"),
    # --- the parameter counts ---
    Variant("relu_ffn_without_biases", "ReLU FFN 的参数量没有算 bias：教学版 FeedForward_Old 的 fc1、fc2 是默认带 bias 的 "
                                       "nn.Linear，bias 分别有 4·d_model 和 d_model 个",
            title="ReLU FFN 没算 bias"),
    Variant("relu_ffn_fc2_bias_4d", "fc2 的 bias 按 4·d_model 个算了：bias 的长度等于该层的输出维度，fc2 输出 d_model 维，"
                                    "所以它的 bias 只有 d_model 个",
            title="fc2 的 bias 算成了 4·d_model"),
    Variant("relu_ffn_fc1_bias_only", "只算了 fc1 的 bias（4·d_model 个），漏了 fc2 的 bias（d_model 个）：两层都是默认带 bias 的 "
                                      "nn.Linear",
            title="只算了 fc1 的 bias"),
    Variant("swiglu_two_matrices", "SwiGLU 只算了两个矩阵：它有 W_gate、W_up、W_down 三个，各有 d_model·d_ff 个参数，"
                                   "共 3·d_model·d_ff",
            title="SwiGLU 只算了两个矩阵"),
)
