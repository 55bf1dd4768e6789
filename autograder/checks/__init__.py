"""How a check is written: a pytest test with the `check` mark, fixtures, a probe and one expectation.

    @check("rmsnorm_function", points=1)
    def test_function_uses_eps_argument(student, small_x64, gamma64):
        \"\"\"rms_norm 使用传入的 eps（eps = 1e-3，在根号里面）\"\"\"
        expect_call(student, ref.rms_norm, (small_x64, gamma64), {"eps": 1e-3}, tol=F64, variants=formula_variants,
                    hint=lambda x, gamma, eps: localise_output(x, gamma, eps, F64))

The fixtures (`student`, `rng`, `hand_inputs`, ...) come from autograder.checks.plugin. The
docstring's first line tells the student what the check verifies; an expectation that fails
raises CheckFailed with a Chinese message that states shapes and errors, never the hidden inputs
or the expected values.

The diagnosis is an argument of the comparison, never an `except CheckFailed` in the check module:

- `variants`: the catalogued mistakes' results on the same inputs, a list of `(Variant or its name, candidate)`, or
  a callable returning that list (evaluated only when the comparison fails: free when the student is right).
  One matching rule for every comparison (match_variant): a candidate counts only if it differs from the expected
  value (else it cannot be told apart here) and the student's value equals it, both within the comparison's
  matching closeness (a tensor: ten times the tolerance, or `match_tol`; a typed number: twice its tolerance; an
  integer slip: exactly); exactly one distinct name counted names the mistake; none, or two different names, name
  nothing (the grader never names a mistake on a guess). Recognisers for a property, names decided by a probe:
  match_variant; a variant that must explain a whole answer (a pair, the values at every argument): `evidence`.
- `hint`: a localisation (the check modules' `localise_<what>`), a str or a callable
  `hint(actual, expected) -> str | None`, appended only when no variant matched and never when the difference is at
  float32 rounding level (that is the precision, judged once per part by expect_float64_precision).
- `keys`: for modules, a table of recognisers `{variant name: rule(ParamKeys) -> bool}` naming a mistake seen in
  the parameter names (expect_parameters, expect_weights_loaded); the same one-name rule.

A function is compared by `expect_call(student, ref.f, args, kwargs, tol=, variants=, hint=)`: its inputs written
once, the student's `f` and the reference called on them, and `variants` and `hint` computed from the same inputs
(with the reference's defaults filled in); `expect_call_precision` is the part's float64 precision check of it.
A module is compared by its round trip, `expect_module(student, ref, class_name, init_args, weights=, args=, ...,
variants=, hint=, keys=)`: the reference and the student's module on the same weights, inputs and output gradients
(module_round_trip), then expect_module_matches; the attention with slips shared by the assignments with an
attention is autograder.checks.slips.

Diagnosis never breaks a check: an exception inside variants, a hint or a key recogniser (or an unknown variant
name) leaves the comparison's own failure message to the student, names nothing, and is recorded
(take_diagnosis_crashes); the plugin reports the check as a check bug whatever the reference does.
"""

import contextlib
import inspect
import math
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
import torch

from autograder.catalogue import DIAGNOSIS_RAISED
from autograder.checks.diagnosis import PRECISION, Variant, lookup, named
from autograder.checks.probes import CheckFailed, ModuleRun, NotAnswered, StudentCodeFailed, describe_value, module_arg, probe_net_arg

__all__ = [
    "check", "CheckFailed", "NotAnswered", "StudentCodeFailed", "ModuleRun", "module_arg", "probe_net_arg",
    "Tol", "F32", "F64", "F32_ATTN", "HAND", "expect_close", "expect_number", "expect_int", "expect_numbers",
    "expect_module_matches", "expect_weights_loaded", "expect_true", "run_reference", "same_values", "causal_mask",
    "forward_args",
    "FLOAT32_ROUNDING", "expect_float64_precision", "PrecisionNamed", "PRECISION", "match_variant", "diagnosed", "ParamKeys",
    "expect_parameters", "attempt", "reference_with", "random_weights", "random_mask", "randn", "randint", "is_number",
    "close_number", "number_close", "values_close", "is_float_tensor", "int_close", "at_rounding_level", "weights_loaded", "expect_ints", "expect_equal",
    "take_diagnosis_crashes", "DIAGNOSIS_RAISED", "without_diagnosis", "module_round_trip", "expect_module",
    "expect_module_precision", "expect_call", "expect_call_precision",
]


def check(grade_id: str, points: float):
    """Mark a test as a graded check of part `grade_id` worth `points`."""
    return pytest.mark.autograde_check(grade_id=grade_id, points=points)


class Tol:
    def __init__(self, rtol: float, atol: float):
        self.rtol, self.atol = rtol, atol

    def __repr__(self):
        return f"rtol={self.rtol:g}, atol={self.atol:g}"


