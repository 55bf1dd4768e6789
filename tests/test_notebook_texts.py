"""What the notebooks' texts claim is what their own code does.

Each claim is read from the notebook (a regular expression on the markdown, or the messages of a self-check cell) and
compared with numbers computed by running the notebook's code: change the text or the code alone and a test fails.
"""

import ast
import contextlib
import io
import math
import re

import nbformat
import pytest
import torch

from conftest import STUDENT_IDS, source_notebook
from notebook_exec import execute_notebook
from solutions import swiglu as swiglu_reference

NUMBER = r"\d+(?:\.\d+)?"


def notebook(assignment_id):
    return nbformat.read(source_notebook(assignment_id), as_version=4)


def cell_by_grade_id(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def only_cell(nb, marker, cell_type):
    found = [c for c in nb.cells if c.cell_type == cell_type and marker in c.source]
    assert len(found) == 1, f"{len(found)} {cell_type} cells contain {marker!r}"
    return found[0]


def run_cells(nb, *grade_ids):
    """The namespace left by running the given code cells of a notebook (torch and math imported, as in its setup)."""
    namespace = {"torch": torch, "math": math, "nn": torch.nn, "F": torch.nn.functional}
    for grade_id in grade_ids:
        exec(compile(cell_by_grade_id(nb, grade_id).source, grade_id, "exec"), namespace)
    return namespace


def decimals(text):
    return len(text.split(".")[1]) if "." in text else 0


def agrees(stated: str, value: float, printed_decimals: int | None = None) -> bool:
    """The stated number is `value` rounded to the stated decimals; `value` as printed with `printed_decimals`
    (the same number when the decimals are the same, else to within both roundings)."""
    if printed_decimals == decimals(stated):
        return abs(float(stated) - value) < 1e-9
    slack = 0.5 * 10 ** -decimals(stated)
    if printed_decimals is not None:
        slack += 0.5 * 10 ** -printed_decimals
    return abs(float(stated) - value) <= slack + 1e-12


# ---------------------------------------------------------------- rope: the rope_freqs self-check

ROPE = notebook("rope")
FREQS_CHECK = cell_by_grade_id(ROPE, "rope_freqs").source
FREQS_CODE = cell_by_grade_id(ROPE, "rope_freqs_code").source


def formula_messages(check_source):
    """Every fixed message the self-check gives for a wrong formula: assert messages and the third argument of
    _property_holds (the precision message is the one that is built at run time)."""
    messages = set()
    for node in ast.walk(ast.parse(check_source)):
        if isinstance(node, ast.Assert) and isinstance(node.msg, ast.Constant):
            messages.add(node.msg.value)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "_property_holds":
            assert isinstance(node.args[2], ast.Constant)
            messages.add(node.args[2].value)
    return messages


def freqs_variant(*replacements):
    """The notebook's own precompute_rope_freqs with some lines changed."""
    source = FREQS_CODE
    for old, new in replacements:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    return source


FLOAT32_FREQS = ("freqs = theta ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)",
                 "freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))")
FLOAT32_POSITIONS = ("positions = torch.arange(seq_len, dtype=torch.float64)",
                     "positions = torch.arange(seq_len).float()")
COS_SIN_IN_DTYPE = ("return angles.cos().to(dtype), angles.sin().to(dtype)",
                    "angles = angles.to(dtype)\n    return angles.cos(), angles.sin()")
POSITIONS_TO_THE_POWER = ("angles = torch.outer(positions, freqs)  # [seq_len, dim // 2]",
                          "angles = positions[:, None] ** freqs[None, :]")
POSITIONS_FROM_1 = ("positions = torch.arange(seq_len, dtype=torch.float64)",
                    "positions = torch.arange(1, seq_len + 1, dtype=torch.float64)")
POSITIONS_FROM_1_FLOAT32 = ("positions = torch.arange(seq_len, dtype=torch.float64)",
                            "positions = torch.arange(1, seq_len + 1).float()")
SQUARED_POSITIONS = ("angles = torch.outer(positions, freqs)  # [seq_len, dim // 2]",
                     "angles = torch.outer(positions ** 2, freqs)")


def run_freqs_check(code_source):
    """Run the rope_freqs self-check against an implementation: None if it passes, else its message."""
    namespace = {"torch": torch, "math": math}
    exec(code_source, namespace)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            exec(FREQS_CHECK, namespace)
        except AssertionError as error:
            return str(error)
    assert "✅" in out.getvalue()
    return None


def test_rope_freqs_self_check_passes_the_reference():
    assert run_freqs_check(FREQS_CODE) is None


@pytest.mark.parametrize("replacements", [
    pytest.param((FLOAT32_FREQS, FLOAT32_POSITIONS), id="chapter: angles and cos/sin in float32"),
    pytest.param((FLOAT32_FREQS, FLOAT32_POSITIONS, COS_SIN_IN_DTYPE), id="angles in float32, cos/sin in float64"),
])
def test_rope_freqs_self_check_says_precision_for_float32_angles(replacements):
    message = run_freqs_check(freqs_variant(*replacements))
    assert message is not None, "float32 angles must not pass the float64 self-check"
    assert message not in formula_messages(FREQS_CHECK), f"a right formula in float32 is blamed on the formula: {message}"
    assert "精度" in message and "float32" in message and "float64" in message, message


@pytest.mark.parametrize("replacements", [
    pytest.param((POSITIONS_TO_THE_POWER,), id="p ** omega, float64"),
    pytest.param((FLOAT32_FREQS, FLOAT32_POSITIONS, POSITIONS_TO_THE_POWER, COS_SIN_IN_DTYPE),
                 id="p ** omega, float32"),
    pytest.param((SQUARED_POSITIONS,), id="p squared, float64"),
    pytest.param((FLOAT32_FREQS, FLOAT32_POSITIONS, SQUARED_POSITIONS, COS_SIN_IN_DTYPE), id="p squared, float32"),
    pytest.param((POSITIONS_FROM_1,), id="positions from 1"),
    pytest.param((FLOAT32_FREQS, POSITIONS_FROM_1_FLOAT32, COS_SIN_IN_DTYPE), id="positions from 1, float32"),
])
def test_rope_freqs_self_check_blames_a_wrong_formula_on_the_formula(replacements):
    message = run_freqs_check(freqs_variant(*replacements))
    assert message in formula_messages(FREQS_CHECK), f"a wrong formula gets: {message}"


# ---------------------------------------------------------------- rope: the [B, S, H, D] layout note

def chapter_apply_rotary_emb(x, cos, sin):
    """The chapter's apply_rotary_emb (§4, "RoPE 完整实现"), as printed there."""
    x_reshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    x1, x2 = x_reshaped[..., 0], x_reshaped[..., 1]
    cos = cos.unsqueeze(0)
    sin = sin.unsqueeze(0)
    rot1 = x1 * cos - x2 * sin
    rot2 = x2 * cos + x1 * sin
    rotated = torch.stack([rot1, rot2], dim=-1).flatten(-2)
    return rotated.type_as(x)


def hinted_apply_rotary_emb(x, cos, sin):
    """The shortest implementation the notebook's hint leads to: broadcasting only, no shape check, no unsqueeze."""
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], dim=-1).flatten(-2)


