"""The catalogue of `llama_block`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/llama_block.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue, family

ATTENTION_FAMILIES = ("no_scale", "scale_d_model", "mask_ignored", "mask_multiplied", "softmax_wrong_dim",
                      "merge_heads_without_transpose", "no_output_projection", "linear_bias")

VARIANTS = catalogue(
    PRECISION,  # float64 inputs with float32 internals: only the parts' precision checks are lost
    *family(*ATTENTION_FAMILIES),
    *family("mod_mapping"),  # the chapter's h % num_kv_heads pairing, a convention: shared with gqa_saving
    *family("always_causal"),  # a causal mask made in forward in place of the given one: shared with gqa_saving
    *family("gate_up_swapped"),  # an FFN written out inside the block with its branches swapped: shared with swiglu
    # the hand part
    Variant("qk_length_one", "你的答案与「QK-Norm 之后 q、k 的长度 ≈ 1」一致（本章 §8 就是这么说的，但它错了）：RMSNorm 让的是"
                             "均方根 sqrt(mean(x²)) 等于 1，d_head 维向量的长度（L2 范数）因此是 sqrt(d_head)·（γ 的尺度）",
            title="以为 QK-Norm 后长度 ≈ 1"),
    Variant("qk_squared_length", "你的答案与「长度的平方」一致：均方根为 1 时 Σx² = d_head，长度是它的平方根 sqrt(d_head)",
            title="算成了长度的平方"),
    Variant("qk_gamma_ignored", "你的答案与「忽略了 γ」一致：QK-Norm 的输出是 x / rms(x) ⊙ γ，长度的最大值要乘上 max|γ|",
            title="忽略了 QK-Norm 的 γ"),
    Variant("gamma_max_without_abs", "你的答案与「取 γ 的最大值而不是绝对值的最大值」一致：γ 里有负数，"
                                     "|γ_i · x_i| 看的是 |γ_i|，上界用 max|γ|", title="γ 的最大值没取绝对值"),
    Variant("bound_unscaled", "你的 logit_bound 与「没有除以 √d_head」一致：logit 是 q·k / √d_head，"
                              "上界是 ‖q̂‖ 的最大值 × ‖k̂‖ 的最大值 / √d_head = √d_head · max|γ_q| · max|γ_k|",
            title="上界没有除以 √d_head"),
    # the attention
    Variant("rotate_half_unpermuted", "你的结果与「RoPE 按 rotate_half 配对 (i, i + d/2)」一致，而权重没有重排：本作业按相邻两维 "
                                      "(2i, 2i+1) 配对（给定的 apply_rotary_emb）。两种配对是同一个旋转的两种布局，"
                                      "权重要配它自己的布局（换布局要用 permute_for_rotate_half 重排 W_q、W_k 的行）",
            title="rotate_half 配对（权重未重排）", convention=True),
    Variant("rope_k_missing", "你的结果与「只对 q 施加了 RoPE，k 没有旋转」一致：q 和 k 都要旋转，"
                              "点积才只依赖相对位置", title="k 没有施加 RoPE"),
    Variant("rope_on_v", "你的结果与「对 v 也施加了 RoPE」一致：RoPE 只作用在 q 和 k 上（位置信息进的是注意力分数），v 不旋转",
            title="v 也施加了 RoPE"),
    Variant("no_rope", "你的结果与「q、k 实际上没有施加 RoPE」一致：要么完全没有 RoPE（本章 §5 的 LLaMABlock 用 "
                       "nn.MultiheadAttention，就是这样），要么在 [B, S, H, d_head] 的布局上调用了 apply_rotary_emb——它把倒数"
                       "第二维当作位置，于是按头的编号旋转，同一个头的 q 和 k 转了同样的角度，在点积里互相抵消（H == S 时不报错，"
                       "H != S 时是形状错误）。拆头之后先 transpose(1, 2) 成 [B, H, S, d_head]，再对 q、k 施加 RoPE",
            title="RoPE 没有起作用"),
    Variant("rope_before_qk_norm", "你的结果与「先 RoPE、后 QK-Norm」一致：约定是拆头之后先做 QK-Norm，再对 q、k 施加 RoPE"
                                   "（γ 不全相等时两种顺序结果不同）", title="RoPE 放在了 QK-Norm 之前"),
    Variant("shared_qk_norm", "你的结果与「q 和 k 用了同一个 RMSNorm」一致（例如 k 也经过了 q_norm，或 k_norm 与 q_norm 是"
                              "同一个模块）：QK-Norm 是两个各自的 RMSNorm(d_head)，q 经过 q_norm（γ_q），k 经过 k_norm（γ_k），"
                              "两个 γ 各自学习", title="q、k 共用了一个 QK-Norm"),
    Variant("qk_norm_over_d_model", "你的 q_norm / k_norm 是按整个 d_model（拆头之前）建的：QK-Norm 是对每个头各自做 RMSNorm，"
                                    "沿 d_head 归一化，q_norm、k_norm 是 RMSNorm(d_head)，gamma 的形状是 [d_head]",
            title="QK-Norm 沿 d_model 而不是 d_head"),
    Variant("parameters_renamed", "你的模块的参数形状都对，但名字与约定不同（例如子模块叫 attention 而不是 attn）：评分时按名字加载权重，"
                                  "子模块和参数的名字要与题目一致（norm_attn、attn、norm_ffn、ffn，W_q、W_k、W_v、W_o，"
                                  "q_norm、k_norm，gamma）", title="参数名与约定不同"),
    # the block
    Variant("post_norm_order", "你的结果与 Post-Norm 的顺序一致（h = norm_attn(x + attn(x))，out = norm_ffn(h + ffn(h))）："
                               "约定是 Pre-Norm，Norm 只在子层入口，残差不经过 Norm：h = x + attn(norm_attn(x))，"
                               "out = h + ffn(norm_ffn(h))", title="用了 Post-Norm 的顺序"),
    Variant("attn_residual_dropped", "你的结果与「注意力子层没有残差」一致（h = attn(norm_attn(x))）：要加回输入，"
                                     "h = x + attn(norm_attn(x))", title="注意力子层丢了残差"),
    Variant("ffn_residual_dropped", "你的结果与「FFN 子层没有残差」一致（out = ffn(norm_ffn(h))）：要加回 h，"
                                    "out = h + ffn(norm_ffn(h))", title="FFN 子层丢了残差"),
    Variant("norm_ffn_for_attention", "你的结果与「注意力前面也用了 norm_ffn」一致：两个子层各有自己的 RMSNorm，"
                                      "注意力前是 norm_attn，FFN 前是 norm_ffn", title="注意力前用了 norm_ffn"),
    Variant("norm_attn_for_ffn", "你的结果与「FFN 前面也用了 norm_attn」一致（out = h + ffn(norm_attn(h))）：两个子层各有自己的 "
                                 "RMSNorm，注意力前是 norm_attn，FFN 前是 norm_ffn", title="FFN 前用了 norm_attn"),
    # permute_for_rotate_half
    Variant("inverse_permutation", "你的结果是约定的重排的逆：新的第 j 行（j < d_head // 2）应该是原来的第 2j 行、新的第 "
                                   "d_head // 2 + j 行是原来的第 2j + 1 行（view(n_heads, d_head // 2, 2, cols) 再 transpose(1, 2)），"
                                   "你的是把前一半放到偶数行", title="重排方向反了"),
    Variant("permute_across_heads", "你的结果与「把所有行当成一个头来重排」一致：重排在每个头内部各自进行（先 view 成 "
                                    "[n_heads, d_head // 2, 2, cols]），行不能跨头移动", title="重排跨了头"),
)
