"""Checks of the rope assignment: precompute_rope_freqs, apply_rotary_emb, rope_score.

Inputs: dims >= 8 (so that pairs other than pair 0, whose frequency is 1 under every exponent slip, are
present); seq_len <= 64 whenever the student computes in float32 (float32 angles are then within F32 of the
reference's float64 angles rounded once); seq_len != num_heads except in the one check where they are equal
on purpose (a rotation along the head dim is then silent); batch >= 2 and random x of scale 2; position
pairs with pos_q != pos_k in both orders (a flipped rotation or swapped cos/sin then changes the score);
theta drawn in [100, 3000] for the theta checks (far from the default).

cos/sin given to apply_rotary_emb always come from the REFERENCE precompute_rope_freqs, so the apply
checks do not depend on the student's frequencies. rope_score uses the student's own two functions.

The sandbox cannot receive a torch.dtype argument (the wire format has no dtype value), so
precompute_rope_freqs is called with its default dtype (float32) only; its float64 path is exercised
through rope_score, which calls it with dtype=q.dtype.

When an output is wrong, it is compared (here, in the grader) with known-wrong variants of the reference
on the same inputs; a match names the mistake in the diagnosis.
"""

import torch

from autograder.checks import F32, F64, CheckFailed, Tol, check, expect_close, expect_true
from autograder.probes import describe_value
from solutions import rope as ref

BF16 = Tol(5e-2, 1e-1)  # bfloat16 output: a loose comparison (computing natively in bfloat16 also passes)


def randint(rng, low, high):
    """An int in [low, high], drawn from the check's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=rng))


def random_theta(rng):
    return round(float(10 ** (2 + 1.5 * torch.rand(1, generator=rng, dtype=torch.float64))), 3)


# --- known-wrong variants, for the diagnosis (grader side only, float64) ---------------------------


def _angles(dim, seq_len, theta, *, exponent=2.0, inverted=False, first_position=0):
    i = torch.arange(dim // 2, dtype=torch.float64)
    freqs = theta ** ((1 if inverted else -1) * exponent * i / dim)
    positions = torch.arange(first_position, first_position + seq_len, dtype=torch.float64)
    return torch.outer(positions, freqs)


FREQ_VARIANTS = {
    "位置从 1 开始了（约定：位置从 0 开始）": dict(first_position=1),
    "频率的指数写成了 -i/d（约定是 θ^(-2i/d)，i 是维度对的编号）": dict(exponent=1.0),
    "频率取成了 θ^(+2i/d)（指数的符号反了）": dict(inverted=True),
}


def freq_variants(dim, seq_len, theta):
    """(description, (cos, sin)) of the catalogued wrong frequency tables, in float64."""
    out = []
    for text, kwargs in FREQ_VARIANTS.items():
        a = _angles(dim, seq_len, theta, **kwargs)
        out.append((text, (a.cos(), a.sin())))
    a = _angles(dim, seq_len, theta)
    out.append(("cos 和 sin 写反了", (a.sin(), a.cos())))
    if theta != 10000.0:
        a = _angles(dim, seq_len, 10000.0)
        out.append(("没有使用参数 theta（按默认的 10000 算了）", (a.cos(), a.sin())))
    return out


def _rotate(x, cos, sin, *, pairing="adjacent", sign=1.0, swap=False, heads_as_positions=False):
    """RoPE in float64 with one slip: half-split pairing, opposite rotation, swapped cos/sin, or (for
    [B, H, S, D] input) cos/sin aligned with the head dim instead of the position dim."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    if swap:
        cos, sin = sin, cos
    if heads_as_positions:
        cos, sin = cos[:, None, :], sin[:, None, :]
    half = x.shape[-1] // 2
    if pairing == "half":
        x0, x1 = x[..., :half], x[..., half:]
    else:
        x0, x1 = x[..., 0::2], x[..., 1::2]
    y0, y1 = x0 * cos - sign * x1 * sin, x1 * cos + sign * x0 * sin
    if pairing == "half":
        return torch.cat([y0, y1], dim=-1)
    return torch.stack([y0, y1], dim=-1).flatten(-2)