F32 = Tol(1e-5, 1e-5)
F32_ATTN = Tol(2e-5, 2e-5)
F64 = Tol(1e-10, 1e-10)
HAND = 5e-4  # relative: four significant figures
# "equal up to float32 rounding": what a right algorithm with float32 internals (LlamaRMSNorm's cast, a float32
# softmax, float32 angles) gives on float64 inputs. Every catalogued variant differs from the reference by far more
# (>= 100x this on the checks' inputs), so a float64 output within it is the right algorithm: it passes every
# check but the part's own precision check (expect_float64_precision), which names the precision.
FLOAT32_ROUNDING = Tol(2e-5, 2e-5)


Candidates = Sequence[tuple["Variant | str", object]]
VariantsArg = "Candidates | Callable[[], Candidates] | None"
HintArg = "str | Callable[[object, object], str | None] | None"


def expect_true(condition: bool, message: str, details: dict | None = None, diagnosis: "Variant | str | None" = None):
    """`condition` holds; else fail with `message`, naming `diagnosis` when given."""
    if not condition:
        failure = CheckFailed(message, details)
        raise named(failure, lookup(diagnosis)) if diagnosis else failure


# --- diagnosis never breaks a check ----------------------------------------------------------------------------

# The first line of a check bug's `crash` text when the diagnosis raised (the class summary tells it apart by this)
_diagnosis_crashes: list[str] = []  # since the last take_diagnosis_crashes(): what each diagnosis step raised


def take_diagnosis_crashes() -> list[str]:
    """What the diagnosis raised since the last call (formatted tracebacks, oldest first), and forget it. The plugin
    calls this before and after each check: a check whose list is not empty is a bug of the check."""
    taken = list(_diagnosis_crashes)
    _diagnosis_crashes.clear()
    return taken


_diagnosing = [True]  # False inside without_diagnosis()


@contextlib.contextmanager
def without_diagnosis():
    """No variant, hint or key recogniser runs inside (a failing comparison keeps its own message): for an attempt
    whose result is thrown away at its first failure (the engine's attempt with the demo cells skipped)."""
    _diagnosing.append(False)
    try:
        yield
    finally:
        _diagnosing.pop()


def _guarded(step: Callable[[], object], default=None):
    """`step()`, or `default` when it raises (recorded for take_diagnosis_crashes): a variant, hint or recogniser
    that crashes names nothing and adds nothing; the comparison's failure stays what the student gets. `default`
    without calling it inside without_diagnosis()."""
    if not _diagnosing[-1]:
        return default
    try:
        return step()
    except Exception as exc:  # a bug of the check's diagnosis, whatever it is: never the student's message
        try:
            text = "".join(traceback.format_exception(exc))
        except Exception:  # an exception whose text cannot be formatted
            text = type(exc).__name__
        if len(_diagnosis_crashes) < 20:
            _diagnosis_crashes.append(text)
        return default


# --- the one matching rule ------------------------------------------------------------------------------------


def match_variant(actual, expected, variants: VariantsArg, close: Callable[[object, object], bool]) -> Variant | None:
    """The catalogued variant that `actual` shows, or None.

    `close(value, candidate)` is the comparison's own closeness (10x the tensor tolerance, 2x a typed number's).
    A candidate counts only if it is not close to `expected` (a variant that equals the right answer on these
    inputs cannot be told apart) and `actual` is close to it. Exactly one distinct name counted: that variant.
    None, or two different names (the student's value fits two mistakes): None, nothing named on a guess.
    Several candidates of one name (two ways to write the same mistake) count as one.

    Two forms for what a value cannot say:
    - a candidate may be a recogniser, `recognise(actual) -> bool`, for a mistake that is a property and not a
      value (a dtype not restored, right values in the wrong dtype): it counts when it accepts `actual`, and it
      must itself be false for the right answer;
    - a name may be a callable returning the name (or None: not named), for two mistakes with one value that an
      extra probe tells apart; it is called only when its candidate counted.

    Anything that raises in here (a variants callable, a recogniser, a name, an unknown name) names nothing and is
    recorded as the check's bug (take_diagnosis_crashes)."""
    if variants is None:
        return None
    return _guarded(lambda: _match_variant(actual, expected, variants, close))


def _match_variant(actual, expected, variants: VariantsArg, close: Callable[[object, object], bool]) -> Variant | None:
    if callable(variants):
        variants = variants()
    matched = {}
    for variant, candidate in variants:
        if callable(candidate):
            counts = bool(candidate(actual))
        else:
            counts = not close(expected, candidate) and close(actual, candidate)
        if counts and callable(variant):
            variant = variant()
        if counts and variant is not None:
            variant = lookup(variant)
            matched[variant.name] = variant
    return next(iter(matched.values())) if len(matched) == 1 else None


