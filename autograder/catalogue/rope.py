"""The catalogue of `rope`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/rope.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue

VARIANTS = catalogue(
    PRECISION,  # float64 inputs with float32 internals: only the parts' precision checks are lost
    # precompute_rope_freqs
    Variant("positions_start_at_1", "你的 cos/sin 与「位置从 1 开始」一致：约定位置从 0 开始（torch.arange(seq_len)），"
                                    "位置 0 的旋转角是 0，即 cos 全为 1、sin 全为 0",
            title="位置从 1 开始"),
    Variant("exponent_i_over_d", "你的频率与 θ^(-i/d) 一致（i 是维度对的编号 0, 1, …, d/2 − 1）：漏了因子 2，"
                                 "约定是 θ^(-2i/d)；torch.arange(0, dim, 2) / dim 直接给出 2i/d",
            title="频率指数漏了因子 2"),
    Variant("exponent_4i_over_d", "你的频率与 θ^(-4i/d) 一致：torch.arange(0, dim, 2) 给出的已经是 2i，不要再乘 2；"
                                  "约定是 θ^(-2i/d)",
            title="频率指数多乘了 2"),
    Variant("frequencies_inverted", "你的频率与 θ^(+2i/d) 一致：指数的符号反了。约定是 θ^(-2i/d)（即 1 / θ^(2i/d)），"
                                    "第 0 对转得最快，越往后的维度对转得越慢",
            title="频率指数的符号反了"),
    Variant("cos_sin_swapped", "你的 precompute_rope_freqs 返回的是 (sin, cos)：约定按 (cos, sin) 的顺序返回",
            title="返回了 (sin, cos)"),
    Variant("theta_ignored", "你的 precompute_rope_freqs 没有使用参数 theta（一直按默认的 10000 计算）："
                             "频率应该用传进来的 theta，即 theta ** (-2i / dim)",
            title="没有使用 theta"),
    Variant("table_transposed", "你的 cos/sin 是正确表格的转置，形状成了 [dim // 2, seq_len]："
                                "torch.outer 的参数顺序反了，应该是 torch.outer(positions, freqs)，得到 [seq_len, dim // 2]",
            title="cos/sin 表转置了"),
    Variant("dtype_argument_ignored", "你的 cos/sin 数值对，但 dtype 不是参数 dtype：precompute_rope_freqs 要按参数 dtype "
                                      "返回（例如最后 .to(dtype)），默认 float32，dtype=torch.float64 时返回 float64",
            title="没有使用参数 dtype"),
    # apply_rotary_emb
    Variant("half_split_pairing", "你的 RoPE 把第 i 维和第 i+d/2 维配成一对（Hugging Face 的 rotate_half 约定）；"
                                  "本作业要求相邻两维 (2i, 2i+1) 配对：x[..., 0::2] 和 x[..., 1::2] 是每一对的两个分量，"
                                  "旋转后再交错放回原位（两种配对是同一个想法的不同维度排列，权重按哪种训练就必须用哪种）",
            convention=True,
            title="前后两半配对（rotate_half）"),
    Variant("rotation_sign_flipped", "你的旋转方向反了（顺时针）：约定是 [x0·cos − x1·sin, x1·cos + x0·sin]，"
                                     "检查 sin 前面的符号",
            title="旋转方向反了"),
    Variant("apply_cos_sin_swapped", "你的 apply_rotary_emb 把 cos 和 sin 用反了（该乘 cos 的地方乘了 sin）："
                                     "约定是 [x0·cos − x1·sin, x1·cos + x0·sin]",
            title="旋转时 cos 和 sin 用反了"),
    Variant("cos_sin_unsqueezed", "你的输出多了一个长度为 1 的前导维度：cos/sin 不需要 unsqueeze(0)。"
                                  "广播从右往左对齐，[seq_len, d_head // 2] 的 cos/sin 天然对齐 x 的最后两维",
            title="cos/sin 多加了维度"),
    Variant("rotated_along_heads", "你的 [B, H, S, D] 输入是按倒数第三维（头的编号）而不是倒数第二维（位置）旋转的："
                                   "输入约定是 [..., seq_len, d_head]，倒数第二维就是位置；不要按形状去猜布局，"
                                   "也不要给 cos/sin 加维度",
            title="沿头的维度旋转了"),
    Variant("output_dtype_not_restored", "你的输出数值对，但 bfloat16 输入返回的不是 bfloat16：半精度输入在 float32 中计算后，"
                                         "要用 .to(x.dtype) 转回 x 的 dtype",
            title="输出没有转回输入的 dtype"),
    # rope_score
    Variant("score_theta_not_passed", "你的 precompute_rope_freqs 用了 theta，但 rope_score 调用它时没有把 theta 传进去"
                                      "（按默认的 10000 算了）",
            title="rope_score 没有传 theta"),
    Variant("score_ignores_positions", "你的分数等于 q·k，与位置无关：q 和 k 转了同样的角度（例如都用了第 pos_q 行的 cos/sin），"
                                       "或者根本没有旋转。q 要用第 pos_q 行、k 要用第 pos_k 行的 cos/sin",
            title="分数与位置无关"),
    Variant("score_positions_swapped", "你的分数等于把 q、k 的位置对调后的结果（你的 precompute_rope_freqs 和 "
                                       "apply_rotary_emb 本身是对的）：q 要转到 pos_q，k 要转到 pos_k，检查是否用反了",
            title="q、k 的位置用反了"),
)