def layout_bullets():
    """The note's bullets about [B, S, H, D] input, keyed by their case (the text before the first '：')."""
    note = only_cell(ROPE, "关于广播", "markdown").source
    lines = [re.sub(r"^>\s?", "", line) for line in note.splitlines()]
    bullets, current = {}, None
    for line in lines:
        if line.startswith("- "):
            case, _, rest = line[2:].partition("：")
            current = re.sub(r"（.*?）", "", case).strip()  # "H = 1（例如 …）" is the case "H = 1"
            bullets[current] = rest
        elif current is not None and line.startswith("  "):
            bullets[current] += line.strip()
        else:
            current = None
    return bullets


SHAPE = re.compile(r"`\[([A-Z0-9, ]+)\]`")
B, S, D = 2, 5, 8
CASES = {"H = 1": 1, "H ≠ S 且 H ≠ 1": 3, "H == S": S}


def shape_of(symbols, sizes):
    return tuple(sizes[s.strip()] if not s.strip().isdigit() else int(s) for s in symbols.split(","))


@pytest.mark.parametrize("implementation", [chapter_apply_rotary_emb, hinted_apply_rotary_emb],
                         ids=["chapter (cos.unsqueeze(0))", "hint (broadcast only)"])
@pytest.mark.parametrize("case", CASES)
def test_layout_note_describes_what_bshd_input_does(case, implementation):
    bullets = layout_bullets()
    assert set(CASES) <= set(bullets), f"the note should describe every case {sorted(CASES)}, it has {sorted(bullets)}"
    claim = bullets[case]
    H = CASES[case]
    rope = run_cells(ROPE, "rope_freqs_code", "rope_apply_code")
    cos, sin = rope["precompute_rope_freqs"](D, S)
    torch.manual_seed(0)
    x = torch.randn(B, S, H, D)  # [B, S, H, D]: positions in dim 1
    says_error = "报形状错误" in claim and "不报错" not in claim
    assert says_error or "不报错" in claim, f"{case}: the note should say whether it raises: {claim}"
    if says_error:
        with pytest.raises(RuntimeError):
            implementation(x, cos, sin)
        return
    out = implementation(x, cos, sin)
    sizes = {"B": B, "S": S, "H": H, "D": D}
    shapes = SHAPE.findall(claim)
    if shapes:  # "`[input]` ... `[output]`"
        assert shape_of(shapes[0], sizes) == tuple(x.shape), f"{case}: the note's input shape {shapes[0]}"
        assert tuple(out.shape) == shape_of(shapes[-1], sizes), \
            f"{case}: the note says {shapes[-1]}, got {list(out.shape)}"
    if "形状也不变" in claim:
        assert out.shape == x.shape
    apply = rope["apply_rotary_emb"]
    if "按头的编号" in claim:  # what it did: each [B, H, D] slice rotated as if H were the positions
        for s in range(S):
            assert torch.allclose(out[:, s], apply(x[:, s], cos, sin), atol=1e-6)
        right = apply(x.transpose(1, 2), cos, sin).transpose(1, 2)
        assert not torch.allclose(out, right, atol=1e-3)
    if "各转了一遍" in claim:  # out[:, s, j] is position s's vector rotated to position j
        for s in range(S):
            every_position = x[:, s, 0, None, :].expand(B, S, D)
            assert torch.allclose(out[:, s], apply(every_position, cos, sin), atol=1e-6)


