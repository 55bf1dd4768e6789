"""gqa_saving: the hand computation's numbers and answers, without torch (the reference itself is solutions/gqa_saving.py,
which re-exports these). The notebook shows the student the numbers their id gives (hand_inputs, mirrored into
it); the run that records the grades computes the right answers here without importing torch."""

from solutions.student_params import student_rng


def hand_inputs(student_id):
    """手算题的模型配置（由学号决定）。KV Cache 按 FP16（每个元素 2 字节）、单层计算。"""
    rng = student_rng("gqa_saving", student_id)
    # Q 头数与 KV 头数之比不取 2 和 8：比值为 2 时 x 与 1 - x 相等，为 8 时"按 bit 算的 GQA"等于 MHA，
    # 几种常见错误会恰好和正确答案（或彼此）一样
    num_q_heads, num_kv_heads = rng.choice(
        [(16, 4), (24, 4), (24, 8), (32, 8), (40, 8), (48, 8), (48, 12), (64, 16)]
    )
    return {
        "batch": rng.randint(1, 8),
        "seq_len": 256 * rng.randint(2, 32),
        "num_q_heads": num_q_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": rng.choice([64, 80, 96, 112, 128]),
    }


def hand_answers(inputs: dict) -> dict:
    """The right answers of homework 2 for one configuration (bytes of one layer, fp16)."""
    b, s, hd = inputs["batch"], inputs["seq_len"], inputs["head_dim"]
    mha = kv_cache_bytes(b, s, inputs["num_q_heads"], hd)
    gqa = kv_cache_bytes(b, s, inputs["num_kv_heads"], hd)
    return {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": 1 - gqa / mha}


def hand_slips(inputs: dict) -> dict:
    """Answers that the catalogued slips give (each slip applied throughout)."""
    right = hand_answers(inputs)
    mha, gqa, ratio = right["mha_kv_bytes"], right["gqa_kv_bytes"], right["saving_ratio"]
    return {
        "k_only": {"mha_kv_bytes": mha / 2, "gqa_kv_bytes": gqa / 2, "saving_ratio": ratio},
        "fp32_bytes": {"mha_kv_bytes": mha * 2, "gqa_kv_bytes": gqa * 2, "saving_ratio": ratio},
        "bits_not_bytes": {"mha_kv_bytes": mha * 8, "gqa_kv_bytes": gqa * 8, "saving_ratio": ratio},
        "mib_not_bytes": {"mha_kv_bytes": mha / 1024**2, "gqa_kv_bytes": gqa / 1024**2, "saving_ratio": ratio},
        "mb_not_bytes": {"mha_kv_bytes": mha / 1e6, "gqa_kv_bytes": gqa / 1e6, "saving_ratio": ratio},
        "percent_not_fraction": {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": ratio * 100},
        "forgot_one_minus": {"mha_kv_bytes": mha, "gqa_kv_bytes": gqa, "saving_ratio": gqa / mha},
        "q_heads_for_kv": {"mha_kv_bytes": mha, "gqa_kv_bytes": mha, "saving_ratio": 0.0},
    }


def kv_cache_bytes(batch, seq_len, num_kv_heads, head_dim, bytes_per_element=2, num_layers=1):
    """KV Cache 占用的字节数：K 和 V 各一份，每个元素 bytes_per_element 字节，共 num_layers 层。返回 int。"""
    ### BEGIN SOLUTION
    for name, value in [("batch", batch), ("seq_len", seq_len), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim), ("bytes_per_element", bytes_per_element),
                        ("num_layers", num_layers)]:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return 2 * batch * seq_len * num_kv_heads * head_dim * bytes_per_element * num_layers
    ### END SOLUTION
