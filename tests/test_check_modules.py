"""The diagnosis kit (autograder.checks): one matching rule, hints only where they say something, and check modules
that hold no `except CheckFailed` of their own."""

import ast
from pathlib import Path

import pytest
import torch

from autograder.checks import (F64, CheckFailed, ParamKeys, expect_close, expect_int, expect_module_matches,
                               expect_number, expect_parameters, match_variant, same_values)
from autograder.checks.diagnosis import Variant, catalogue
from autograder.checks.probes import ModuleRun
from autograder.assignments import assignment_ids

ASSIGNMENTS = assignment_ids()

CHECKS = Path(__file__).resolve().parent.parent / "autograder" / "checks"

# a catalogue of its own (names unique across the catalogues: the kit takes a variant by its name)
KIT_VARIANTS = catalogue(
    Variant("kit_test_double", "结果是正确值的 2 倍", title="乘了 2"),
    Variant("kit_test_negated", "结果的符号反了", title="符号反了"),
    Variant("kit_test_same_as_right", "在这组输入上与正确答案相同", title="与正确答案相同"),
    Variant("kit_test_extra_bias", "多了 bias", title="多了 bias"),
)


def handlers_catching_check_failed(tree: ast.AST) -> list[int]:
    """Lines of `except` clauses that catch CheckFailed: by name, in a tuple, a bare except, or a base class."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ExceptHandler):
            continue
        caught = node.type
        names = [] if caught is None else [ast.unparse(t) for t in (caught.elts if isinstance(caught, ast.Tuple)
                                                                       else [caught])]
        if caught is None or any(n.split(".")[-1] in ("CheckFailed", "Exception", "BaseException") for n in names):
            lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_a_check_module_catches_no_check_failed(assignment_id):
    """The diagnosis is an argument of the kit's comparisons, not an except clause in the assignment's checks."""
    path = CHECKS / f"{assignment_id}.py"
    assert handlers_catching_check_failed(ast.parse(path.read_text(encoding="utf-8"))) == [], path


def imported_check_modules(tree: ast.AST) -> set[str]:
    """The assignments' check modules a module imports (autograder.checks.<id>, by either form of import)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[2] for a in node.names if a.name.startswith("autograder.checks.")}
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("autograder.checks."):
                found.add(node.module.split(".")[2])
            elif node.module == "autograder.checks":
                found |= {a.name for a in node.names}
    return found & set(ASSIGNMENTS)


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_a_check_module_imports_no_other_assignments_checks(assignment_id):
    """What two assignments share (a family of mistakes, an input) lives in the kit or in diagnosis.FAMILIES."""
    path = CHECKS / f"{assignment_id}.py"
    assert imported_check_modules(ast.parse(path.read_text(encoding="utf-8"))) == set(), path


def test_the_except_finder_finds_what_it_should():
    source = ("try:\n    f()\nexcept CheckFailed:\n    pass\n"
              "try:\n    f()\nexcept (ValueError, checks.CheckFailed) as e:\n    pass\n"
              "try:\n    f()\nexcept:\n    pass\n"
              "try:\n    f()\nexcept Exception:\n    pass\n"
              "try:\n    f()\nexcept ValueError:\n    pass\n")
    assert handlers_catching_check_failed(ast.parse(source)) == [3, 7, 11, 15]


# --- the matching rule ------------------------------------------------------------------------------


def tensor_close(a, b):
    return same_values(a, b, F64)


def test_one_matching_variant_is_named():
    right = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    variants = [("kit_test_double", 2 * right), ("kit_test_negated", -right)]
    assert match_variant(2 * right, right, variants, tensor_close).name == "kit_test_double"
    assert match_variant(3 * right, right, variants, tensor_close) is None


