"""mla: the hand computation's numbers and answers, without torch (the reference itself is solutions/mla.py,
which re-exports these). The notebook shows the student the numbers their id gives (hand_inputs, mirrored into
it); the run that records the grades computes the right answers here without importing torch."""

from solutions.hand.gqa_saving import kv_cache_bytes
from solutions.student_params import student_rng


def hand_inputs(student_id):
    """对比题的模型配置（由学号决定）。都按 FP16（每个元素 2 字节）、单层计算。"""
    rng = student_rng("mla", student_id)
    while True:
        num_heads, d_head = rng.choice([(8, 64), (16, 64), (16, 128), (32, 128)])
        num_kv_heads = rng.choice([2, 4])
        d_rope = d_head // 2
        d_latent = 64 * rng.randint(2, max(2, min(8, num_heads * d_head // 256)))  # d_latent ≪ d_model
        per_token = d_latent + d_rope
        # 有些配置会让常见错误恰好等于另一个正确答案（例如 MLA 的缓存恰好等于 GQA 的），换一组
        if (2 * num_kv_heads * d_head not in (per_token, 2 * per_token, d_latent)
                and per_token != 2 * d_head):
            break
    return {
        "batch": rng.randint(1, 8),
        "seq_len": 512 * rng.randint(1, 32),
        "d_model": num_heads * d_head,
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "d_latent": d_latent,
        "d_rope": d_rope,
    }


def hand_answers(inputs: dict) -> dict:
    """Bytes of one layer's cache for MHA, GQA and MLA with a decoupled RoPE key (fp16)."""
    b, s, h = inputs["batch"], inputs["seq_len"], inputs["num_heads"]
    d_head = inputs["d_model"] // h
    return {
        "mha_bytes": kv_cache_bytes(b, s, h, d_head),
        "gqa_bytes": kv_cache_bytes(b, s, inputs["num_kv_heads"], d_head),
        "mla_bytes": mla_cache_bytes(b, s, inputs["d_latent"], inputs["d_rope"]),
    }


def hand_slips(inputs: dict) -> dict:
    """Answers for the MLA figure that the catalogued slips give."""
    right = hand_answers(inputs)
    b, s = inputs["batch"], inputs["seq_len"]
    d_latent, h = inputs["d_latent"], inputs["num_heads"]
    return {
        "rope_key_forgotten": {**right, "mla_bytes": mla_cache_bytes(b, s, d_latent)},
        "latent_for_k_and_v": {**right, "mla_bytes": 2 * right["mla_bytes"]},
        "latent_per_head": {**right, "mla_bytes": h * right["mla_bytes"]},
        "cached_k_and_v": {**right, "mla_bytes": right["mha_bytes"]},
    }


def mla_cache_bytes(batch, seq_len, d_latent, d_rope=0, bytes_per_element=2, num_layers=1):
    """MLA 的缓存字节数：每个 token 每层只缓存 d_latent 维的 c_kv，外加 d_rope 维的解耦 RoPE key。返回 int。"""
    ### BEGIN SOLUTION
    for name, value in [("batch", batch), ("seq_len", seq_len), ("d_latent", d_latent),
                        ("bytes_per_element", bytes_per_element), ("num_layers", num_layers)]:
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if not isinstance(d_rope, int) or isinstance(d_rope, bool) or d_rope < 0:
        raise ValueError(f"d_rope must be a non-negative integer, got {d_rope!r}")
    # one latent serves both K and V, shared by all heads: no factor 2, no num_heads
    return batch * seq_len * (d_latent + d_rope) * bytes_per_element * num_layers
    ### END SOLUTION
