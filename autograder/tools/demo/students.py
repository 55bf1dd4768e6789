"""The demo class: twenty students and what each handed in, per assignment.

A student's work on an assignment is a short spec; absent means no submission. Items can be
combined with "; " (e.g. "unanswered:layer_grad_norms_code; mistake:wrong_letter").

    reference                   the reference answers (hand computations done in code, as in the source)
    alternative:<name|index>    a catalogued Alternative (correct work in another style); with no
                                alternatives catalogued yet, the reference answers
    mistake:<name>[,<name>]     one or more catalogued Mistakes (autograder.examples.<assignment>)
    typed                       hand answers typed in as numbers (rounded to five significant figures); in an
                                assignment without a hand computation, the reference answers
    copied:<student id>         hand answers typed in from that classmate's numbers (no hand computation: the
                                reference answers)
    unanswered[:<cell ids>]     solution cells left as the release stub (no ids: all of them)
    missing:<cell ids>          cells deleted from the notebook (by grade_id)
    broken                      a corrupt file: the notebook's JSON cut off part-way
    hostile:<kind>              patch_allclose (rmsnorm only), infinite_loop, snoop (see build.HOSTILE)
"""

from dataclasses import dataclass, field

from autograder.assignments import assignment_ids

EMAIL_DOMAIN = "stu.example.edu.cn"


@dataclass(frozen=True)
class DemoStudent:
    id: str  # the student id: a folder name under submitted/, the JupyterHub user name
    last_name: str
    first_name: str
    description: str  # one line for the instructor
    work: dict[str, str] = field(default_factory=dict, hash=False)  # assignment id -> work spec

    @property
    def email(self) -> str:
        return f"{self.id}@{EMAIL_DOMAIN}"


def everywhere(spec: str, **overrides: str) -> dict[str, str]:
    """`spec` for every assignment of the course, except those given as keyword arguments (None: not submitted)."""
    work = {a: spec for a in assignment_ids()}
    work.update(overrides)
    return {a: w for a, w in work.items() if w is not None}