def test_a_variant_equal_to_the_reference_is_never_named():
    right = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    assert match_variant(right, right, [("kit_test_same_as_right", right.clone())], tensor_close) is None
    # and it does not make an otherwise unique match ambiguous
    variants = [("kit_test_same_as_right", right.clone()), ("kit_test_double", 2 * right)]
    assert match_variant(2 * right, right, variants, tensor_close).name == "kit_test_double"


def test_two_different_names_matching_name_nothing():
    right = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    both = 2 * right
    assert match_variant(both, right, [("kit_test_double", both), ("kit_test_negated", both.clone())],
                         tensor_close) is None
    # two ways to write one mistake are one name
    assert match_variant(both, right, [("kit_test_double", both), ("kit_test_double", both.clone())],
                         tensor_close).name == "kit_test_double"


def test_variants_given_as_a_callable_cost_nothing_when_the_student_is_right():
    right = torch.tensor([1.0, 2.0], dtype=torch.float64)
    calls = []
    expect_close(right.clone(), right, F64, variants=lambda: calls.append(1) or [])
    assert calls == []
    with pytest.raises(CheckFailed) as failed:
        expect_close(2 * right, right, F64, variants=lambda: calls.append(1) or [("kit_test_double", 2 * right)])
    assert calls == [1] and failed.value.diagnosis == "kit_test_double"
    assert failed.value.message.endswith(KIT_VARIANTS["kit_test_double"].explanation)


# --- diagnosis never breaks a check ---------------------------------------------------------------------


def _boom(*_):
    raise RuntimeError("planted in the diagnosis")


@pytest.mark.parametrize("where", ["variants callable", "recogniser", "variant name", "unknown name", "hint",
                                   "hint not text", "evidence"])
def test_a_diagnosis_that_raises_leaves_the_comparisons_message_and_is_recorded(where):
    from autograder.checks import take_diagnosis_crashes

    right = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    wrong = 5 * right
    with pytest.raises(CheckFailed) as plain:
        expect_close(wrong, right, F64)
    take_diagnosis_crashes()
    arguments = {
        "variants callable": dict(variants=_boom),
        "recogniser": dict(variants=[("kit_test_double", _boom)]),
        "variant name": dict(variants=[(_boom, wrong.clone())]),
        "unknown name": dict(variants=[("kit_test_no_such_variant", wrong.clone())]),
        "hint": dict(hint=_boom),
        "hint not text": dict(hint=lambda actual, expected: 42),
        "evidence": dict(variants=[("kit_test_double", wrong.clone())], evidence=_boom),
    }[where]
    with pytest.raises(CheckFailed) as failed:
        expect_close(wrong, right, F64, **arguments)
    assert failed.value.message == plain.value.message and failed.value.diagnosis is None
    assert "hint" not in failed.value.details
    crashes = take_diagnosis_crashes()
    assert len(crashes) == 1 and ("planted in the diagnosis" in crashes[0] or "Error" in crashes[0])
    assert take_diagnosis_crashes() == []
    # the same kit, healthy: nothing recorded
    with pytest.raises(CheckFailed):
        expect_close(wrong, right, F64, variants=[("kit_test_double", 2 * right)], hint="HINT-TEXT")
    assert take_diagnosis_crashes() == []


def test_a_key_recogniser_that_raises_names_nothing_and_is_recorded():
    from autograder.checks import take_diagnosis_crashes

    take_diagnosis_crashes()
    pinned = {"weight": [3, 3]}
    with pytest.raises(CheckFailed) as plain:
        expect_parameters({"weight": [3, 3], "bias": [3]}, pinned, "M")
    with pytest.raises(CheckFailed) as failed:
        expect_parameters({"weight": [3, 3], "bias": [3]}, pinned, "M",
                          keys={"kit_test_extra_bias": lambda k: "bias" in k.extra, "kit_test_double": _boom})
    assert failed.value.message == plain.value.message and failed.value.diagnosis is None
    assert len(take_diagnosis_crashes()) == 1
    with pytest.raises(CheckFailed) as named_one:
        expect_parameters({"weight": [3, 3], "bias": [3]}, pinned, "M",
                          keys={"kit_test_extra_bias": lambda k: "bias" in k.extra})
    assert named_one.value.diagnosis == "kit_test_extra_bias" and take_diagnosis_crashes() == []


