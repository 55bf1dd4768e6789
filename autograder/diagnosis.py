"""Naming the mistake: the catalogue of known-wrong variants, and what the grader says when one matches.

Each check module (autograder/checks/test_<id>.py) declares `VARIANTS`, its catalogue: reference-side
code paths that reproduce a typical mistake, each with a stable name and a Chinese explanation of the
mistake and of the right idea. When a check fails, it runs the same inputs and weights through the
variants that could explain the failure; a match (within tolerance) names the mistake. Nothing is
named that was not matched: otherwise the message only localises the fault (shape, dtype, NaN,
causality, gradients, ...).

A variant that is the pinned convention up to a permutation (RoPE's half-split pairing, the chapter's
`h % num_kv_heads` GQA mapping) is marked `convention=True`: the instructor chooses how much of the
check's points it keeps (GradingOptions.convention_credit, default 0).
"""

import functools
import importlib
from dataclasses import dataclass

from autograder.probes import CheckFailed


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


def catalogue(*variants: Variant) -> dict[str, Variant]:
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate variant names in {names}")
    return {v.name: v for v in variants}


def named(failure: CheckFailed, variant: Variant | None) -> CheckFailed:
    """`failure` with the mistake named, or unchanged when nothing matched."""
    if variant is None:
        return failure
    details = dict(failure.details, convention=True) if variant.convention else failure.details
    return CheckFailed(f"{failure.message}。{variant.explanation}", details, diagnosis=variant.name)


@functools.lru_cache(maxsize=None)
def variants_of(assignment_id: str) -> dict[str, Variant]:
    """The catalogue of one assignment (from its check module)."""
    module = importlib.import_module(f"autograder.checks.test_{assignment_id}")
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
