"""What llama_block's text says about QK-Norm's models, §5 of the chapter and the logit bound is what code shows."""

import math
import re

import nbformat
import pytest
import torch

from conftest import source_notebook

NB = nbformat.read(source_notebook("llama_block"), as_version=4)


def markdown_with(marker: str) -> str:
    found = [c.source for c in NB.cells if c.cell_type == "markdown" and marker in c.source]
    assert len(found) == 1, f"{len(found)} markdown cells contain {marker!r}"
    return found[0]


def sentences_naming(text: str, name: str) -> list[str]:
    return [s for s in re.split(r"[。\n]", text) if name in s]


# ---------------------------------------------------------------- which models normalise per head

def q_norm_size(model: str) -> tuple[int, int, int]:
    """(size of q_norm's weight, num_heads, head_dim) of transformers' attention layer of `model`."""
    heads, head_dim = 4, 8
    if model == "OLMo 2":
        from transformers import Olmo2Config as Config
        from transformers.models.olmo2.modeling_olmo2 import Olmo2Attention as Attention
    elif model == "Qwen3":
        from transformers import Qwen3Config as Config
        from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention as Attention
    else:
        from transformers import Gemma3TextConfig as Config
        from transformers.models.gemma3.modeling_gemma3 import Gemma3Attention as Attention
    config = Config(hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=heads,
                    head_dim=head_dim, intermediate_size=64, num_hidden_layers=1, vocab_size=32)
    return Attention(config, layer_idx=0).q_norm.weight.numel(), heads, head_dim


PART2 = markdown_with("## 第 2 部分")


@pytest.mark.parametrize("model", ["OLMo 2", "Qwen3", "Gemma 3"])
def test_the_qk_norm_the_text_credits_to_a_model_is_the_one_transformers_builds(model):
    size, heads, head_dim = q_norm_size(model)
    per_head = size == head_dim
    assert per_head or size == heads * head_dim
    said = sentences_naming(PART2, model)
    assert said, f"Part 2 no longer names {model}"
    # the sentence that credits a model with per-head QK-Norm is the one pinning "沿最后一维 `d_head`"
    per_head_sentence = next(s for s in re.split(r"。", PART2) if "沿**最后一维 `d_head`**" in s)
    assert (model in per_head_sentence) == per_head, (model, per_head_sentence)
    if not per_head:
        assert any("拆头之前" in s and "整个" in s and "num_heads·d_head" in s for s in said), said


# ---------------------------------------------------------------- §5 of the chapter

def test_the_intro_says_it_is_section_5s_formula_and_diagram_that_use_rope():
    intro = NB.cells[0].source
    note = next(line for line in intro.splitlines() if "§5" in line and "LLaMABlock" in line)
    assert "说自己用了 RoPE" not in intro
    assert "公式" in note and "图" in note and "RoPE" in note and "nn.MultiheadAttention" in note


# ---------------------------------------------------------------- the logit bound and the exact maximum

def hand_namespace():
    namespace = {}
    for cell in NB.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") in ("setup_imports", "given_code", "hand_inputs_code"):
            exec(compile(cell.source, "cell", "exec"), namespace)
    return namespace


HAND = hand_namespace()


def logits_of(q, k, gamma_q, gamma_k):
    """The notebook's own RMSNorm (eps = 0) with the student's γ on q and k, then q̂·k̂ / √d."""
    d = q.shape[-1]
    q_norm, k_norm = HAND["RMSNorm"](d, eps=0.0).double(), HAND["RMSNorm"](d, eps=0.0).double()
    with torch.no_grad():
        q_norm.gamma.copy_(gamma_q)
        k_norm.gamma.copy_(gamma_k)
        return (q_norm(q) * k_norm(k)).sum(-1) / math.sqrt(d)


def student_gammas(student_id):
    inputs = HAND["hand_inputs"](student_id)
    d = inputs["d_head"]
    repeat = d // 4
    return (d, torch.tensor(inputs["gamma_q"] * repeat, dtype=torch.float64),
            torch.tensor(inputs["gamma_k"] * repeat, dtype=torch.float64))


@pytest.mark.parametrize("student_id", ["alice", "2024012345", "s017", "s042"])
def test_the_exact_maximum_is_attained_and_never_exceeded_and_the_bound_is_above_it(student_id):
    d, gamma_q, gamma_k = student_gammas(student_id)
    exact = math.sqrt(d) * (gamma_q * gamma_k).abs().max().item()
    bound = math.sqrt(d) * gamma_q.abs().max().item() * gamma_k.abs().max().item()
    # attained: q and k along the dimension where |γ_q,i · γ_k,i| is largest, signs matching γ_q,i · γ_k,i
    i = int((gamma_q * gamma_k).abs().argmax())
    q = torch.zeros(1, d, dtype=torch.float64)
    k = torch.zeros(1, d, dtype=torch.float64)
    q[0, i] = 1.0
    k[0, i] = math.copysign(1.0, (gamma_q[i] * gamma_k[i]).item())
    assert logits_of(q, k, gamma_q, gamma_k).item() == pytest.approx(exact, rel=1e-12)
    # never exceeded: random q, k, and q, k pushed towards each γ's largest dimensions
    torch.manual_seed(0)
    qs = torch.randn(20000, d, dtype=torch.float64)
    ks = torch.randn(20000, d, dtype=torch.float64)
    near = torch.zeros(2000, d, dtype=torch.float64)
    near[:, gamma_q.abs().argmax()] = 1.0
    qs = torch.cat([qs, near + 0.1 * torch.randn(2000, d, dtype=torch.float64)])
    near = torch.zeros(2000, d, dtype=torch.float64)
    near[:, gamma_k.abs().argmax()] = 1.0
    ks = torch.cat([ks, near + 0.1 * torch.randn(2000, d, dtype=torch.float64)])
    assert logits_of(qs, ks, gamma_q, gamma_k).abs().max().item() <= exact * (1 + 1e-12)
    assert exact <= bound * (1 + 1e-12)


def test_the_text_states_the_bound_as_an_upper_bound_and_gives_the_exact_maximum():
    question = next(c.source for c in NB.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "hand_question")
    assert "上界" in question and "不一定取得到" in question
    assert r"\max_i|\gamma_{q,i}\,\gamma_{k,i}|" in question
    # "多数同学的数字里它比上界小": true for most ids
    smaller = 0
    ids = [f"2024{n:06d}" for n in range(400)]
    for student_id in ids:
        d, gamma_q, gamma_k = student_gammas(student_id)
        exact = (gamma_q * gamma_k).abs().max().item()
        bound = gamma_q.abs().max().item() * gamma_k.abs().max().item()
        smaller += exact < bound * (1 - 1e-9)
    assert "多数同学" in question and smaller > len(ids) / 2, smaller