# ---------------------------------------------------------------- swiglu: the derivative of swish

SWIGLU = notebook("swiglu")
SWIGLU_TEXT = "\n".join(c.source for c in SWIGLU.cells if c.cell_type == "markdown")


def swish_derivative(swish, a):
    a = a.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(swish(a).sum(), a)
    return grad


def test_swish_derivative_is_zero_where_the_text_says():
    swish = run_cells(SWIGLU, "swish_code")["swish"]
    grid = torch.linspace(-8.0, 4.0, 120001, dtype=torch.float64)
    grad = swish_derivative(swish, grid)
    changes = torch.nonzero(torch.sign(grad[:-1]) != torch.sign(grad[1:])).flatten()
    assert len(changes) == 1, f"the derivative changes sign {len(changes)} times on [-8, 4]"
    if "左边导数为负，右边为正" in SWIGLU_TEXT:
        assert grad[changes[0]] < 0 < grad[changes[0] + 1]
    lo, hi = grid[changes[0]].item(), grid[changes[0] + 1].item()
    for _ in range(60):  # bisection on the autograd derivative
        mid = (lo + hi) / 2
        if swish_derivative(swish, torch.tensor([mid], dtype=torch.float64)).item() < 0:
            lo = mid
        else:
            hi = mid
    root = (lo + hi) / 2
    assert abs(root + 1.2785) < 1e-3
    # the text: the table row and every "a ≈ -x" it states
    row = next(line for line in SWIGLU_TEXT.splitlines() if line.startswith("| 负数区的导数"))
    stated = re.findall(r"a \\approx -(" + NUMBER + r")", SWIGLU_TEXT)
    assert re.search(r"-(" + NUMBER + r")", row), f"the table row should name the zero of the derivative: {row}"
    assert stated, "the text should say where the derivative is 0"
    for number in stated:
        assert decimals(number) >= 2 and agrees(number, -root), \
            f"the text says a ≈ -{number}, autograd finds {root:.4f}"
    # the minimum value of swish, where the text states it
    for number in re.findall(r"最小值，约 \$-(" + NUMBER + r")\$", SWIGLU_TEXT):
        minimum = swish(torch.tensor(root, dtype=torch.float64)).item()
        assert agrees(number, -minimum), f"the text says the minimum is -{number}, it is {minimum:.4f}"


# ---------------------------------------------------------------- swiglu: the default d_ff examples

EXAMPLE = re.compile(r"`default_d_ff\((\d+)\)` = (\d+)（中间值 `int\(8/3 \* (\d+)\)` = (\d+)")
ARROW = re.compile(r"(\d+) → (\d+)")


def round_up_256(n):
    return (n + 255) // 256 * 256