# --- the hint ---------------------------------------------------------------------------------------


def test_a_hint_fires_only_when_no_variant_matched():
    right = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    variants = [("kit_test_double", 2 * right)]
    with pytest.raises(CheckFailed) as named_one:
        expect_close(2 * right, right, F64, variants=variants, hint="HINT-TEXT")
    assert named_one.value.diagnosis == "kit_test_double" and "HINT-TEXT" not in named_one.value.message
    with pytest.raises(CheckFailed) as localised:
        expect_close(5 * right, right, F64, variants=variants, hint=lambda actual, expected: "HINT-TEXT")
    assert localised.value.diagnosis is None and localised.value.message.endswith("HINT-TEXT")


def test_a_hint_never_fires_at_rounding_level():
    right = torch.linspace(1, 2, 50, dtype=torch.float64)
    float32_internals = right.float().double() * (1 + 3e-7)  # float32 rounding: passes, except strictly
    hint_calls = []

    def hint(actual, expected):
        hint_calls.append(1)
        return "HINT-TEXT"

    expect_close(float32_internals, right, F64, hint=hint)  # not a wrong algorithm: passes
    with pytest.raises(CheckFailed) as strict:
        expect_close(float32_internals, right, F64, hint=hint, strict=True)
    assert "HINT-TEXT" not in strict.value.message and hint_calls == []
    f32 = right.float()
    with pytest.raises(CheckFailed) as in_float32:  # a float32 check with a tolerance tighter than its rounding
        expect_close(f32 * (1 + 1.5e-5), f32, F64, hint=hint)
    assert "HINT-TEXT" not in in_float32.value.message
    with pytest.raises(CheckFailed) as wrong:
        expect_close(right + 0.1, right, F64, hint=hint)
    assert wrong.value.message.endswith("HINT-TEXT")


def test_typed_numbers_name_their_slips_by_the_same_rule():
    with pytest.raises(CheckFailed) as slip:
        expect_number(20.004, 10.0, "x", variants=[("kit_test_double", 20.0), ("kit_test_negated", -10.0)])
    assert slip.value.diagnosis == "kit_test_double"
    with pytest.raises(CheckFailed) as ambiguous:
        expect_int(20, 10, "n", variants=[("kit_test_double", 20), ("kit_test_negated", 20)])
    assert ambiguous.value.diagnosis is None
    with pytest.raises(CheckFailed) as equal_to_right:
        expect_int(11, 10, "n", variants=[("kit_test_same_as_right", 10)], hint="HINT-TEXT")
    assert equal_to_right.value.diagnosis is None and equal_to_right.value.message.endswith("HINT-TEXT")


# --- parameter keys ---------------------------------------------------------------------------------


def has_bias(keys: ParamKeys) -> bool:
    return bool(keys.extra) and all(k.endswith(".bias") for k in keys.extra)


def test_parameter_keys_are_named_by_one_table():
    pinned = {"W.weight": [3, 2]}
    with pytest.raises(CheckFailed) as extra:
        expect_parameters({"W.weight": [3, 2], "W.bias": [3]}, pinned, "M()", keys={"kit_test_extra_bias": has_bias})
    assert extra.value.diagnosis == "kit_test_extra_bias"
    with pytest.raises(CheckFailed) as other:
        expect_parameters({"V.weight": [3, 2]}, pinned, "M()", keys={"kit_test_extra_bias": has_bias})
    assert other.value.diagnosis is None and "V.weight" in other.value.message
    expect_parameters({"W.weight": [3, 2]}, pinned, "M()", keys={"kit_test_extra_bias": has_bias})

    run = ModuleRun({"W.weight": [3, 2], "W.bias": [3]}, ["W.bias"], [], None)
    with pytest.raises(CheckFailed) as loaded:
        expect_module_matches(run, {"outputs": torch.zeros(1)}, F64, "M", keys={"kit_test_extra_bias": has_bias})
    assert loaded.value.diagnosis == "kit_test_extra_bias"
    # an extra key tolerated while the output is right
    run = ModuleRun({"W.weight": [3, 2], "W.bias": [3]}, ["W.bias"], [], None, outputs=torch.zeros(1, dtype=torch.float64))
    expect_module_matches(run, {"outputs": torch.zeros(1, dtype=torch.float64)}, F64, "M",
                          keys={"kit_test_extra_bias": has_bias}, unloaded_ok=True)