CLASS: tuple[DemoStudent, ...] = (
    DemoStudent("2024010001", "王", "芳",
                "Strong: the reference answers everywhere, hand computations done in code.",
                everywhere("reference")),
    DemoStudent("2024010002", "李", "娜",
                "Strong, her own style: correct code written differently (first catalogued alternative).",
                everywhere("alternative:0")),
    DemoStudent("zhang.wei", "张", "伟",
                "Strong; works on JupyterHub (id = user name); types his hand answers as rounded numbers.",
                everywhere("typed", rope="alternative:1", swiglu="alternative:1")),
    DemoStudent("2024010004", "刘", "洋",
                "Strong, but used Hugging Face's rotate_half in RoPE (pairs i and i + d/2).",
                everywhere("alternative:1", rope="mistake:half_split_pairing", mla="reference")),
    DemoStudent("2024010005", "陈", "静",
                "Followed the chapter's code too closely: RMS without the root, the chapter's repeat_kv mapping, §5's block "
                "without RoPE and §8's 'norms ≈ 1'.",
                everywhere("reference", rmsnorm="mistake:no_sqrt", gqa_saving="mistake:chapter_mod_mapping",
                           llama_block="mistake:no_rope,hand_length_one")),
    DemoStudent("2024010006", "杨", "磊",
                "Careless with details: eps outside the square root; swish on the wrong SwiGLU branch; the LLaMA block "
                "in Post-Norm order.",
                everywhere("reference", rmsnorm="mistake:eps_outside_root", swiglu="mistake:gate_up_swapped",
                           llama_block="mistake:post_norm_order")),
    DemoStudent("2024010007", "赵", "敏",
                "Two slips in GQA (mask never applied, ratio as a percentage); MLA returns K as the cache.",
                everywhere("reference", gqa_saving="mistake:mask_ignored,percent_not_fraction",
                           mla="mistake:cache_returns_k")),
    DemoStudent("2024010008", "黄", "俊杰",
                "Kept nn.Linear's default bias in SwiGLU; swapped the Pre-Norm and Post-Norm stacks.",
                everywhere("reference", swiglu="mistake:bias_true", gradient_flow="mistake:stacks_swapped")),
    DemoStudent("2024010009", "周", "婷",
                "Copied classmate 2024010001's hand answers (typed their numbers; the choice letter happens to "
                "be the same); her code is correct.",
                everywhere("copied:2024010001", gradient_flow="reference", rope="reference", swiglu="reference")),
    DemoStudent("2024010010", "吴", "昊",
                "Tidied up: deleted the RMSNorm self-check cells (costs nothing) and, by accident, his "
                "repeat_kv answer cell in GQA.",
                everywhere("reference", rmsnorm="missing:rmsnorm_function,rmsnorm_module",
                           gqa_saving="missing:repeat_kv_code")),
    DemoStudent("2024010011", "徐", "丽",
                "Her RMSNorm upload was cut off: a truncated .ipynb that is not valid JSON.",
                everywhere("reference", rmsnorm="broken")),
    DemoStudent("2024010012", "孙", "浩然",
                "Hostile: patches torch.allclose/torch.equal (RMSNorm), an endless loop (GQA), hunts for the "
                "reference solutions and classmates' files (SwiGLU).",
                everywhere("reference", rmsnorm="hostile:patch_allclose", gqa_saving="hostile:infinite_loop",
                           swiglu="hostile:snoop", gradient_flow=None, mla=None)),
    DemoStudent("2024010013", "马", "超",
                "Handed in only the first two assignments; counted only K in the KV cache.",
                {"rmsnorm": "reference", "gqa_saving": "mistake:k_only"}),
    DemoStudent("2024010014", "朱", "琳",
                "Struggling: the module parts left unanswered, a wrong choice letter, the 4x d_ff of the old FFN.",
                {"rmsnorm": "unanswered:rmsnorm_module_code", "gqa_saving": "unanswered:gqa_module_code",
                 "gradient_flow": "unanswered:layer_grad_norms_code,gradient_flow_observation; mistake:wrong_letter",
                 "rope": "unanswered:rope_relative_code", "swiglu": "mistake:d_ff_4x",
                 "mla": "unanswered:mla_cache_code,mla_bonus_code"}),
    DemoStudent("2024010015", "胡", "斌",
                "Started late: MLA handed in untouched; GQA cache sized with the query heads; nothing else.",
                {"rmsnorm": "reference", "gqa_saving": "mistake:q_heads_for_kv", "mla": "unanswered"}),
    DemoStudent("2024010016", "郭", "晓雨",
                "Good, but RoPE computed in float32 (the chapter's x.float()); d_ff not rounded up to 256.",
                everywhere("alternative:0", rope="precision:float32_compute", swiglu="mistake:d_ff_no_rounding")),
    DemoStudent("2024010017", "何", "鹏",
                "Skipped the MLA bonus; typed the right choice letter in lower case.",
                everywhere("alternative:2", mla="unanswered:mla_bonus_code", gradient_flow="mistake:lowercase_letter")),
    DemoStudent("2024010018", "林", "佳怡",
                "Copied patterns from public code: HF RoPE pairing (also in the LLaMA block), the chapter's GQA head "
                "mapping; MLA ignores the mask.",
                everywhere("reference", rope="mistake:half_split_pairing", gqa_saving="mistake:chapter_mod_mapping",
                           mla="mistake:mask_ignored", llama_block="mistake:rotate_half_unpermuted")),
    DemoStudent("2024010019", "罗", "凯",
                "Strong, mixed styles (the second and third catalogued alternatives).",
                everywhere("alternative:2", rmsnorm="alternative:1", rope="alternative:1")),
    DemoStudent("2024010020", "高", "雪",
                "Mixed: the chapter's swapped homework-3 definitions, RMSNorm without gamma, an overflowing swish.",
                everywhere("reference", gradient_flow="mistake:chapter_homework_definitions",
                           rmsnorm="mistake:gamma_missing", swiglu="mistake:swish_overflows")),
)