def test_default_d_ff_examples_are_what_the_function_returns():
    notebook_default_d_ff = run_cells(SWIGLU, "swiglu_module_code")["default_d_ff"]
    examples = EXAMPLE.findall(SWIGLU_TEXT)
    assert examples, "the text should give default_d_ff examples"
    for d_model, result, d_model_again, intermediate in map(lambda t: tuple(map(int, t)), examples):
        assert d_model == d_model_again
        assert int(8 / 3 * d_model) == intermediate, \
            f"int(8/3 * {d_model}) is {int(8 / 3 * d_model)}, the text says {intermediate}"
        assert swiglu_reference.default_d_ff(d_model) == result, f"default_d_ff({d_model}) is not {result}"
        assert notebook_default_d_ff(d_model) == result
        assert max(round_up_256(intermediate), d_model) == result
    # a bare "x → y" reads as d_model → default_d_ff; after 中间值 it is the rounding step
    for match in ARROW.finditer(SWIGLU_TEXT):
        x, y = int(match[1]), int(match[2])
        if "中间值" in SWIGLU_TEXT[max(0, match.start() - 30):match.start()]:
            assert round_up_256(x) == y, f"{match[0]}: rounding up {x} to a multiple of 256 gives {round_up_256(x)}"
        else:
            assert swiglu_reference.default_d_ff(x) == y, \
                f"{match[0]}: default_d_ff({x}) is {swiglu_reference.default_d_ff(x)}"


# ---------------------------------------------------------------- gradient_flow: the depth experiment

DEMO_MARK = 'print("loss 和各层权重梯度的 L2 范数（比值 = 第 1 层 / 最后一层）")'
SWEEP_MARK = "sweep_depths = "
DEMO_ROW = re.compile(
    rf"^\s*(\d+)\s+(Post-Norm|Pre-Norm)\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s+({NUMBER})\s*$", re.M)
SWEEP_ROW = re.compile(
    rf"^\s*({NUMBER})\s+(\d+)\s+(Post-Norm|Pre-Norm)\s+({NUMBER}) ~\s+({NUMBER})\s+({NUMBER}) ~\s+({NUMBER})\s*$", re.M)


@pytest.fixture(scope="module")
def gradient_flow_run():
    """The source notebook run in a kernel: the markdown above each demo and what the demo printed."""
    nb, errors = execute_notebook(source_notebook("gradient_flow"), STUDENT_IDS[0])
    assert errors == []
    index = {}
    for name, mark in (("demo", DEMO_MARK), ("sweep", SWEEP_MARK)):
        found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and mark in c.source]
        assert len(found) == 1, f"one code cell should contain {mark!r}, found {len(found)}"
        index[name] = found[0]

    def printed(i):
        return "".join(o.get("text", "") for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "stream")

    def markdown_above(i):
        assert nb.cells[i - 1].cell_type == "markdown"
        return nb.cells[i - 1].source

    demo = {(int(d), name): {"loss": float(loss), "first": float(first), "ratio": float(ratio)}
            for d, name, loss, first, _last, ratio in DEMO_ROW.findall(printed(index["demo"]))}
    sweep = {(float(g), int(d), name): {"ratio": (float(r0), float(r1)), "first": (float(f0), float(f1))}
             for g, d, name, r0, r1, f0, f1 in SWEEP_ROW.findall(printed(index["sweep"]))}
    return {"demo_text": markdown_above(index["demo"]), "demo": demo, "demo_printed": printed(index["demo"]),
            "sweep_text": markdown_above(index["sweep"]), "sweep": sweep}


@pytest.mark.slow
def test_demo_prints_loss_layer1_gradient_and_ratio(gradient_flow_run):
    demo, sweep = gradient_flow_run["demo"], gradient_flow_run["sweep"]
    assert set(demo) == {(d, n) for d in (8, 32) for n in ("Post-Norm", "Pre-Norm")}, gradient_flow_run["demo_printed"]
    assert set(sweep) == {(g, d, n) for g in (1.0, 3.0) for d in (8, 32, 64) for n in ("Post-Norm", "Pre-Norm")}
    for row in sweep.values():  # the absolute layer-1 gradients beside the ratio
        assert 0 < row["first"][0] <= row["first"][1] and 0 < row["ratio"][0] <= row["ratio"][1]


