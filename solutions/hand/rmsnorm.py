"""rmsnorm: the hand computation's numbers and answers, without torch (the reference itself is solutions/rmsnorm.py,
which re-exports these). The notebook shows the student the numbers their id gives (hand_inputs, mirrored into
it); the run that records the grades computes the right answers here without importing torch."""

import math

from solutions.student_params import student_rng


def hand_inputs(student_id):
    """手算题的数据：你自己的向量 x 和缩放 gamma（由学号决定，手算时 eps 取 0）。"""
    rng = student_rng("rmsnorm", student_id)
    while True:
        d = rng.choice([3, 4])
        x = [rng.choice([-1, 1]) * rng.randint(1, 9) for _ in range(d)]
        gamma = [rng.choice([0.5, 1.5, 2.0, 2.5, 3.0]) for _ in range(d)]
        # 有些数字会让常见错误恰好得到正确答案（或彼此相同），换一组：均值太接近 0（LayerNorm 与
        # RMSNorm 几乎相同）、各分量全相等、平方和等于 d²（开不开根号、求和还是平均结果一样）、
        # gamma 各分量全相等
        sum_sq = sum(v * v for v in x)
        if (20 * sum(x) ** 2 >= d * sum_sq and len(set(x)) > 1 and sum_sq not in (d, d * d)
                and len(set(gamma)) > 1):
            return {"x": x, "gamma": gamma}


def hand_answers(inputs: dict) -> dict:
    """The right answers of the hand computation (eps = 0)."""
    x, gamma = inputs["x"], inputs["gamma"]
    rms = math.sqrt(sum(v * v for v in x) / len(x))
    return {"rms": rms, "output": [v / rms * g for v, g in zip(x, gamma)]}


def hand_slips(inputs: dict) -> dict:
    """Answers that the catalogued slips give; the parameter sets keep them apart from the right one."""
    x, gamma = inputs["x"], inputs["gamma"]
    d = len(x)
    mean_sq = sum(v * v for v in x) / d
    mean = sum(x) / d
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / d)

    def scaled(denominator, centre=0.0, use_gamma=True):
        return [(v - centre) / denominator * (g if use_gamma else 1.0) for v, g in zip(x, gamma)]

    return {
        "no_sqrt": {"rms": mean_sq, "output": scaled(mean_sq)},
        "sum_not_mean": {"rms": math.sqrt(mean_sq * d), "output": scaled(math.sqrt(mean_sq * d))},
        "layernorm": {"rms": std, "output": scaled(std, centre=mean)},
        "gamma_missing": {"rms": math.sqrt(mean_sq), "output": scaled(math.sqrt(mean_sq), use_gamma=False)},
    }
