"""Attention with a slip: the known-wrong paths of the shared attention families (autograder.catalogue FAMILIES),
written once for every assignment with an attention (gqa_saving, mla, llama_block). Grader side only.

An assignment gives what is its own: the projections (`project`, GQA's and LLaMA's W_q/W_k/W_v, MLA's latent
down- and up-projections), the head mapping (`num_kv_heads`: query head h reads KV head h // (H // num_kv_heads),
or h % num_kv_heads down the `mod_mapping` path; none for MLA) and what is done to the heads before the scores
(`prepare`, llama_block's QK-Norm and RoPE). The kit does the rest: split the heads, pair them, scale, mask,
softmax, merge the heads, W_o; each step either right or down the path a family's name stands for.

A path is a dict of options of attention_with_slips; a family may have several (several ways of one mistake),
and an assignment may add its own families or more ways of a shared one (`paths=`). Options the kit does not
know are the assignment's own: they are passed to its `project` and `prepare` (which ignore the others').
"""

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

# the known-wrong paths of the shared families, by name
ATTENTION_PATHS = {
    "mod_mapping": ({"pairing": "mod"},),
    "no_scale": ({"scale": "none"},),
    "scale_d_model": ({"scale": "d_model"},),
    "mask_ignored": ({"mask_mode": "ignore"},),
    "mask_multiplied": ({"mask_mode": "multiply"},),
    "always_causal": ({"mask_mode": "causal"},),
    "softmax_wrong_dim": ({"softmax_dim": -2},),
    "view_without_transpose": ({"q_heads": "reshape"},),
    "merge_heads_without_transpose": ({"merge": "reshape"},),
    "no_output_projection": ({"output_projection": False},),
}


def attention_with_slips(project: Callable, w_o: torch.Tensor, mask, *, num_heads: int, num_kv_heads: int | None = None,
                         prepare: Callable | None = None, pairing: str = "block", scale: "str | int" = "d_head",
                         mask_mode: str = "add", softmax_dim: int = -1, q_heads: str = "transpose",
                         kv_heads: str = "transpose", merge: str = "transpose", output_projection: bool = True,
                         **own):
    """The attention's output down one path (the defaults: the right one), in the dtype of what `project` gives.

    `project(**own) -> (q, k, v)`, each [B, S, heads * d_head]; `prepare(q, k, v, **own) -> (q, k, v)` on
    [B, H, S, d_head] after the pairing. `scale`: the scores divided by the root of "d_head", "d_model", a given
    dimension (an int), or not ("none"). `mask_mode`: "add" (the additive mask), "multiply", "boolean" (only its
    -inf entries, as a masked_fill), "ignore", "causal" (a causal mask whatever is given). `q_heads`, `kv_heads`:
    "transpose" ([B, S, H, d_head] then transpose) or "reshape" (straight to [B, H, S, d_head]); `merge` alike."""
    q, k, v = project(**own)
    B, S, d_model = q.shape
    H = num_heads
    D = d_model // H
    kv_count = num_kv_heads or H

    def split(t, heads, how):
        return t.reshape(B, heads, S, D) if how == "reshape" else t.view(B, S, heads, D).transpose(1, 2)

    q, k, v = split(q, H, q_heads), split(k, kv_count, kv_heads), split(v, kv_count, kv_heads)
    if num_kv_heads is not None:
        kv_of_head = [h % num_kv_heads if pairing == "mod" else h // (H // num_kv_heads) for h in range(H)]
        k, v = k[:, kv_of_head], v[:, kv_of_head]
    if prepare is not None:
        q, k, v = prepare(q, k, v, **own)
    factor = {"none": 1.0, "d_model": 1 / math.sqrt(d_model), "d_head": 1 / math.sqrt(D)}.get(scale) \
        if isinstance(scale, str) else 1 / math.sqrt(scale)
    scores = q @ k.transpose(-2, -1) * factor
    if mask_mode == "causal":
        scores = scores + torch.triu(torch.full((S, S), float("-inf"), dtype=scores.dtype), diagonal=1)
    elif mask is not None and mask_mode == "add":
        scores = scores + mask
    elif mask is not None and mask_mode == "multiply":
        scores = scores * mask
    elif mask is not None and mask_mode == "boolean":
        scores = scores.masked_fill(torch.isinf(mask), float("-inf"))
    out = F.softmax(scores, dim=softmax_dim) @ v
    out = out.reshape(B, S, H * D) if merge == "reshape" else out.transpose(1, 2).reshape(B, S, H * D)
    return out @ w_o.T if output_projection else out


def slip_variants(names, outcome: Callable, mask=None, paths: dict | None = None) -> list:
    """(name, outcome(**path)) down every known-wrong path of each of `names` (the shared ATTENTION_PATHS, with
    `paths` added or replacing a name's), without autograd. A mask slip (a name starting with "mask_") is left out
    when no mask is given: it then gives the right answer, which names nothing."""
    paths = {**ATTENTION_PATHS, **(paths or {})}
    with torch.no_grad():
        return [(name, outcome(**path)) for name in names if not (mask is None and name.startswith("mask_"))
                for path in paths[name]]


def attention_variants(names, project: Callable, w_o, mask, *, paths: dict | None = None, **options) -> list:
    """(name, the attention's output) down every known-wrong path of each of `names` (see slip_variants);
    `options`: attention_with_slips's (num_heads, num_kv_heads, prepare)."""
    return slip_variants(names, lambda **path: attention_with_slips(project, w_o, mask, **options, **path), mask, paths)