@pytest.mark.slow
def test_demo_text_states_the_printed_numbers(gradient_flow_run):
    text, demo = gradient_flow_run["demo_text"], gradient_flow_run["demo"]
    # the ratios: "8 层时 Post-Norm 1.22、Pre-Norm 1.33"
    ratio_claims = re.findall(rf"(\d+) 层时 Post-Norm ({NUMBER})、Pre-Norm ({NUMBER})", text)
    assert {int(d) for d, _, _ in ratio_claims} == {8, 32}, f"the text should state both depths' ratios: {ratio_claims}"
    for depth, post, pre in ratio_claims:
        for name, stated in (("Post-Norm", post), ("Pre-Norm", pre)):
            printed = demo[(int(depth), name)]["ratio"]
            assert agrees(stated, printed, 2), \
                f"{depth} layers, {name}: the text says {stated}, the demo prints {printed}"
    # which ratio is larger
    larger = re.findall(r"比值更大的是 \*\*(Pre-Norm|Post-Norm)\*\*", text)
    assert larger, "the text should say which ratio is the larger one"
    other = {"Pre-Norm": "Post-Norm", "Post-Norm": "Pre-Norm"}
    for name in larger:
        for depth in (8, 32):
            assert demo[(depth, name)]["ratio"] > demo[(depth, other[name])]["ratio"], \
                f"{depth} layers: {name}'s ratio is not the larger one"
    if "随深度只是慢慢变大" in text:
        for name in ("Post-Norm", "Pre-Norm"):
            assert 1 < demo[(8, name)]["ratio"] < demo[(32, name)]["ratio"] < 3
    # loss and layer-1 gradients: "loss 是 Pre-Norm 8 层 6.12、32 层 61.92，Post-Norm 8 层 ..."
    claims = []
    quantity = structure = None
    tokens = rf"(?P<q>loss 是|第 1 层梯度是)|(?P<s>Post-Norm|Pre-Norm)|(?P<d>\d+) 层 (?P<v>{NUMBER})|(?P<end>\n- )"
    for token in re.finditer(tokens, text):
        if token["q"]:
            quantity = {"loss 是": "loss", "第 1 层梯度是": "first"}[token["q"]]
        elif token["s"]:
            structure = token["s"]
        elif token["end"]:
            quantity = structure = None
        elif quantity and structure:
            claims.append((quantity, structure, int(token["d"]), token["v"]))
    assert {(q, s, d) for q, s, d, _ in claims} == {(q, s, d) for q in ("loss", "first")
                                                    for s in ("Post-Norm", "Pre-Norm") for d in (8, 32)}, claims
    for quantity, structure, depth, stated in claims:
        printed = demo[(depth, structure)][quantity]
        assert agrees(stated, printed, 4), f"{quantity}, {structure}, {depth} layers: text {stated}, printed {printed}"


@pytest.mark.slow
def test_sweep_text_states_the_printed_numbers(gradient_flow_run):
    text, sweep = gradient_flow_run["sweep_text"], gradient_flow_run["sweep"]
    bullets = {float(m[1]): m[2] for m in re.finditer(rf"^- gain = ({NUMBER})(.*?)(?=^- |\Z)", text, re.M | re.S)}
    assert {1.0, 3.0} <= set(bullets), f"the text should describe gain = 1 and gain = 3: {sorted(bullets)}"
    stated_ranges = 0
    for gain, bullet in bullets.items():
        structure = None
        tokens = rf"(?P<s>Post-Norm|Pre-Norm)|(?P<d>\d+) 层 (?P<lo>{NUMBER}) ~ (?P<hi>{NUMBER})"
        for token in re.finditer(tokens, bullet):
            if token["s"]:
                structure = token["s"]
                continue
            assert structure, token[0]
            lo, hi = sweep[(gain, int(token["d"]), structure)]["ratio"]
            assert agrees(token["lo"], lo, 2) and agrees(token["hi"], hi, 2), \
                f"gain {gain}, {token['d']} layers, {structure}: " \
                f"the text says {token['lo']} ~ {token['hi']}, printed {lo} ~ {hi}"
            stated_ranges += 1
    assert stated_ranges >= 4
    depths = sorted({d for _, d, _ in sweep})
    if "互相重叠" in bullets[1.0]:
        for depth in depths:
            (a0, a1), (b0, b1) = (sweep[(1.0, depth, n)]["ratio"] for n in ("Post-Norm", "Pre-Norm"))
            assert max(a0, b0) <= min(a1, b1), f"gain 1, {depth} layers: the ranges do not overlap"
    if "Post-Norm 的比值随深度急剧变大" in bullets[3.0]:
        post = [sweep[(3.0, d, "Post-Norm")]["ratio"] for d in depths]
        assert all(deeper[0] > shallower[1] for shallower, deeper in zip(post, post[1:])), post
        assert post[-1][0] > sweep[(3.0, depths[-1], "Pre-Norm")]["ratio"][1]
    if "第 1 层梯度的绝对值在每个设置下都是 Pre-Norm 更大" in text:
        for gain, depth, _ in sweep:
            assert sweep[(gain, depth, "Pre-Norm")]["first"][0] > sweep[(gain, depth, "Post-Norm")]["first"][1]