APPLY_VARIANTS = {
    "配对方式用了前一半/后一半 (i, i + d/2)（Hugging Face 的 rotate_half）；本作业约定相邻配对 (2i, 2i+1)":
        dict(pairing="half"),
    "旋转方向反了：约定是 [x0·cos − x1·sin, x1·cos + x0·sin]（检查 sin 前的符号）": dict(sign=-1.0),
    "cos 和 sin 用反了": dict(swap=True),
}


def apply_variants(x, cos, sin):
    out = [(text, _rotate(x, cos, sin, **kwargs)) for text, kwargs in APPLY_VARIANTS.items()]
    if x.dim() == 4 and x.shape[1] == cos.shape[0]:
        out.append(("按倒数第三维（头的编号）而不是倒数第二维（位置）旋转了：输入是 [B, H, S, D]，"
                    "不要按形状去猜布局，也不要给 cos/sin 加维度", _rotate(x, cos, sin, heads_as_positions=True)))
    return out


def score_variants(q, k, pos_q, pos_k, theta):
    """Scores of the catalogued slips that change rope_score (a start position of 1 does not: the score
    depends only on pos_k - pos_q)."""
    n = max(pos_q, pos_k) + 1
    a = _angles(q.shape[0], n, theta)
    slips = [(text, c, s, {}) for text, (c, s) in freq_variants(q.shape[0], n, theta) if "位置从 1" not in text]
    slips += [(text, a.cos(), a.sin(), kwargs) for text, kwargs in APPLY_VARIANTS.items() if "sign" not in kwargs]
    out = []
    same_score = "旋转方向反了，或者 cos 和 sin 写反/用反了（这几种错误给出同样的分数）"
    for text, cos, sin, kwargs in slips:
        text = same_score if "cos 和 sin" in text else text
        qr = _rotate(q[None], cos[pos_q:pos_q + 1], sin[pos_q:pos_q + 1], **kwargs)[0]
        kr = _rotate(k[None], cos[pos_k:pos_k + 1], sin[pos_k:pos_k + 1], **kwargs)[0]
        out.append((text, torch.dot(qr, kr)))
    return out


def _matches(actual, expected, tol):
    if not isinstance(actual, torch.Tensor) or actual.shape != expected.shape or not actual.dtype.is_floating_point:
        return False
    if not torch.isfinite(actual).all():
        return False
    return bool(((actual.double() - expected.double()).abs() <= tol.atol + tol.rtol * expected.double().abs()).all())


def expect_close_diagnosed(actual, expected, tol, variants, what="输出"):
    """expect_close; when it fails, name the catalogued mistake whose output `actual` matches (if any)."""
    try:
        expect_close(actual, expected, tol, what)
    except CheckFailed as failure:
        if isinstance(actual, torch.Tensor) and actual.shape == (1, *expected.shape):
            raise CheckFailed(f"{failure.message}。看起来是：结果多了一个长度为 1 的前导维度，cos/sin 不需要 "
                              "unsqueeze(0)：广播从右往左对齐", failure.details, "cos/sin 多余的 unsqueeze(0)") from None
        loose = Tol(max(tol.rtol, 1e-4), max(tol.atol, 1e-4))
        diagnosis = next((text for text, wrong in variants if _matches(actual, wrong, loose)), None)
        if (diagnosis is None and expected.dtype == torch.float64 and _matches(actual, expected, Tol(1e-5, 1e-5))
                and not _matches(actual, expected, tol)):
            diagnosis = ("误差在 float32 的精度量级：float64 输入没有全程用 float64 计算"
                         "（例如无条件的 x.float()，或先用 float32 算角度再转换）")
        if diagnosis:
            raise CheckFailed(f"{failure.message}。看起来是：{diagnosis}", failure.details, diagnosis) from None
        raise


