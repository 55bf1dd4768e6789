"""Checks of the rope assignment: precompute_rope_freqs, apply_rotary_emb, rope_score.

Inputs: dims >= 8 (so that pairs other than pair 0, whose frequency is 1 under every exponent slip, are
present); seq_len <= 64 whenever the student computes in float32 (float32 angles are then within F32 of the
reference's float64 angles rounded once); seq_len != num_heads except in the one check where they are equal
on purpose (a rotation along the head dim is then silent); batch >= 2 and random x of scale 2; position
pairs with pos_q != pos_k in both orders (a flipped rotation or swapped cos/sin then changes the score);
theta drawn in [316, 3162] for the theta checks (far from the default, and its square too).

cos/sin given to apply_rotary_emb always come from the REFERENCE precompute_rope_freqs, so the apply
checks do not depend on the student's frequencies. rope_score uses the student's own two functions.

The sandbox cannot receive a torch.dtype argument (the wire format has no dtype value), so
precompute_rope_freqs is called with its default dtype (float32) only; its float64 path is exercised
through rope_score, which calls it with dtype=q.dtype.

When an output is wrong, it is compared (here, in the grader) with the known-wrong variants of VARIANTS
on the same inputs (autograder.checks: a table is matched as a pair, the scores at every pair of positions
together); a match names the mistake. Several slips give the same rope_score (a reversed rotation, cos/sin
swapped in either function, pos_q and pos_k swapped; theta ignored in precompute_rope_freqs or not passed by
rope_score): one extra probe of the student's own precompute_rope_freqs / apply_rotary_emb names the one
candidate, and nothing is named when it cannot. When
nothing matches, the message localises the fault with properties of the outputs: cos² + sin² = 1,
position 0 and pair 0 of the table; norm preservation per position and position 0 = identity for the
rotation; the relative-position invariance of the score (one extra probe, both positions shifted).
"""

import torch

from autograder.catalogue.rope import VARIANTS  # noqa: F401 (VARIANTS: the plugin reads the module's catalogue)
from autograder.checks import (F32, F64, Tol, attempt, check, expect_call_precision, expect_close, expect_equal,
                               expect_float64_precision, expect_true, is_float_tensor, same_values)
from autograder.checks.probes import describe_value
from solutions import rope as ref

BF16 = Tol(5e-2, 1e-1)  # bfloat16 output: a loose comparison (computing natively in bfloat16 also passes)
F32_LEVEL = Tol(1e-6, 1e-6)  # same_values multiplies by 10: "equal up to float32 rounding"
LOOSE = Tol(1e-5, 1e-5)  # matching a variant whose value is far (>= 1e-2) from the reference and the others

# --- the catalogue of mistakes ----------------------------------------------------------------------



def randint(rng, low, high):
    """An int in [low, high], drawn from the check's generator."""
    return int(torch.randint(low, high + 1, (1,), generator=rng))


def random_theta(rng):
    """theta in [316, 3162]: far from 10000, and theta² far from 10000 too (θ^(-4i/d) = (θ²)^(-2i/d), so an
    exponent doubled would otherwise give the default table)."""
    return round(float(10 ** (2.5 + torch.rand(1, generator=rng, dtype=torch.float64))), 3)


def close(a, b, rtol, atol=None) -> bool:
    return bool(torch.allclose(a.double(), b.double(), rtol=rtol, atol=rtol if atol is None else atol))


# --- the variants, grader side only, float64 ------------------------------------------------------