# --- what a value cannot say: recognisers, names that take a probe, evidence --------------------------


def test_a_recogniser_names_a_property_and_a_callable_name_is_asked_only_when_its_candidate_matched():
    right = torch.tensor([1.0, 2.0], dtype=torch.float64)
    in_float32 = right.float()
    with pytest.raises(CheckFailed) as dtype:
        expect_close(in_float32, right, F64,
                     variants=[("kit_test_negated", -right), ("kit_test_double", lambda a: a.dtype == torch.float32)])
    assert dtype.value.diagnosis == "kit_test_double"
    asked = []

    def decided_by_a_probe():
        asked.append(1)
        return "kit_test_negated"

    with pytest.raises(CheckFailed) as probe:
        expect_close(-right, right, F64, variants=[(decided_by_a_probe, -right)])
    assert probe.value.diagnosis == "kit_test_negated" and asked == [1]
    with pytest.raises(CheckFailed):
        expect_close(3 * right, right, F64, variants=[(decided_by_a_probe, -right)])
    assert asked == [1]  # its candidate did not match: no probe
    with pytest.raises(CheckFailed) as undecided:
        expect_close(-right, right, F64, variants=[(lambda: None, -right)])
    assert undecided.value.diagnosis is None


def test_evidence_makes_a_variant_explain_every_value_of_the_answer():
    right = (torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3.0, 4.0], dtype=torch.float64))
    slip = (2 * right[0], 2 * right[1])
    half_slipped = (2 * right[0], right[1] + 1)  # the first tensor fits the slip, the second does not
    with pytest.raises(CheckFailed) as both:
        expect_close(slip[0], right[0], F64, variants=[("kit_test_double", slip)], evidence=(slip, right))
    assert both.value.diagnosis == "kit_test_double"
    with pytest.raises(CheckFailed) as one:
        expect_close(half_slipped[0], right[0], F64, variants=[("kit_test_double", slip)],
                     evidence=lambda: (half_slipped, right))
    assert one.value.diagnosis is None


@pytest.mark.parametrize("assignment_id", ASSIGNMENTS)
def test_every_catalogued_mistake_has_a_short_chinese_title(assignment_id):
    """Reports and the summary head a mistake with its title: written for it, not cut out of the explanation."""
    from autograder.checks.diagnosis import variants_of

    for name, variant in variants_of(assignment_id).items():
        assert variant.title and len(variant.title) <= 30, name
        assert any("\u4e00" <= ch <= "\u9fff" for ch in variant.title), name


def test_run_reference_gives_the_gradients_of_an_explicit_backward():
    """run_reference backpropagates sum(out * g) (no explicit grad tensors): bit for bit what backward(out, g) gives."""
    import torch

    from autograder.checks import run_reference

    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4)).double()
    x, g = torch.randn(3, 6, dtype=torch.float64), torch.randn(3, 4, dtype=torch.float64)
    got = run_reference(module, (x,), grad_outputs=[g], requires_grad=[0])
    module.zero_grad(set_to_none=True)
    x2 = x.clone().requires_grad_(True)
    torch.autograd.backward([module(x2)], [g])
    assert torch.equal(got["input_grads"][0], x2.grad)
    assert all(torch.equal(got["param_grads"][n], p.grad) for n, p in module.named_parameters())


