"""Naming the mistake: the catalogue of known-wrong variants, and what the grader says when one matches.

Each assignment's catalogue is `VARIANTS` in autograder/catalogue/<id>.py: a stable name, a title and a Chinese
explanation of the mistake and of the right idea for each typical mistake. Its check module
(autograder/checks/<id>.py) reproduces each on the check's inputs; when a check fails and exactly one variant
matches (within tolerance), the check names it (autograder.checks.diagnosis.named). Nothing is named that was not
matched: otherwise the message only localises the fault (shape, dtype, NaN, causality, gradients, ...).

This package imports neither torch nor pytest: the reports and the class summary read the titles and explanations
here, in the process that records a run (which grades nothing).

A variant that is the pinned convention up to a permutation (RoPE's half-split pairing, the chapter's
`h % num_kv_heads` GQA mapping) is marked `convention=True`: the instructor chooses how much of the
check's points it keeps (GradingOptions.convention_credit, default 0).
"""

import functools
import importlib
from dataclasses import dataclass



# what a check bug's record starts with when its diagnosis raised (autograder.checks.plugin; the class summary
# lists such checks)
DIAGNOSIS_RAISED = "the diagnosis raised (a variant, hint or key recogniser); the student got the comparison's own message"


@dataclass(frozen=True)
class Variant:
    name: str  # stable, snake_case, unique within its assignment
    explanation: str  # Chinese: what the mistake is, and the right idea
    convention: bool = False  # the same idea under another convention (a permutation), not an error
    title: str = ""  # Chinese, a few words: the heading in reports and the summary (default: the explanation's start)

    @property
    def heading(self) -> str:
        """The mistake's Chinese title: `title`, else the explanation up to its first clause break, short."""
        if self.title:
            return self.title
        text = self.explanation
        for stop in ("；", "：", "。", "（"):
            if stop in text:
                text = text.split(stop, 1)[0]
        return text if len(text) <= 40 else text[:39] + "…"


# One precision outcome for every assignment (one name, one explanation, counted as one family in the summary):
# float64 inputs computed with float32 internals. Right algorithm; only the part's precision check is lost.
PRECISION = Variant(
    "float32_precision", title="只差在 float32 的精度（算法是对的）", explanation=
    "结果只差在 float32 的舍入误差量级：算法是对的，但 float64 的输入在中间被转成了 float32 计算"
    "（例如 transformers 的 LlamaRMSNorm 先 .float() 再转回、softmax(..., dtype=torch.float32)、用 float32 建 RoPE 的角度）。"
    "本作业约定 float64 的输入全程用 float64 计算并返回 float64；这一点只在每小题的精度检查里扣分，其他检查照常得分",
)