def _angles(dim, seq_len, theta, *, exponent=2.0, inverted=False, first_position=0):
    i = torch.arange(dim // 2, dtype=torch.float64)
    freqs = theta ** ((1 if inverted else -1) * exponent * i / dim)
    positions = torch.arange(first_position, first_position + seq_len, dtype=torch.float64)
    return torch.outer(positions, freqs)


def _table(angles):
    return angles.cos(), angles.sin()


def table_variants(dim, seq_len, theta, expected):
    """(name, (cos, sin)) of the catalogued wrong tables, in float64, and the dtype not followed (a recogniser)."""
    a = _angles(dim, seq_len, theta)
    out = [
        ("positions_start_at_1", _table(_angles(dim, seq_len, theta, first_position=1))),
        ("exponent_i_over_d", _table(_angles(dim, seq_len, theta, exponent=1.0))),
        ("exponent_4i_over_d", _table(_angles(dim, seq_len, theta, exponent=4.0))),
        ("frequencies_inverted", _table(_angles(dim, seq_len, theta, inverted=True))),
        ("cos_sin_swapped", (a.sin(), a.cos())),
        ("table_transposed", (a.cos().T, a.sin().T)),
    ]
    if theta != 10000.0:
        out.append(("theta_ignored", _table(_angles(dim, seq_len, 10000.0))))

    def dtype_not_followed(result) -> bool:  # the values right up to float32 rounding, in another dtype
        return (all(same_values(t, e, F32_LEVEL) for t, e in zip(result, expected))
                and any(t.dtype != expected[0].dtype for t in result))

    return out + [("dtype_argument_ignored", dtype_not_followed)]


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


APPLY_SLIPS = {"half_split_pairing": dict(pairing="half"), "rotation_sign_flipped": dict(sign=-1.0),
               "apply_cos_sin_swapped": dict(swap=True)}


def _score(q, k, pos_q, pos_k, cos, sin, **slip):
    qr = _rotate(q[None], cos[pos_q:pos_q + 1], sin[pos_q:pos_q + 1], **slip)[0]
    kr = _rotate(k[None], cos[pos_k:pos_k + 1], sin[pos_k:pos_k + 1], **slip)[0]
    return torch.dot(qr, kr)


# --- rope_freqs -----------------------------------------------------------------------------------


def expect_pair(result):
    expect_true(isinstance(result, (tuple, list)) and len(result) == 2,
                f"precompute_rope_freqs 应该返回两个张量 (cos, sin)，你的返回 {describe_value(result)}"
                + (f"（{len(result)} 个值）" if isinstance(result, (tuple, list)) else ""))


def loosened(tol: Tol) -> Tol:
    """A variant matches to float32 rounding at least: the variants are float64, a student may compute in float32."""
    return Tol(max(tol.rtol, F32_LEVEL.rtol), max(tol.atol, F32_LEVEL.atol))


def localise_table(result, expected) -> str | None:
    """Properties of a wrong table: cos² + sin² = 1, position 0 is angle 0, pair 0 has frequency 1."""
    shape = tuple(expected[0].shape)
    if not all(is_float_tensor(t, shape) for t in result):
        return None
    c, s = result[0].double(), result[1].double()
    if all(close(r, e, 1e-4) for r, e in zip(result, expected)):
        return None  # a small error only: nothing structural to point at
    if not close(c ** 2 + s ** 2, torch.ones_like(c), 1e-4):
        return "cos² + sin² 不等于 1：返回的 cos 和 sin 不是同一个角度的余弦和正弦"
    if not (close(c[0], torch.ones_like(c[0]), 1e-4) and close(s[0], torch.zeros_like(s[0]), 1e-4)):
        return "位置 0 的旋转角应该是 0（cos 全为 1、sin 全为 0），你的不是：位置要从 0 开始"
    p = torch.arange(shape[0], dtype=torch.float64)
    if not (close(c[:, 0], p.cos(), 1e-4) and close(s[:, 0], p.sin(), 1e-4)):
        return "第 0 对（第 0、1 维）的频率应该是 1，即位置 p 的旋转角就是 p 弧度，你的不是"
    return "位置 0 和第 0 对都对，其余维度对的频率不对：第 i 对的频率应该是 θ^(-2i/d)"


def expect_table(result, dim, seq_len, theta, dtype, tol):
    """`result` is (cos, sin), each equal to the reference table in `dtype`."""
    expect_pair(result)
    expected = ref.precompute_rope_freqs(dim, seq_len, theta=theta, dtype=dtype)
    for i, name in enumerate(("cos", "sin")):
        expect_close(result[i], expected[i], tol, f"返回的 {name} ", match_tol=loosened(tol),
                     variants=lambda: table_variants(dim, seq_len, theta, expected), evidence=(tuple(result), expected),
                     hint=lambda actual, right: localise_table(result, expected))


@check("rope_freqs", points=0.5)
def test_freqs_float64(student, rng):
    """precompute_rope_freqs(..., dtype=torch.float64) 全程在 float64 中计算，返回 float64 的 cos 和 sin"""
    dim, seq_len = 2 * randint(rng, 5, 32), randint(rng, 20, 64)
    result = student.call("precompute_rope_freqs", dim, seq_len, dtype=torch.float64)
    expect_table(result, dim, seq_len, 10000.0, torch.float64, F64)


@check("rope_freqs", points=0.5)
def test_freqs_float64_precision(student, rng):
    """precompute_rope_freqs(..., dtype=torch.float64) 的角度全程用 float64 计算：cos 和 sin 与参考一致到 float64 的精度"""
    dim, seq_len = 2 * randint(rng, 5, 32), randint(rng, 40, 64)
    result = student.call("precompute_rope_freqs", dim, seq_len, dtype=torch.float64)
    expect_pair(result)
    expected = ref.precompute_rope_freqs(dim, seq_len, dtype=torch.float64)
    for i, name in enumerate(("cos", "sin")):
        expect_float64_precision(result[i], expected[i], f"返回的 {name} ")


@check("rope_freqs", points=0.5)
def test_freqs_default_float32(student, rng):
    """precompute_rope_freqs 在默认 theta 和默认 dtype（float32）下，cos 和 sin 与参考实现一致"""
    dim, seq_len = 2 * randint(rng, 5, 32), randint(rng, 20, 64)
    result = student.call("precompute_rope_freqs", dim, seq_len)
    expect_table(result, dim, seq_len, 10000.0, torch.float32, F32)


@check("rope_freqs", points=1)
def test_freqs_theta(student, rng):
    """precompute_rope_freqs 使用传入的 theta（不是默认的 10000）"""
    dim, seq_len, theta = 2 * randint(rng, 5, 32), randint(rng, 20, 64), random_theta(rng)
    result = student.call("precompute_rope_freqs", dim, seq_len, theta=theta)
    expect_table(result, dim, seq_len, theta, torch.float32, F32)


@check("rope_freqs", points=0.5)
def test_freqs_shapes(student, rng):
    """precompute_rope_freqs 对不同的 dim、seq_len 返回形状 [seq_len, dim // 2] 的 float32 张量 (cos, sin)"""
    sizes = [(2, 1), (2 * randint(rng, 20, 40), randint(rng, 2, 9)), (2 * randint(rng, 2, 4), randint(rng, 30, 64))]
    for dim, seq_len in sizes:
        result = student.call("precompute_rope_freqs", dim, seq_len)
        expect_pair(result)
        expected = ref.precompute_rope_freqs(dim, seq_len)
        for name, t, e in zip(("cos", "sin"), result, expected):
            expect_true(isinstance(t, torch.Tensor), f"返回的 {name} 应该是 torch.Tensor，你的是 {describe_value(t)}")
            expect_equal(list(t.shape), [seq_len, dim // 2],
                         f"返回的 {name} 形状应该是 [seq_len, dim // 2] = {[seq_len, dim // 2]}，你的是 {list(t.shape)}",
                         {"shape": list(t.shape), "expected_shape": [seq_len, dim // 2]},
                         variants=[("table_transposed", lambda shape, t=t, e=e: shape == [dim // 2, seq_len]
                                    and same_values(t, e.T, F32))])
            expect_equal(t.dtype, torch.float32, f"默认 dtype 下返回的 {name} 应该是 torch.float32，你的是 {t.dtype}",
                         {"dtype": str(t.dtype)},
                         variants=[("dtype_argument_ignored", lambda dtype, t=t, e=e: same_values(t, e, F32_LEVEL))])


# --- rope_apply -----------------------------------------------------------------------------------


def apply_variants(x, cos, sin, expected) -> list:
    """(name, output) of the catalogued rotations, in float64, and the half type not restored (a recogniser)."""
    candidates = [(name, _rotate(x, cos, sin, **slip)) for name, slip in APPLY_SLIPS.items()]
    candidates.append(("cos_sin_unsqueezed", expected[None]))
    if x.dim() == 4 and x.shape[1] == cos.shape[0]:
        candidates.append(("rotated_along_heads", _rotate(x, cos, sin, heads_as_positions=True)))
    if x.dtype in (torch.float16, torch.bfloat16):
        candidates.append(("output_dtype_not_restored", lambda actual: isinstance(actual, torch.Tensor)
                           and actual.dtype != x.dtype and same_values(actual, _rotate(x, cos, sin), LOOSE)))
    return candidates


def localise_apply(actual, x, expected) -> str | None:
    """Properties of a wrong rotation: the norm of each position's vector is kept, position 0 is unchanged."""
    if not is_float_tensor(actual, tuple(x.shape)):
        return None
    rtol = 3e-2 if x.dtype in (torch.float16, torch.bfloat16) else 1e-4
    if close(actual, expected, rtol):
        return None  # a small error only
    a, xd = actual.double(), x.double()
    if not close(a.norm(dim=-1), xd.norm(dim=-1), rtol):
        return ("旋转应该保持每个位置的向量长度（沿最后一维的范数）不变，你的输出改变了长度：检查每一对的两个分量"
                "是否用同一个角度的 cos 和 sin 旋转、每个分量是否都只用了一次")
    if not close(a[..., 0, :], xd[..., 0, :], rtol):
        return "位置 0 的旋转角是 0，输出在位置 0 应该等于输入，你的不等：检查 cos/sin 是否沿倒数第二维（位置）对齐"
    return ("你的输出保持了每个位置的长度，位置 0 也不变，但旋转本身不对：检查相邻配对 (2i, 2i+1)、"
            "旋转公式和 cos/sin 沿哪一维对齐")


def apply_check(student, rng, shape, dtype, tol, x_dtype=None):
    """Random x of `shape` (scale 2) in `x_dtype or dtype`, cos/sin from the reference in `dtype`."""
    seq_len, d_head = shape[-2], shape[-1]
    x = 2 * torch.randn(shape, generator=rng, dtype=torch.float64)
    x = x.to(x_dtype or dtype)
    cos, sin = ref.precompute_rope_freqs(d_head, seq_len, dtype=dtype)
    expected = ref.apply_rotary_emb(x, cos, sin)
    half_type = x.dtype in (torch.float16, torch.bfloat16)
    expect_close(student.call("apply_rotary_emb", x, cos, sin), expected, tol,
                 match_tol=Tol(1e-2, 1e-2) if half_type else loosened(tol),
                 variants=lambda: apply_variants(x, cos, sin, expected),
                 hint=lambda actual, right: localise_apply(actual, x, expected))


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


@check("rope_apply", points=1)
def test_apply_float64(student, rng):
    """apply_rotary_emb 对 float64 的 [B, H, seq_len, d_head] 输入全程用 float64 计算，返回 float64，与参考实现一致"""
    apply_check(student, rng, (3, 2, randint(rng, 9, 40), 2 * randint(rng, 4, 12)), torch.float64, F64)


@check("rope_apply", points=0.5)
def test_apply_float64_precision(student, rng):
    """apply_rotary_emb 对 float64 输入全程用 float64 计算：与参考一致到 float64 的精度"""
    shape = (2, 3, randint(rng, 9, 40), 2 * randint(rng, 4, 12))
    x = 2 * torch.randn(shape, generator=rng, dtype=torch.float64)
    cos, sin = ref.precompute_rope_freqs(shape[-1], shape[-2], dtype=torch.float64)
    expect_call_precision(student, ref.apply_rotary_emb, (x, cos, sin))


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


def score_variants(student, pairs, q, k, theta) -> list:
    """(name, the scores at every pair of positions) of the catalogued slips, in float64. Slips with the same scores
    are one candidate whose name one probe of the student's own precompute_rope_freqs (float32, the only dtype the
    sandbox can pass) or apply_rotary_emb decides; nothing is named when the probe does not decide."""
    d, n = q.shape[0], max(max(pair) for pair in pairs) + 1

    def scores(cos, sin, **slip):
        return tuple(_score(q, k, pos_q, pos_k, cos, sin, **slip) for pos_q, pos_k in pairs)

    cos, sin = _table(_angles(d, n, theta))
    theta_kw = {} if theta == 10000.0 else {"theta": theta}
    candidates = [
        ("score_ignores_positions", tuple(torch.dot(q, k) for _ in pairs)),
        ("exponent_i_over_d", scores(*_table(_angles(d, n, theta, exponent=1.0)))),
        ("exponent_4i_over_d", scores(*_table(_angles(d, n, theta, exponent=4.0)))),
        ("frequencies_inverted", scores(*_table(_angles(d, n, theta, inverted=True)))),
        ("half_split_pairing", scores(cos, sin, pairing="half")),
        (reversed_rotation(student, q, d, n, theta_kw, cos, sin), scores(cos, sin, sign=-1.0)),
    ]
    if theta_kw:
        candidates.append((theta_not_used(student, d, n, theta), scores(*_table(_angles(d, n, 10000.0)))))
    return candidates


def theta_not_used(student, d, n, theta):
    """The name, by one probe, of the scores computed with the default theta: theta ignored by
    precompute_rope_freqs, or not passed to it by rope_score."""
    def name():
        table = attempt(student.call, "precompute_rope_freqs", d, n, theta=theta)
        if isinstance(table, (tuple, list)) and len(table) == 2:
            if all(same_values(t, e, F32) for t, e in zip(table, ref.precompute_rope_freqs(d, n, theta=theta))):
                return "score_theta_not_passed"
            if all(same_values(t, e, F32) for t, e in zip(table, ref.precompute_rope_freqs(d, n))):
                return "theta_ignored"
        return None
    return name


def reversed_rotation(student, q, d, n, theta_kw, cos, sin):
    """The name, by probes, of the scores of a reversed rotation: in the table, in the rotation, or pos_q and pos_k
    swapped."""
    def name():
        table = attempt(student.call, "precompute_rope_freqs", d, n, **theta_kw)
        right = ref.precompute_rope_freqs(d, n, **theta_kw)
        table_ok = False
        if isinstance(table, (tuple, list)) and len(table) == 2:
            if all(same_values(t, e, F32) for t, e in zip(table, right[::-1])):
                return "cos_sin_swapped"
            table_ok = all(same_values(t, e, F32) for t, e in zip(table, right))
        x = q.expand(n, d).clone()
        rotated = attempt(student.call, "apply_rotary_emb", x, cos, sin)
        for slip in ("rotation_sign_flipped", "apply_cos_sin_swapped"):
            if same_values(rotated, _rotate(x, cos, sin, **APPLY_SLIPS[slip]), LOOSE):
                return slip
        if table_ok and same_values(rotated, _rotate(x, cos, sin), LOOSE):
            return "score_positions_swapped"
        return None
    return name


def localise_score(student, actual, expected, q, k, pos_q, pos_k, theta_kw) -> str | None:
    """Properties of a wrong score: equal positions give q·k; shifting both positions keeps the score."""
    if not is_float_tensor(actual, tuple(expected.shape)):
        return None
    a, e = float(actual), float(expected)
    if abs(a - e) <= 1e-3 * max(1.0, abs(e)):
        return ("误差很小，在 float32 精度的量级：计算链中某处没有用 float64——检查 rope_score 调用 precompute_rope_freqs "
                "时是否传了 dtype=q.dtype，以及两个函数对 float64 输入是否全程用 float64 计算")
    if pos_q == pos_k:
        return "两个位置相同时，q 和 k 转同样的角度、互相抵消，分数应该等于 q·k，你的不是"
    shifted = attempt(student.call, "rope_score", q, k, pos_q + 7, pos_k + 7, **theta_kw)
    if not is_float_tensor(shifted) or shifted.numel() != 1:
        return None
    if abs(float(shifted) - a) > 1e-6 * max(1.0, abs(a)):
        return ("相对位置性质不成立：把 pos_q 和 pos_k 同时加上同一个数，你的分数变了。RoPE 的分数应该只取决于 "
                "pos_k − pos_q：检查 q、k 是否分别按 pos_q、pos_k 旋转，并且用同一套 cos/sin")
    return ("你的分数满足相对位置性质（两个位置同时平移时不变），但数值不对：检查频率 θ^(-2i/d)、"
            "相邻配对 (2i, 2i+1) 和旋转公式")


def score_check(student, rng, pairs, theta=None):
    d = 2 * randint(rng, 6, 12)
    q = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    k = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    theta_kw = {} if theta is None else {"theta": theta}
    actuals = []
    expected = [ref.rope_score(q, k, pos_q, pos_k, **theta_kw) for pos_q, pos_k in pairs]

    def every_pair():  # the scores at the remaining pairs too: a variant must explain all of them
        rest = [attempt(student.call, "rope_score", q, k, *pair, **theta_kw) for pair in pairs[len(actuals):]]
        return tuple(actuals + rest), tuple(expected)

    for (pos_q, pos_k), right in zip(pairs, expected):
        actual = student.call("rope_score", q, k, pos_q, pos_k, **theta_kw)
        actuals.append(actual)
        expect_close(actual, right, F64, "rope_score 的返回值", match_tol=LOOSE, evidence=every_pair,
                     variants=lambda: score_variants(student, pairs, q, k, theta or 10000.0),
                     hint=lambda actual, right, pos_q=pos_q, pos_k=pos_k: localise_score(
                         student, actual, right, q, k, pos_q, pos_k, theta_kw))


@check("rope_relative", points=1)
def test_score_float64(student, rng):
    """rope_score 在 float64、多组位置（q 在前、k 在前、相距较远）下与参考实现一致，返回 float64 的 0 维张量"""
    score_check(student, rng, position_pairs(rng))


@check("rope_relative", points=0.5)
def test_score_float64_precision(student, rng):
    """rope_score 对 float64 的 q、k 全程用 float64 计算：与参考一致到 float64 的精度（相距较远的位置）"""
    d = 2 * randint(rng, 6, 12)
    q = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    k = 1.5 * torch.randn(d, generator=rng, dtype=torch.float64)
    pos_q, pos_k = randint(rng, 30, 60), randint(rng, 0, 10)
    expect_call_precision(student, ref.rope_score, (q, k, pos_q, pos_k), what="rope_score 的返回值")


@check("rope_relative", points=0.5)
def test_score_theta(student, rng):
    """rope_score 使用传入的 theta（float64）"""
    theta = random_theta(rng)
    score_check(student, rng, position_pairs(rng)[:4], theta=theta)
