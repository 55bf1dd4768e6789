"""The catalogue of `mla`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/mla.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue, family, ATTENTION_AND_BYTE_SLIPS

VARIANTS = catalogue(
    # the attention and byte-count slips shared with other assignments (autograder.checks.diagnosis.FAMILIES)
    *family(*ATTENTION_AND_BYTE_SLIPS),
    PRECISION,  # float64 inputs with float32 internals: only the parts' precision checks are lost
    # the attention itself (module forward, and the same slips in the absorbed path of the bonus)
    Variant("mask_as_boolean", "结果与「只用了 mask 里 -inf 的位置（当成布尔掩码，masked_fill），忽略了其余的有限值」"
                               "一致：mask 是加性的浮点掩码，要整个加到缩放后的分数上",
            title="mask 当成了布尔掩码"),
    Variant("w_k_up_for_v", "结果与「V 也用 W_k_up 从 latent 解压」一致：K = W_k_up(c_kv)，V = W_v_up(c_kv)，"
                            "两个上投影各管一个",
            title="V 用了 W_k_up"),
    Variant("w_v_up_for_k", "结果与「K 用 W_v_up 从 latent 解压」一致：K = W_k_up(c_kv)，V = W_v_up(c_kv)，"
                            "两个上投影各管一个",
            title="K 用了 W_v_up"),
    # the parameters (found at weight loading, from the keys)
    Variant("kept_w_k_w_v", "你的模块里有 MHA 的 W_k / W_v：MLA 中 K、V 由 latent 经 W_k_up、W_v_up 解压得到，"
                            "这两个上投影取代了 W_k、W_v，而不是加在它们旁边",
            title="保留了 MHA 的 W_k / W_v"),
    # the cache returned by forward
    Variant("cache_returns_k", "返回的第 2 个值是 K（W_k_up 解压后的结果）：要缓存、要返回的是 latent "
                               "c_kv = W_kv_down(x) 本身，形状 [B, S, d_latent]",
            title="缓存返回了 K"),
    Variant("cache_returns_v", "返回的第 2 个值是 V（W_v_up 解压后的结果）：要缓存、要返回的是 latent "
                               "c_kv = W_kv_down(x) 本身，形状 [B, S, d_latent]",
            title="缓存返回了 V"),
    # the bonus only
    Variant("absorbed_wrong_split", "结果与「把 W_k_up.weight（或 W_v_up.weight）转置后再按头切开」一致："
                                    "weight 的形状是 [d_model, d_latent]，第 h 个头用的是第 h·d_head 到 "
                                    "(h+1)·d_head 行，直接 view 成 [H, d_head, d_latent]",
            title="吸收时按头切错了"),
    Variant("absorbed_scale_d_latent", "结果与「吸收后的分数除以 √d_latent」一致：吸收 W_k_up 不改变分数的值，"
                                       "它仍是每个头 d_head 维的 q·k，缩放仍是 1/√d_head",
            title="吸收后按 √d_latent 缩放"),
    # byte counts (mla_cache_bytes and the hand answers)
    Variant("latent_for_k_and_v", "结果与「latent 按 K、V 各算了一份（多乘了 2）」一致：一个 c_kv 同时服务 K 和 V，"
                                  "每个 token 只缓存一份",
            title="latent 算了两份"),
    Variant("rope_key_forgotten", "结果与「没有算解耦的 RoPE key」一致：每个 token 缓存 d_latent + d_rope 个元素",
            title="漏了 RoPE key"),
    Variant("latent_per_head", "结果与「每个头各缓存一份 latent（乘了 num_heads）」一致：latent 是所有头共用的，"
                               "不乘头数",
            title="latent 乘了头数"),
    Variant("cached_k_and_v", "你的 mla_bytes 等于 MHA 的 KV Cache：MLA 缓存的是 latent（和 RoPE key），"
                              "不是解压后的 K 和 V",
            title="缓存了 K 和 V"),
    Variant("elements_not_bytes", "结果与「只数了元素个数，没有乘每个元素的字节数」一致：字节数 = 元素个数 × "
                                  "bytes_per_element（FP16 是 2）",
            title="只数了元素个数"),
)