def expect_cos_sin(result, dim, seq_len, theta, tol):
    """`result` is (cos, sin), each equal to the reference table (float32)."""
    expect_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"precompute_rope_freqs 应该返回两个张量 (cos, sin)，你的返回 {describe_value(result)}"
                + (f"（{len(result)} 个值）" if isinstance(result, (tuple, list)) else ""))
    expected = ref.precompute_rope_freqs(dim, seq_len, theta=theta)
    wrong = freq_variants(dim, seq_len, theta)
    for i, name in enumerate(("cos", "sin")):
        expect_close_diagnosed(result[i], expected[i], tol, [(t, v[i]) for t, v in wrong], f"返回的 {name} ")


# --- rope_freqs -----------------------------------------------------------------------------------


@check("rope_freqs", points=1)
def test_freqs_float64(student, rng):
    """precompute_rope_freqs(..., dtype=torch.float64) 全程在 float64 中计算，返回 float64 的 cos 和 sin"""
    dim, seq_len = 2 * randint(rng, 5, 32), randint(rng, 20, 64)
    result = student.call("precompute_rope_freqs", dim, seq_len, dtype=torch.float64)
    expect_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"precompute_rope_freqs 应该返回两个张量 (cos, sin)，你的返回 {describe_value(result)}")
    expected = ref.precompute_rope_freqs(dim, seq_len, dtype=torch.float64)
    for i, name in enumerate(("cos", "sin")):
        expect_close(result[i], expected[i], F64, f"返回的 {name} ")


@check("rope_freqs", points=0.5)
def test_freqs_default_float32(student, rng):
    """precompute_rope_freqs 在默认 theta 和默认 dtype（float32）下，cos 和 sin 与参考实现一致"""
    dim, seq_len = 2 * randint(rng, 5, 32), randint(rng, 20, 64)
    result = student.call("precompute_rope_freqs", dim, seq_len)
    expect_cos_sin(result, dim, seq_len, 10000.0, F32)


@check("rope_freqs", points=1)
def test_freqs_theta(student, rng):
    """precompute_rope_freqs 使用传入的 theta（不是默认的 10000）"""
    dim, seq_len, theta = 2 * randint(rng, 5, 32), randint(rng, 20, 64), random_theta(rng)
    result = student.call("precompute_rope_freqs", dim, seq_len, theta=theta)
    expect_cos_sin(result, dim, seq_len, theta, F32)