def diagnosed(failure: CheckFailed, actual, expected, variants: VariantsArg, hint: HintArg,
              close: Callable[[object, object], bool], rounding: bool = False, evidence=None) -> CheckFailed:
    """`failure` with the matching variant named, else with the localisation `hint` appended (not at `rounding`
    level: a difference that small says nothing about where an algorithm goes wrong). `evidence`: the (actual,
    expected) the variants are matched on, when that is more than the one value compared (a tuple, or a callable
    returning it)."""
    def name():
        if evidence is not None:
            shown, right = evidence() if callable(evidence) else evidence
        else:
            shown, right = actual, expected
        return match_variant(shown, right, variants, close)

    def localise():
        text = hint(actual, expected) if callable(hint) else hint
        if text is not None and not isinstance(text, str):
            raise TypeError(f"a hint returned {type(text).__name__}, not str or None")
        return text

    variant = _guarded(name)
    if variant is not None:
        return named(failure, variant)
    if hint is None or rounding:
        return failure
    text = _guarded(localise)
    if not text:
        return failure
    return CheckFailed(f"{failure.message}。{text}", dict(failure.details, hint=text), failure.diagnosis)


def attempt(probe: Callable, *args, **kwargs):
    """An extra probe for a hint: its value, or None when the student's code fails on it."""
    try:
        return probe(*args, **kwargs)
    except CheckFailed:
        return None


# --- tensors --------------------------------------------------------------------------------------------------


