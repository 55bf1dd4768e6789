"""llama_block: the hand computation's numbers and answers, without torch (the reference itself is solutions/llama_block.py,
which re-exports these). The notebook shows the student the numbers their id gives (hand_inputs, mirrored into
it); the run that records the grades computes the right answers here without importing torch."""

import math

from solutions.student_params import student_rng


def hand_inputs(student_id):
    """手算题的数据（由学号决定）：每头维度 d_head，以及 q_norm、k_norm 的缩放 γ_q、γ_k。

    γ_q、γ_k 各给 4 个数：长度为 d_head 的权重就是这 4 个数依次循环重复 d_head // 4 遍。
    """
    rng = student_rng("llama_block", student_id)
    d_head = rng.choice([32, 48, 64, 80, 96, 128, 160, 256])
    gammas = []
    for _ in range(2):
        # 4 个绝对值互不相同的数，绝对值最大的那个取负号（max(γ) 与 max|γ| 才不同）；
        # 这样 d_head >= 32 时，几种常见错误的答案彼此之间、与正确答案之间都差得很远
        values = rng.sample([0.5, 0.75, 1.25, 1.5, 2.0, 2.5, 3.0], 4)
        biggest = values.index(max(values))
        values[biggest] = -values[biggest]
        gammas.append(values)
    return {"d_head": d_head, "gamma_q": gammas[0], "gamma_k": gammas[1]}


def hand_answers(inputs: dict) -> dict:
    """The right answers: ‖q‖ after QK-Norm with γ = 1, the largest ‖k‖ with γ_k, the bound on a logit (eps = 0)."""
    root = math.sqrt(inputs["d_head"])
    top_q = max(abs(g) for g in inputs["gamma_q"])
    top_k = max(abs(g) for g in inputs["gamma_k"])
    return {"q_norm": root, "k_norm_max": root * top_k, "logit_bound": root * top_q * top_k}


def hand_slips(inputs: dict) -> dict:
    """What the catalogued slips give (each slip applied throughout; fields it does not touch are right)."""
    right = hand_answers(inputs)
    d, root = inputs["d_head"], math.sqrt(inputs["d_head"])
    top_q = max(abs(g) for g in inputs["gamma_q"])
    top_k = max(abs(g) for g in inputs["gamma_k"])
    signed_q, signed_k = max(inputs["gamma_q"]), max(inputs["gamma_k"])
    return {
        "norm_is_one": dict(right, q_norm=1.0, k_norm_max=top_k, logit_bound=top_q * top_k / root),
        "squared_norm": dict(right, q_norm=float(d), k_norm_max=d * top_k**2),
        "gamma_ignored": dict(right, k_norm_max=root, logit_bound=root),
        "max_without_abs": dict(right, k_norm_max=root * signed_k, logit_bound=root * signed_q * signed_k),
        "bound_unscaled": dict(right, logit_bound=d * top_q * top_k),
    }