@check("rope_freqs", points=0.5)
def test_freqs_shapes(student, rng):
    """precompute_rope_freqs 对不同的 dim、seq_len 返回形状 [seq_len, dim // 2] 的 float32 张量 (cos, sin)"""
    sizes = [(2, 1), (2 * randint(rng, 20, 40), randint(rng, 2, 9)), (2 * randint(rng, 2, 4), randint(rng, 30, 64))]
    for dim, seq_len in sizes:
        result = student.call("precompute_rope_freqs", dim, seq_len)
        expect_true(isinstance(result, (tuple, list)) and len(result) == 2,
                    f"precompute_rope_freqs 应该返回两个张量 (cos, sin)，你的返回 {describe_value(result)}")
        for name, t in zip(("cos", "sin"), result):
            expect_true(isinstance(t, torch.Tensor), f"返回的 {name} 应该是 torch.Tensor，你的是 {describe_value(t)}")
            expect_true(list(t.shape) == [seq_len, dim // 2],
                        f"返回的 {name} 形状应该是 [seq_len, dim // 2] = {[seq_len, dim // 2]}，你的是 {list(t.shape)}",
                        {"shape": list(t.shape), "expected_shape": [seq_len, dim // 2]})
            expect_true(t.dtype == torch.float32, f"默认 dtype 下返回的 {name} 应该是 torch.float32，你的是 {t.dtype}",
                        {"dtype": str(t.dtype)})


# --- rope_apply -----------------------------------------------------------------------------------


def apply_check(student, rng, shape, dtype, tol, x_dtype=None):
    """Random x of `shape` (scale 2) in `x_dtype or dtype`, cos/sin from the reference in `dtype`."""
    seq_len, d_head = shape[-2], shape[-1]
    x = 2 * torch.randn(shape, generator=rng, dtype=torch.float64)
    x = x.to(x_dtype or dtype)
    cos, sin = ref.precompute_rope_freqs(d_head, seq_len, dtype=dtype)
    expected = ref.apply_rotary_emb(x, cos, sin)
    actual = student.call("apply_rotary_emb", x, cos, sin)
    expect_close_diagnosed(actual, expected, tol, apply_variants(x, cos, sin))


@check("rope_apply", points=1)
def test_apply_seq_only_float32(student, rng):
    """apply_rotary_emb 对没有 batch 维的 [seq_len, d_head] 输入（float32）与参考实现一致，形状不变"""
    apply_check(student, rng, (randint(rng, 9, 64), 2 * randint(rng, 4, 16)), torch.float32, F32)


@check("rope_apply", points=1)
def test_apply_batched_float32(student, rng):
    """apply_rotary_emb 对 [B, H, seq_len, d_head] 输入（float32，头数与序列长度不同）与参考实现一致"""
    heads = randint(rng, 2, 4)
    apply_check(student, rng, (2, heads, randint(rng, 9, 40), 2 * randint(rng, 4, 12)), torch.float32, F32)


@check("rope_apply", points=1)
def test_apply_heads_equal_seq(student, rng):
    """apply_rotary_emb 对头数恰好等于序列长度的 [B, H, seq_len, d_head] 输入仍按位置（倒数第二维）旋转"""
    seq_len = randint(rng, 5, 9)
    apply_check(student, rng, (2, seq_len, seq_len, 2 * randint(rng, 4, 12)), torch.float32, F32)


@check("rope_apply", points=1.5)
def test_apply_float64(student, rng):
    """apply_rotary_emb 对 float64 的 [B, H, seq_len, d_head] 输入全程用 float64 计算，返回 float64，与参考实现一致"""
    apply_check(student, rng, (3, 2, randint(rng, 9, 40), 2 * randint(rng, 4, 12)), torch.float64, F64)


@check("rope_apply", points=0.5)
def test_apply_bfloat16(student, rng):
    """apply_rotary_emb 对 bfloat16 输入返回 bfloat16、形状不变，数值在半精度的误差内正确"""
    apply_check(student, rng, (2, 3, randint(rng, 9, 40), 2 * randint(rng, 4, 12)), torch.float32, BF16,
                x_dtype=torch.bfloat16)


# --- rope_relative --------------------------------------------------------------------------------


def position_pairs(rng):
    """Pairs with pos_q != pos_k in both orders, one at position 0, one far out; and one equal pair."""
    a, b, c = randint(rng, 1, 12), randint(rng, 3, 40), randint(rng, 50, 200)
    return [(0, a), (b, 0), (b + a, b), (c, c + a + 2), (c - b, c), (b, b)]


def score_check(student, rng, pairs, theta=None):
    d = 2 * randint(rng, 6, 12)
    q = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    k = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    for pos_q, pos_k in pairs:
        if theta is None:
            actual = student.call("rope_score", q, k, pos_q, pos_k)
            expected = ref.rope_score(q, k, pos_q, pos_k)
        else:
            actual = student.call("rope_score", q, k, pos_q, pos_k, theta=theta)
            expected = ref.rope_score(q, k, pos_q, pos_k, theta=theta)
        expect_close_diagnosed(actual, expected, F64, score_variants(q, k, pos_q, pos_k, theta or 10000.0),
                               "rope_score 的返回值")


@check("rope_relative", points=1.5)
def test_score_float64(student, rng):
    """rope_score 在 float64、多组位置（q 在前、k 在前、相距较远）下与参考实现一致，返回 float64 的 0 维张量"""
    score_check(student, rng, position_pairs(rng))


@check("rope_relative", points=0.5)
def test_score_theta(student, rng):
    """rope_score 使用传入的 theta（float64）"""
    theta = random_theta(rng)
    score_check(student, rng, position_pairs(rng)[:4], theta=theta)
