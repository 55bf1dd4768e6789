"""The catalogue of `gqa_saving`'s mistakes (VARIANTS): names, titles and Chinese explanations, no torch.

autograder/checks/gqa_saving.py reproduces each mistake on its checks' inputs and names it when the student's value
matches (autograder.checks.match_variant); reports and summaries read the texts from here."""

from autograder.catalogue import Variant, PRECISION, catalogue, family, ATTENTION_AND_BYTE_SLIPS

VARIANTS = catalogue(
    # the attention and byte-count slips shared with other assignments (autograder.checks.diagnosis.FAMILIES)
    *family(*ATTENTION_AND_BYTE_SLIPS),
    PRECISION,  # float64 inputs with float32 internals: only the parts' precision checks are lost
    # the hand computation and kv_cache_bytes
    Variant("percent_not_fraction", "你的 saving_ratio 与「写成了百分数」一致：应填 0 到 1 之间的小数"
                                    "（省了一半填 0.5，不填 50）",
            title="写成了百分数"),
    Variant("forgot_one_minus", "你的 saving_ratio 与 gqa_kv_bytes / mha_kv_bytes 一致，那是 GQA 还剩下的比例："
                                "题目要的是省下的比例，即 1 − gqa_kv_bytes / mha_kv_bytes",
            title="漏了 1 −"),
    Variant("factor_not_ratio", "你的 saving_ratio 与 mha_kv_bytes / gqa_kv_bytes（KV Cache 缩小的倍数）一致："
                                "题目要的是省下的比例 1 − gqa_kv_bytes / mha_kv_bytes，是 0 到 1 之间的小数",
            title="算成了缩小的倍数"),
    # repeat_kv and the module
    *family("mod_mapping"),  # the chapter's h % num_kv_heads pairing, a convention: shared with llama_block
    Variant("repeat_wrong_dim", "你的结果与「在序列维（第 1 维）而不是 KV 头维（第 2 维）上重复」一致：输入是 "
                                "[B, S, num_kv_heads, head_dim]，要在第 2 维上把每个 KV 头连续重复 n_rep 次",
            title="在序列维上重复"),
    *family("always_causal"),  # shared with llama_block
)