# --- a hint says only what its probe established ------------------------------------------------------------


def _gradient_failure(param_grad, expected_grad, tol=F64):
    out = torch.linspace(-1, 1, 6, dtype=torch.float64)
    run = ModuleRun({"W.weight": [3, 2]}, [], [], None, outputs=out.clone(), input_grads=[],
                    param_grads={} if param_grad is None else {"W.weight": param_grad})
    with pytest.raises(CheckFailed) as failed:
        expect_module_matches(run, {"outputs": out, "input_grads": [], "param_grads": {"W.weight": expected_grad}},
                              tol, "M")
    return failed.value.message


CUT_OFF_HINT = ".detach()"


def test_the_detach_hint_only_for_a_gradient_missing_or_far_off():
    from autograder.checks import F32

    g = torch.linspace(0.5, 2.0, 6, dtype=torch.float64).reshape(3, 2)
    # far off: a part of the graph cut off (zero, or half of the gradient missing), or no gradient at all
    for wrong in (torch.zeros_like(g), 0.5 * g, None):
        message = _gradient_failure(wrong, g)
        assert "反向传播不对" in message and CUT_OFF_HINT in message, message
    # its condition false: off by 0.1% (float64; within float32 rounding it would pass), or by float32-level differences
    slightly = _gradient_failure(g * (1 + 1e-3), g)
    assert "反向传播不对" in slightly and CUT_OFF_HINT not in slightly
    g32 = g.float()
    float32_level = _gradient_failure(g32 * (1 + 4e-5), g32, F32)
    assert "反向传播不对" in float32_level and CUT_OFF_HINT not in float32_level, float32_level


def test_no_share_rounded_to_zero_next_to_an_error_over_tolerance():
    right = torch.linspace(1, 2, 10_000, dtype=torch.float64)
    one_off = right.clone()
    one_off[1234] += 5.49e-4
    with pytest.raises(CheckFailed) as failed:
        expect_close(one_off, right, F64)
    message = failed.value.message
    assert "0%" not in message and "1 个元素（共 10000 个，不到 1%）超出容限" in message, message
    assert failed.value.details["count_outside"] == 1
    # nor a share rounded up to 100% when one element is right
    all_but_one = right * 1.01
    all_but_one[0] = right[0]
    with pytest.raises(CheckFailed) as most:
        expect_close(all_but_one, right, F64)
    assert "100%" not in most.value.message and "9999 个元素（共 10000 个，超过 99%）" in most.value.message
    with pytest.raises(CheckFailed) as every:
        expect_close(right * 2, right, F64)
    assert "全部 10000 个元素都超出容限" in every.value.message
    half = right.clone()
    half[::2] *= 2
    with pytest.raises(CheckFailed) as some:
        expect_close(half, right, F64)
    assert "50% 的元素（5000 / 10000）超出容限" in some.value.message


def test_the_single_token_hint_is_right_about_the_scaling():
    """gqa_saving: with one token, a scale applied after the softmax is what the output shows; any other fault is
    not said to be unrelated to the scaling or the softmax."""
    from autograder.checks import gqa_saving

    expected = torch.randn(3, 1, 72, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    d_head = 72 // 6
    after_softmax = gqa_saving.localise_single_token(expected / d_head ** 0.5, expected, d_head, F64)
    assert after_softmax == gqa_saving.SCALED_AFTER_SOFTMAX_HINT and "softmax 之后" in after_softmax
    other = gqa_saving.localise_single_token(expected.flip(-1), expected, d_head, F64)
    assert other == gqa_saving.SINGLE_TOKEN_HINT
    for text in (after_softmax, other):
        assert "无关" not in text
    assert "softmax 之后" in other  # the one thing a single token cannot rule out is named