# Mistakes shared by several assignments (the attention slips, the byte-count slips): one name, one title and
# one explanation, so that the class summary counts each once per assignment. A catalogue takes them by name:
# catalogue(*family("no_scale", "mask_ignored"), Variant(...), ...).
FAMILIES = {v.name: v for v in (
    # the attention
    Variant("no_scale", "结果与「注意力分数没有除以 √d_head」一致：每个头的分数是 q·k / √d_head，先缩放，再加 mask、做 softmax",
            title="注意力分数没有缩放"),
    Variant("scale_d_model", "结果与「分数除以 √d_model」一致：每个头的点积只有 d_head 维，缩放应该是 1/√d_head"
                             "（d_head = d_model // 头数）", title="缩放用了 √d_model"),
    Variant("mask_ignored", "结果与「没有使用 mask」一致：传入了 mask 时，要把它加到缩放后的分数上，再做 softmax",
            title="没有使用 mask"),
    Variant("mask_multiplied", "结果与「把 mask 乘到分数上」一致：mask 是加性的（允许处为 0，屏蔽处为 −inf），"
                               "要加到缩放后的分数上，再做 softmax，而不是相乘", title="mask 乘到了分数上"),
    Variant("softmax_wrong_dim", "结果与「softmax 沿查询维（倒数第二维）做」一致：应沿最后一维（key 的位置）做 softmax，"
                                 "让每个查询对所有 key 的权重之和为 1", title="softmax 的维度不对"),
    Variant("view_without_transpose", "结果与「把 [B, S, d_model] 直接 view/reshape 成 [B, H, S, d_head]」一致："
                                      "这样会把不同 token 的向量拆进同一个头。应先 view 成 [B, S, H, d_head]，再 transpose(1, 2)",
            title="拆头时没有 transpose"),
    Variant("merge_heads_without_transpose", "结果与「合并头时没有先 transpose 就 reshape」一致：注意力的结果是 "
                                             "[B, H, S, d_head]，应先 transpose(1, 2) 成 [B, S, H, d_head]，再 reshape 成 "
                                             "[B, S, H * d_head]", title="合并头时没有 transpose"),
    Variant("no_output_projection", "结果与「合并头之后没有经过 W_o」一致：各头的结果拼回 [B, S, H * d_head] 之后，"
                                    "还要再乘输出投影 W_o", title="没有输出投影 W_o"),
    Variant("linear_bias", "模块里多出了 bias 参数，与「nn.Linear 用了默认的 bias=True」一致：约定的投影都是 "
                           "nn.Linear(..., bias=False)，只有 weight", title="投影多了 bias"),
    Variant("q_heads_for_kv", "结果与「K/V 的头数用了 num_q_heads（那是 MHA）」一致：GQA 只有 num_kv_heads 个 K/V 头，"
                              "每 num_q_heads // num_kv_heads 个 Q 头共享一个；KV Cache 按 num_kv_heads 个头算，W_k、W_v 的输出维"
                              "是 num_kv_heads * d_head", title="KV 头数用了 Q 的头数"),
    Variant("always_causal", "你的结果与「不管传入什么 mask，都加因果掩码」一致：forward 只应使用传入的 mask 参数，"
                             "mask=None 时不加任何掩码，不要在 forward 里自己构造因果掩码",
            title="总是加因果掩码"),
    # the SwiGLU FFN (swiglu, and an FFN written out inside llama_block's block)
    Variant("gate_up_swapped", "swish 用在了 W_up 这一路上，门控通道和信息通道弄反了：应该是 W_down(swish(W_gate x) * W_up x)，"
                               "swish 只作用在 W_gate x 上",
            title="门控和信息通道弄反了"),
    # GQA's pairing of query heads with KV heads (gqa_saving, llama_block; MLA has no KV heads to pair)
    Variant("mod_mapping",
            "你的结果与「第 h 个 Q 头用第 h % num_kv_heads 个 KV 头」的配对一致（本章 §7.1 的代码把新维度插在 KV 头维"
            "前面再 expand，用 x.repeat 整体平铺也是这样）。这也是一种合法的分组，但本作业固定 LLaMA / PyTorch"
            "（enable_gqa=True）的约定：每个 KV 头连续重复 n_rep 次，第 h 个 Q 头用第 h // n_rep 个 KV 头（新维度插在 "
            "KV 头维后面再 expand，或用 repeat_interleave）；按名字加载的权重只有在这种配对下才算得对",
            convention=True,
            title="KV 头配对用了 h % num_kv_heads"),
    # byte counts
    Variant("k_only", "结果正好是正确值的一半，与「只算了 K、漏了 V」一致：KV Cache 要同时存 K 和 V 两份，"
                      "公式最前面的因子 2 不能少", title="只算了 K，漏了 V"),
    Variant("fp32_bytes", "结果正好是正确值的 2 倍，与「按 FP32（每个元素 4 字节）计算」一致：本题按 FP16，每个元素 2 字节",
            title="按 FP32 算了字节数"),
    Variant("bits_not_bytes", "结果正好是正确值的 8 倍，与「算成了比特（bit）」一致：要的是字节数（1 字节 = 8 比特，"
                              "一个 FP16 元素是 2 字节）", title="算成了比特"),
    Variant("mb_not_bytes", "结果与「换算成了 MB（除以 10⁶）」一致：要的是字节数（整数）；打印显存时本作业用 MiB（1024²），"
                            "不用 10⁶", title="换算成了 MB"),
    Variant("mib_not_bytes", "结果与「换算成了 MiB（除以 1024²）」一致：要的是字节数（整数），MiB 只在打印显存时用",
            title="换算成了 MiB"),
    Variant("ignores_bytes_per_element", "结果没有随 bytes_per_element 变化（像是把每个元素的字节数写死了）："
                                         "要乘上传入的 bytes_per_element（默认 2，即 FP16）",
            title="没有用 bytes_per_element"),
    Variant("ignores_num_layers", "结果与 num_layers 无关：整个模型的缓存是一层的 num_layers 倍，要乘上传入的 num_layers"
                                  "（默认 1）", title="没有乘 num_layers"),
)}


# what GQA's and MLA's catalogues share: every family above but GQA's pairing, the causal mask of gqa_saving and
# llama_block, and the FFN's swapped branches (swiglu, llama_block)
ATTENTION_AND_BYTE_SLIPS = tuple(name for name in FAMILIES if name not in ("mod_mapping", "always_causal",
                                                                           "gate_up_swapped"))


def family(*names: str) -> list[Variant]:
    """The shared variants of these names, for a catalogue."""
    return [FAMILIES[name] for name in names]


# every catalogued variant by name: names are unique across assignments (a shared mistake is one Variant), so the
# kit can take a variant by its name (autograder.checks: variants=[("no_sqrt", candidate), ...])
_KNOWN: dict[str, Variant] = {}


def catalogue(*variants: Variant) -> dict[str, Variant]:
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variant names in {names}")
    for v in variants:
        if _KNOWN.setdefault(v.name, v) != v:
            raise ValueError(f"variant {v.name!r} is catalogued twice with different texts")
    return {v.name: v for v in variants}


def lookup(variant: "Variant | str") -> Variant:
    """A variant given by itself or by its catalogued name."""
    if isinstance(variant, Variant):
        return variant
    if variant not in _KNOWN:
        raise KeyError(f"no catalogued variant is named {variant!r}")
    return _KNOWN[variant]


@functools.lru_cache(maxsize=None)
def variants_of(assignment_id: str) -> dict[str, Variant]:
    """The catalogue of one assignment (autograder/catalogue/<id>.py)."""
    module = importlib.import_module(f"autograder.catalogue.{assignment_id}")
    return dict(getattr(module, "VARIANTS", {}))


def heading(assignment_id: str, name: str | None) -> str:
    """The Chinese title of a diagnosed mistake (the name itself if it is not in the catalogue)."""
    if not name:
        return ""
    variant = variants_of(assignment_id).get(name)
    return variant.heading if variant else name


def explain(assignment_id: str, name: str | None) -> str:
    if not name:
        return ""
    variant = variants_of(assignment_id).get(name)
    return variant.explanation if variant else ""