def at_rounding_level(actual, expected) -> bool:
    """`actual` differs from `expected` by no more than float32 rounding (FLOAT32_ROUNDING), everywhere."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor) and actual.shape == expected.shape
            and actual.dtype.is_floating_point and bool(torch.isfinite(actual).all())):
        return False
    e = expected.detach().double()
    return bool(((actual.detach().double() - e).abs() <= FLOAT32_ROUNDING.atol + FLOAT32_ROUNDING.rtol * e.abs()).all())


def expect_close(actual, expected: torch.Tensor, tol: Tol, what: str = "输出", *, variants: VariantsArg = None,
                 hint: HintArg = None, strict: bool = False, match_tol: Tol | None = None, evidence=None):
    """`actual` is a tensor of the expected shape and dtype, finite, and within tolerance; on failure the mistake
    is named from `variants` or localised by `hint` (see the module's docstring).

    A float64 output that misses `tol` only at the level of float32 rounding passes (the algorithm is right; the
    precision is judged once per part, by expect_float64_precision), unless `strict`.

    `match_tol`: the tolerance by which a variant matches (default `tol`), for variants computed in float64 that
    a student computes in float32. `evidence`: what the variants are matched on when one comparison is part of a
    larger answer, `(actual, expected)` or a callable returning it, tuples of tensors matched element by element
    (both tensors of a returned pair; a function's values at every argument of the check)."""
    try:
        _expect_close(actual, expected, tol, what, strict)
    except CheckFailed as failure:
        raise diagnosed(failure, actual, expected, variants, hint, lambda a, c: values_close(a, c, match_tol or tol),
                        at_rounding_level(actual, expected), evidence) from None


def _inputs(reference: Callable, args: tuple, kwargs: dict | None) -> inspect.BoundArguments:
    """`args` and `kwargs` bound to the reference's parameters, its defaults filled in (what the variants and the
    hint are computed from: a check that leaves eps at its default gets the default's variants)."""
    bound = inspect.signature(reference).bind(*args, **(kwargs or {}))
    bound.apply_defaults()
    return bound


def _called(student, reference: Callable, args: tuple, kwargs: dict | None) -> tuple:
    """(the student's result, the reference's result) on the same inputs: the student's function of the reference's
    name first, in the sandbox, then the reference here."""
    return student.call(reference.__name__, *args, **(kwargs or {})), reference(*args, **(kwargs or {}))


def expect_call(student, reference: Callable, args: tuple = (), kwargs: dict | None = None, *, tol: "Tol",
                what: str = "输出", variants: Callable[..., list] | None = None, hint: Callable[..., HintArg] | None = None,
                **options):
    """The student's function named like `reference` and `reference` itself, called on the same inputs (written once),
    compared by expect_close; `variants(*inputs)` and `hint(*inputs)` (a hint, see the module's docstring) get those
    inputs with the reference's defaults filled in. `options`: expect_close's (match_tol, evidence, strict)."""
    actual, expected = _called(student, reference, args, kwargs)
    inputs = _inputs(reference, args, kwargs)
    expect_close(actual, expected, tol, what,
                 variants=None if variants is None else lambda: variants(*inputs.args, **inputs.kwargs),
                 hint=None if hint is None else hint(*inputs.args, **inputs.kwargs), **options)


def expect_call_precision(student, reference: Callable, args: tuple = (), kwargs: dict | None = None,
                          what: str = "输出"):
    """The part's precision check (expect_float64_precision) of the student's function named like `reference`."""
    expect_float64_precision(*_called(student, reference, args, kwargs), what)


def values_close(actual, candidate, tol: Tol) -> bool:
    """same_values, element by element for a tuple or list of tensors."""
    if isinstance(candidate, (tuple, list)):
        return (isinstance(actual, (tuple, list)) and len(actual) == len(candidate)
                and all(values_close(a, c, tol) for a, c in zip(actual, candidate)))
    return same_values(actual, candidate, tol)


def _expect_close(actual, expected: torch.Tensor, tol: Tol, what: str, strict: bool):
    if not isinstance(actual, torch.Tensor):
        raise CheckFailed(f"{what}应该是 torch.Tensor，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    details = {"shape": list(actual.shape), "expected_shape": list(expected.shape), "dtype": str(actual.dtype)}
    if actual.shape != expected.shape:
        raise CheckFailed(f"{what}的形状应该是 {list(expected.shape)}，你的是 {list(actual.shape)}", details)
    if actual.dtype != expected.dtype:
        raise CheckFailed(f"{what}的 dtype 应该是 {expected.dtype}，你的是 {actual.dtype}", details)
    if not actual.dtype.is_floating_point:
        if not torch.equal(actual, expected):
            raise CheckFailed(f"{what}的值不对", details)
        return
    finite = torch.isfinite(actual)
    if not finite.all():
        nan, inf = int(torch.isnan(actual).sum()), int(torch.isinf(actual).sum())
        raise CheckFailed(f"{what}里有 {nan} 个 NaN、{inf} 个 inf", dict(details, nan=nan, inf=inf))
    error = (actual.double() - expected.double()).abs()
    allowed = tol.atol + tol.rtol * expected.double().abs()
    details.update(max_abs_error=float(error.max()) if error.numel() else 0.0, tolerance=repr(tol))
    if (error > allowed).any() and not strict and expected.dtype == torch.float64 and at_rounding_level(actual, expected):
        return  # float32 rounding, not a wrong algorithm
    if (error > allowed).any():
        outside = int((error > allowed).sum())
        share = outside / error.numel()
        raise CheckFailed(
            f"{what}与参考实现不一致：最大绝对误差 {details['max_abs_error']:.3g}（容限 {tol!r}），"
            f"{share_outside_text(outside, error.numel())}超出容限",
            dict(details, share_outside=share, count_outside=outside),
        )


def share_outside_text(outside: int, total: int) -> str:
    """How many of `total` elements are out of tolerance (`outside` >= 1), never a share rounded to 0% or to 100%."""
    if outside == total:
        return f"全部 {total} 个元素都" if total > 1 else "这个元素"
    share = outside / total
    if share < 0.01:
        return f"{outside} 个元素（共 {total} 个，不到 1%）"
    if share > 0.99:
        return f"{outside} 个元素（共 {total} 个，超过 99%）"
    return f"{share:.0%} 的元素（{outside} / {total}）"


class PrecisionNamed(CheckFailed):
    """A precision check's failure that names the precision (PRECISION). It stands only where the part's other
    checks all passed, on inputs that separate every plausible slip from the reference by far more than float32
    rounding: the algorithm is shown right there. Otherwise the plugin reports `unnamed` instead, a plain mismatch
    (autograder.checks.plugin.precision_where_shown_right)."""

    def __init__(self, message: str, details: dict, unnamed: CheckFailed):
        super().__init__(message, details, diagnosis=PRECISION.name)
        self.unnamed = unnamed


def expect_float64_precision(actual, expected: torch.Tensor, what: str = "输出"):
    """The part's precision check: a float64 output equals the float64 reference to float64 precision. One that is
    right only to float32 rounding is named as the precision (PRECISION), provided the part's other checks show the
    algorithm right (they all pass; see PrecisionNamed); any other difference fails without a name (the part's
    other checks name the mistake)."""
    try:
        _expect_close(actual, expected, F64, what, strict=True)
    except CheckFailed as failure:
        unnamed = CheckFailed(f"{what}与参考实现不一致（float64 精度检查；错在哪里见本题的其他检查）", failure.details)
        if isinstance(actual, torch.Tensor) and actual.shape == expected.shape and actual.dtype == torch.float64 \
                and same_values(actual, expected, Tol(FLOAT32_ROUNDING.rtol / 10, FLOAT32_ROUNDING.atol / 10)):
            raise PrecisionNamed(f"{what}只有 float32 的精度：最大绝对误差 {failure.details.get('max_abs_error', 0):.2g}"
                                 f"（float64 容限 {F64!r}）。{PRECISION.explanation}", failure.details, unnamed) from None
        raise unnamed from None


# --- typed and returned numbers -------------------------------------------------------------------------------


def is_float_tensor(value, shape=None, finite: bool = True) -> bool:
    """A floating-point tensor (of `shape` when given; with only finite values unless `finite` is False)."""
    return (isinstance(value, torch.Tensor) and value.dtype.is_floating_point
            and (shape is None or tuple(value.shape) == tuple(shape)) and (not finite or bool(torch.isfinite(value).all())))


def is_number(value) -> bool:
    """A finite real number (bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (isinstance(value, int)
                                                                                or math.isfinite(value))


def close_number(value, target, rel: float) -> bool:
    """`value` is a number (or a list of numbers) within relative `rel` of `target` (a number or a list)."""
    if isinstance(target, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(target)
                and all(close_number(v, t, rel) for v, t in zip(value, target)))
    try:
        return is_number(value) and abs(value - target) <= rel * max(abs(target), 1e-300)
    except OverflowError:  # an int too large for a float: not any slip's number
        return False


def number_close(rel: float = HAND):
    """The closeness by which a number matches a slip: a slip's answer typed to four significant figures is within
    twice the answer's own tolerance."""
    return lambda value, candidate: close_number(value, candidate, 2 * rel)


def int_close(value, candidate) -> bool:
    """The closeness by which an integer answer matches a slip: a whole slip exactly, a fractional one (a count in
    MiB or MB) to four significant figures; elementwise for lists."""
    if isinstance(candidate, (list, tuple)):
        return (isinstance(value, (list, tuple)) and len(value) == len(candidate)
                and all(int_close(v, c) for v, c in zip(value, candidate)))
    if float(candidate).is_integer():
        return is_number(value) and value == candidate
    return close_number(value, candidate, 2 * HAND)


def expect_number(actual, expected: float, what: str, rel: float = HAND, *, variants: VariantsArg = None,
                  hint: HintArg = None):
    """A typed answer: a real number within relative tolerance `rel` (four significant figures). `variants` are
    (name, the slip's number) pairs: the hand-answer slips."""
    try:
        _expect_number(actual, expected, what, rel)
    except CheckFailed as failure:
        raise diagnosed(failure, actual, expected, variants, hint, number_close(rel)) from None


def _expect_number(actual, expected: float, what: str, rel: float):
    if isinstance(actual, bool) or not isinstance(actual, (int, float)):
        raise CheckFailed(f"`{what}` 应该是一个数，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    if not math.isfinite(actual):
        raise CheckFailed(f"`{what}` 不是有限的数（{actual}）")
    error = abs(actual - expected) / max(abs(expected), 1e-300)
    if error > rel:
        # no error figure here: with the typed value it would give the answer away
        precision = "，即 4 位有效数字" if rel == HAND else ""
        raise CheckFailed(f"`{what}` 不对（超出相对误差容限 {rel:g}{precision}）", {"tolerance": rel})


def expect_int(actual, expected: int, what: str, *, variants: VariantsArg = None, hint: HintArg = None):
    """An integer answer, compared exactly; slips (`variants`) are matched by int_close."""
    try:
        _expect_int(actual, expected, what)
    except CheckFailed as failure:
        raise diagnosed(failure, actual, expected, variants, hint, int_close) from None


def expect_ints(actual: list, expected: list[int], labels: list[str], *, variants: VariantsArg = None,
                hint: HintArg = None):
    """Several integer answers (e.g. one function at several arguments), each exact, labelled `labels[i]`; a slip
    (`variants`: name, its list of answers) is named only when it gives every one of them."""
    try:
        for a, e, label in zip(actual, expected, labels):
            _expect_int(a, e, label)
    except CheckFailed as failure:
        raise diagnosed(failure, list(actual), list(expected), variants, hint, int_close) from None


def expect_equal(actual, expected, message: str, details: dict | None = None, *, variants: VariantsArg = None,
                 hint: HintArg = None):
    """`actual == expected` (shapes, lists of shapes, names); a variant matches by equality."""
    if actual != expected:
        raise diagnosed(CheckFailed(message, details), actual, expected, variants, hint, lambda a, c: a == c)


def _expect_int(actual, expected: int, what: str):
    if isinstance(actual, bool) or not isinstance(actual, int):
        if isinstance(actual, float) and actual.is_integer():
            actual = int(actual)
        else:
            raise CheckFailed(f"`{what}` 应该是整数，你的是 {describe_value(actual)}", {"type": describe_value(actual)})
    if actual != expected:
        raise CheckFailed(f"`{what}` 不对")


def expect_numbers(actual, expected: list[float], what: str, rel: float = HAND, *, variants: VariantsArg = None,
                   hint: HintArg = None):
    """A typed list of numbers, each within relative tolerance; `variants` are (name, the slip's list)."""
    try:
        if not isinstance(actual, (list, tuple)):
            raise CheckFailed(f"`{what}` 应该是一个 list，你的是 {describe_value(actual)}",
                              {"type": describe_value(actual)})
        if len(actual) != len(expected):
            raise CheckFailed(f"`{what}` 应该有 {len(expected)} 个数，你的有 {len(actual)} 个")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _expect_number(a, e, f"{what}[{i}]", rel)
    except CheckFailed as failure:
        raise diagnosed(failure, actual, expected, variants, hint, number_close(rel)) from None


# --- modules: parameter names, weights, forward and backward ---------------------------------------------------


@dataclass(frozen=True)
class ParamKeys:
    """What a module's parameters show, for the recognisers of a check module's `keys` table.

    `extra`: the module's own names that are not pinned; `absent`: pinned names the module lacks; `wrong_shape`:
    pinned names present with another shape (known when the pinned shapes are); `grads`: the parameters that got a
    gradient, None when no backward was probed."""
    shapes: dict
    extra: frozenset
    absent: frozenset
    wrong_shape: frozenset = frozenset()
    load_error: str | None = None
    grads: frozenset | None = None


KeysArg = "dict[str, Callable[[ParamKeys], bool]] | None"


def keys_variant(keys: KeysArg, seen: ParamKeys) -> Variant | None:
    """The one mistake whose recogniser accepts what the parameters show (the same one-name rule); a recogniser
    that raises names nothing and is recorded as the check's bug."""
    def recognise():
        matched = {lookup(name).name for name, rule in (keys or {}).items() if rule(seen)}
        return lookup(matched.pop()) if len(matched) == 1 else None

    return _guarded(recognise)


def _run_keys(run: ModuleRun) -> ParamKeys:
    # load_state_dict's view: "missing" keys are the module's own, absent from the weights
    return ParamKeys({k: list(v) for k, v in run.param_shapes.items()}, frozenset(run.missing_keys),
                     frozenset(run.unexpected_keys), load_error=run.load_error,
                     grads=frozenset(k for k, g in run.param_grads.items() if g is not None)
                     if run.param_grads or run.input_grads else None)


def expect_parameters(shapes: dict, pinned: dict, label: str, *, keys: KeysArg = None):
    """The module's parameters are exactly the `pinned` names and shapes; a mismatch is named by `keys`."""
    mine = {k: list(v) for k, v in shapes.items()}
    pinned = {k: list(v) for k, v in pinned.items()}
    seen = ParamKeys(mine, frozenset(set(mine) - set(pinned)), frozenset(set(pinned) - set(mine)),
                     frozenset(k for k in pinned if k in mine and mine[k] != pinned[k]))
    if mine == pinned:
        return
    problems = []
    if seen.extra:
        problems.append(f"有约定之外的参数 {sorted(seen.extra)[:6]}")
    if seen.absent:
        problems.append(f"缺少参数 {sorted(seen.absent)[:6]}")
    problems += [f"{k} 的形状应该是 {pinned[k]}，你的是 {mine[k]}" for k in pinned if k in seen.wrong_shape][:6]
    pinned_text = f"（约定的参数：{pinned}）" if len(pinned) <= 6 else ""
    failure = CheckFailed(f"{label} 的参数与约定不一致：{'；'.join(problems)}{pinned_text}", {"param_shapes": mine})
    raise named(failure, keys_variant(keys, seen))


def weights_loaded(run: ModuleRun) -> bool:
    return not (run.load_error or run.unexpected_keys or run.missing_keys)


def expect_weights_loaded(run: ModuleRun, class_name: str, *, keys: KeysArg = None):
    """The given weights loaded into the student's module by name; a mismatch is named by `keys`."""
    if weights_loaded(run):
        return
    if run.load_error:
        shapes = "，".join(f"{name} {shape}" for name, shape in sorted(run.param_shapes.items()))
        failure = CheckFailed(f"无法把权重加载进你的 `{class_name}`：参数的形状与约定不一致（你的参数：{shapes}）。"
                              "请对照题目里的参数名和形状", {"param_shapes": run.param_shapes})
    else:
        parts = []
        if run.missing_keys:
            parts.append(f"你的模块有约定之外的参数 {sorted(run.missing_keys)}")
        if run.unexpected_keys:
            parts.append(f"你的模块缺少约定的参数 {sorted(run.unexpected_keys)}")
        failure = CheckFailed(
            f"`{class_name}` 的参数名与约定不一致：{'；'.join(parts)}。参数名是固定的，评分时按名字加载权重",
            {"missing": sorted(run.missing_keys), "unexpected": sorted(run.unexpected_keys)},
        )
    raise named(failure, keys_variant(keys, _run_keys(run)))


def expect_module_matches(run: ModuleRun, reference: dict, tol: Tol, class_name: str, outputs: str = "输出", *,
                          variants: "VariantsArg | dict[int, VariantsArg]" = None, hint: HintArg = None,
                          keys: KeysArg = None, unloaded_ok: bool = False):
    """The module loaded the reference weights, and its forward, input gradient and parameter gradients agree.

    `reference` holds "outputs" (a tensor or tuple), "input_grads" (list) and "param_grads" (dict; both empty for a
    forward-only probe). `variants` and `hint` diagnose the forward's output (for a tuple: `variants` a dict from
    the output's index, `hint` for the first); `keys` names a mistake in the parameters, when the weights do not
    load and when the forward is right but a parameter's gradient is not. `unloaded_ok`: weights that load only
    in part (a key missing or extra) fail only when the output is then wrong, named by `keys` (e.g. an extra
    bias that stays zero changes nothing)."""
    if run.load_error or not unloaded_ok:
        expect_weights_loaded(run, class_name, keys=keys)
    if not weights_loaded(run):
        try:
            _expect_outputs(run.outputs, reference["outputs"], tol, class_name, outputs, None, None)
        except CheckFailed as failure:
            shown = keys_variant(keys, _run_keys(run))
            raise named(failure, shown) if shown else CheckFailed(
                f"{failure.message}。给定的权重没有全部加载进你的模块（参数名与约定不一致：你的模块的参数是 "
                f"{sorted(run.param_shapes)}）", failure.details) from None
    _expect_outputs(run.outputs, reference["outputs"], tol, class_name, outputs, variants, hint)
    # the forward is right from here on: a gradient that disagrees is localised as such. A gradient cut off in the
    # forward (.data, .detach(), .item(), torch.no_grad()) is missing or far off: only then is that suggested
    cut_off = False
    try:
        for i, (a, e) in enumerate(zip(run.input_grads, reference.get("input_grads", []))):
            if a is None:
                raise CheckFailed("输入没有得到梯度：forward 里是否用了 detach、no_grad 或 .data？")
            cut_off = gradient_far_off(a, e)
            _expect_close(a, e, tol, "输入的梯度", False)
        for name, expected_grad in reference.get("param_grads", {}).items():
            actual = run.param_grads.get(name)
            if actual is None:
                cut_off = True
                raise CheckFailed(f"参数 `{name}` 没有得到梯度：它是否参与了 forward？", {"parameter": name})
            cut_off = gradient_far_off(actual, expected_grad)
            _expect_close(actual, expected_grad, tol, f"参数 `{name}` 的梯度", False)
    except CheckFailed as failure:
        why = "（是否在 forward 里用了 .data、.detach()、.item() 或 torch.no_grad()？）" if cut_off else ""
        failure = CheckFailed(f"forward 的输出正确，但反向传播不对：{failure.message}{why}",
                              dict(failure.details, forward_correct=True))
        raise named(failure, keys_variant(keys, _run_keys(run))) from None


GRADIENT_FAR_OFF = 0.1  # relative to the gradient's own scale: what a part of the forward cut off from autograd gives


def gradient_far_off(actual, expected) -> bool:
    """A gradient of the expected shape that is all zero where the expected one is not, or off by more than
    GRADIENT_FAR_OFF of the expected gradient's largest entry: a part of the graph is cut off, not a rounding."""
    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor) and actual.shape == expected.shape
            and actual.dtype.is_floating_point and bool(torch.isfinite(actual).all())):
        return False
    a, e = actual.detach().double(), expected.detach().double()
    scale = float(e.abs().max()) if e.numel() else 0.0
    if scale == 0.0:
        return False
    return not bool(a.any()) or float((a - e).abs().max()) > GRADIENT_FAR_OFF * scale


def _expect_outputs(actual, expected, tol: Tol, class_name: str, what: str, variants, hint):
    if not isinstance(expected, tuple):
        expect_close(actual, expected, tol, what, variants=variants, hint=hint)
        return
    if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
        raise CheckFailed(f"`{class_name}.forward` 应该返回 {len(expected)} 个值的 tuple，你的返回 "
                          f"{describe_value(actual)}")
    per_output = variants if isinstance(variants, dict) else {0: variants}
    for i, (a, e) in enumerate(zip(actual, expected)):
        expect_close(a, e, tol, f"forward 返回的第 {i + 1} 个值", variants=per_output.get(i),
                     hint=hint if i == 0 else None)


def reference_with(module: torch.nn.Module, state: dict, dtype=None) -> torch.nn.Module:
    """A reference module holding the given weights (in `dtype` when given)."""
    if dtype is not None:
        module = module.to(dtype)
    module.load_state_dict(state)
    return module


def module_round_trip(student, solution, class_name: str, init_args=(), init_kwargs=None, *, weights: dict, args=(),
                      kwargs=None, dtype=None, grad_outputs=None, requires_grad=()) -> tuple[ModuleRun, dict]:
    """The reference `class_name` of `solution` (the assignment's module of solutions) and the student's, built with
    the same arguments, loaded with the same `weights` (in `dtype` when given), run forward on the same inputs and
    backward with the same output gradients: (the student's ModuleRun, the reference's run_reference)."""
    reference = reference_with(getattr(solution, class_name)(*init_args, **(init_kwargs or {})), weights, dtype)
    expected = run_reference(reference, args, kwargs, grad_outputs, requires_grad)
    run = student.module(class_name, init_args, init_kwargs, state_dict=weights, dtype=dtype, method="forward",
                         args=args, kwargs=kwargs, grad_outputs=grad_outputs, requires_grad=requires_grad)
    return run, expected


def expect_module(student, solution, class_name: str, init_args=(), init_kwargs=None, *, weights: dict, args=(),
                  kwargs=None, dtype=None, grad_outputs=None, requires_grad=(), tol: Tol, outputs: str = "输出",
                  variants: "VariantsArg | dict[int, VariantsArg]" = None, hint: HintArg = None, keys: KeysArg = None,
                  unloaded_ok: bool = False) -> ModuleRun:
    """The module round trip (module_round_trip) compared by expect_module_matches, with its variants, hint and
    keys: a check writes its module's arguments, weights and inputs once."""
    run, expected = module_round_trip(student, solution, class_name, init_args, init_kwargs, weights=weights, args=args,
                                      kwargs=kwargs, dtype=dtype, grad_outputs=grad_outputs,
                                      requires_grad=requires_grad)
    expect_module_matches(run, expected, tol, class_name, outputs, variants=variants, hint=hint, keys=keys,
                          unloaded_ok=unloaded_ok)
    return run


def expect_module_precision(student, solution, class_name: str, init_args=(), init_kwargs=None, *, weights: dict,
                            args=(), what: str, keys: KeysArg = None, index: int | None = None):
    """A part's precision check on a module: the weights load (else named by `keys`) and the float64 forward equals
    the reference's to float64 precision (expect_float64_precision). `index`: compare that one of a tuple of outputs
    (the student's outputs as they are when they are not a tuple of the reference's length)."""
    run, expected = module_round_trip(student, solution, class_name, init_args, init_kwargs, weights=weights, args=args,
                                      dtype=torch.float64)
    expect_weights_loaded(run, class_name, keys=keys)
    actual, expected = run.outputs, expected["outputs"]
    if index is not None:
        if isinstance(actual, (tuple, list)) and len(actual) == len(expected):
            actual = actual[index]
        expected = expected[index]
    expect_float64_precision(actual, expected, what)


# --- draws from the check's generator --------------------------------------------------------------------------


def randint(rng: torch.Generator, low: int, high: int) -> int:
    """One integer in [low, high) from the check's generator."""
    return int(torch.randint(low, high, (1,), generator=rng))


def randn(rng: torch.Generator, *shape, dtype=torch.float64, scale: float = 1.0) -> torch.Tensor:
    """Standard normal draws (times `scale`), made in float64 and cast: the same values in every dtype."""
    return (scale * torch.randn(shape, generator=rng, dtype=torch.float64)).to(dtype)


def random_weights(rng: torch.Generator, shapes: dict, dtype=torch.float64, gain: float = 1.0) -> dict:
    """Weights by the pinned names: N(0, gain² / fan_in) for each `name: shape`, drawn in the dict's order."""
    return {name: randn(rng, *shape, dtype=dtype, scale=gain / math.sqrt(shape[1] if len(shape) > 1 else 1))
            for name, shape in shapes.items()}


def random_mask(rng: torch.Generator, S: int, dtype=torch.float64) -> torch.Tensor:
    """A non-causal 0/-inf mask: about a third of the entries blocked, at least one blocked above and below
    the diagonal, never a whole row."""
    blocked = torch.rand(S, S, generator=rng) < 0.35
    blocked[0, S - 1] = blocked[S - 1, 0] = True
    for i in range(S):
        if blocked[i].all():
            blocked[i, randint(rng, 0, S)] = False
    mask = torch.zeros(S, S, dtype=dtype)
    mask[blocked] = float("-inf")
    return mask


def run_reference(module: torch.nn.Module, args=(), kwargs=None, grad_outputs=None, requires_grad=()) -> dict:
    """What the reference module gives for the probe the student's module gets: outputs and gradients."""
    args = list(args)
    for i in requires_grad:
        args[i] = args[i].detach().clone().requires_grad_(True)
    module.zero_grad(set_to_none=True)
    outputs = module(*args, **(kwargs or {}))
    produced = outputs if isinstance(outputs, tuple) else (outputs,)
    if grad_outputs is not None:
        pairs = [(o, g) for o, g in zip(produced, grad_outputs) if g is not None]
        # the gradients of backward(outputs, grad_outputs) (d sum(o * g) / do = g: bit for bit for one output), without the
        # explicit grad tensors whose first use imports torch's symbolic shapes (sympy, ~0.4 s of a one-notebook run)
        sum((o * g).sum() for o, g in pairs).backward()
    detach = lambda t: t.detach() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return {
        "outputs": tuple(detach(o) for o in outputs) if isinstance(outputs, tuple) else detach(outputs),
        "input_grads": [args[i].grad for i in requires_grad],
        "param_grads": {name: p.grad for name, p in module.named_parameters()} if grad_outputs is not None else {},
    }


def causal_mask(seq_len: int, dtype=torch.float32) -> torch.Tensor:
    """The pinned causal mask: additive, -inf above the diagonal."""
    return torch.triu(torch.full((seq_len, seq_len), float("-inf"), dtype=dtype), diagonal=1)


def forward_args(x, mask=None, mask_by_keyword: bool = False) -> tuple[tuple, dict]:
    """(args, kwargs) of a module's forward on `x` with an optional mask, passed by position or as `mask=`."""
    if mask is None:
        return (x,), {}
    return ((x,), {"mask": mask}) if mask_by_keyword else ((x, mask), {})


def same_values(actual, candidate: torch.Tensor, tol: Tol) -> bool:
    """`actual` equals a known-wrong `candidate` within ten times `tol`, NaN and inf where the candidate has them.

    Used to name a mistake: the student's output is compared with what a catalogued variant gives.
    """
    if not isinstance(actual, torch.Tensor) or actual.shape != candidate.shape or not actual.dtype.is_floating_point:
        return False
    a, c = actual.detach().double(), candidate.detach().double()
    if not torch.equal(torch.isnan(a), torch.isnan(c)):
        return False
    keep = ~torch.isnan(c)
    a, c = a[keep], c[keep]
    if not torch.equal(torch.isinf(a), torch.isinf(c)) or not torch.equal(a[torch.isinf(c)], c[torch.isinf(c)]):
        return False
    finite = torch.isfinite(c)
    return bool(((a[finite] - c[finite]).abs() <= 10 * (tol.atol + tol.rtol * c[finite].abs())).all())
