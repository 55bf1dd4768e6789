""""Precision" is said only where it is precision (issue 22), graded in this process without a kernel
(tests/inprocess_grading.py):

- every precision example (a right algorithm with float32 internals on float64 inputs, the literal transformers style
  of llama_block among them) loses only its parts' precision checks, and is named as the precision, for 50 student
  ids each (each id has its own hidden inputs): no float64 tolerance is loosened for that;
- the slightly wrong norms (eps outside the root, F.normalize(x) * sqrt(d) * gamma, an eps of 1e-5; within float32
  rounding of the reference on unit-scale inputs at the default eps) fail a check of their part that is not a
  precision check, and are never called a precision, for 10 ids each;
- the rule itself (autograder.checks.plugin.precision_where_shown_right): a precision check names the precision only
  where every other check of its part ran and passed.
"""

import pytest

from autograder.checks.diagnosis import PRECISION
from autograder.examples import precision_cases

# "s0001": the id for which, with an upstream gradient of N(0, 1), the transformers style's W_k gradient in the
# float64 causal block check was off by 2.5e-5 (1 id in 300), and so lost an extra point
PRECISION_IDS = ["s0001"] + [f"precision-{i:03d}" for i in range(49)]
SLIP_IDS = [f"slip-{i:03d}" for i in range(10)]
WITH_PRECISION = [a for a in ("rmsnorm", "swiglu", "gqa_saving", "rope", "mla", "llama_block") if precision_cases(a)]
# the norm slips of issue 22, and the catalogued eps slip they sit next to
NORM_SLIPS = {
    "rmsnorm": {"eps_outside_root", "f_normalize_sqrt_d", "eps_hard_coded_1e5", "module_eps_1e5"},
    "llama_block": {"qk_norm_eps_outside_root", "qk_norm_f_normalize", "qk_norm_eps_1e5", "block_norms_eps_outside_root",
                    "block_norms_f_normalize", "block_norms_eps_1e5"},
}


def grade(assignment_id, student_ids, select):
    import torch

    from inprocess_grading import grade_examples

    torch.set_num_threads(1)
    return grade_examples([assignment_id], student_ids=student_ids, select=select)


def precision_checks(assignment_id) -> set[str]:
    return set().union(*(case.failing for case in precision_cases(assignment_id)))


@pytest.mark.parametrize("assignment_id", WITH_PRECISION)
def test_precision_examples_lose_only_their_precision_checks_for_50_ids(assignment_id):
    verdicts = grade(assignment_id, PRECISION_IDS, lambda kind, example: kind == "precision")
    cases = {case.name: case for case in precision_cases(assignment_id)}
    assert len(verdicts) == len(cases) * len(PRECISION_IDS)
    wrong = []
    for v in verdicts:
        case = cases[v.name]
        # the precision checks of its parts only (one of them may pass for an id whose inputs happen to round
        # exactly), at least one, and each named as the precision
        ok = (v.failed and set(v.failed) <= set(case.failing) and v.named == [PRECISION.name]
              and all(PRECISION.explanation in message for message in v.messages.values()))
        if not ok:
            wrong.append((v.name, v.student_id, v.failed, v.named))
    assert wrong == []


@pytest.mark.parametrize("assignment_id", sorted(NORM_SLIPS))
def test_slightly_wrong_norms_are_never_called_precision(assignment_id):
    from autograder.assignments import load_assignment

    verdicts = grade(assignment_id, SLIP_IDS,
                     lambda kind, example: kind == "mistake" and example.name in NORM_SLIPS[assignment_id])
    assert {v.name for v in verdicts} == NORM_SLIPS[assignment_id]
    part_of = {name: _grade_id(assignment_id, name) for name in precision_checks(assignment_id)}
    assert len(load_assignment(assignment_id).parts) > 1
    wrong = []
    for v in verdicts:
        lost_precision = [name for name in v.failed if name in part_of]
        # a precision check it fails is never named, and its part has another failed check that shows the slip
        shown = all(any(other != name and _grade_id(assignment_id, other) == part_of[name]
                        and other not in part_of for other in v.failed) for name in lost_precision)
        if PRECISION.name in v.named or not shown or not v.ok:
            wrong.append((v.name, v.student_id, v.failed, v.named, v.why))
        for name in lost_precision:
            assert "float32" not in v.messages[name] and PRECISION.explanation not in v.messages[name]
    assert wrong == []


def _grade_id(assignment_id, check_name) -> str:
    import importlib

    module = importlib.import_module(f"autograder.checks.{assignment_id}")
    mark = next(m for m in getattr(module, check_name).pytestmark if m.name == "autograde_check")
    return mark.kwargs["grade_id"]


# --- the rule, on outcomes made by hand -----------------------------------------------------------------------


def _outcome(name, grade_id, passed, precision=False, crashed=False):
    from autograder.checks import CheckFailed, PrecisionNamed
    from autograder.checks.plugin import CheckOutcome, CheckSpec

    spec = CheckSpec(name, grade_id, 0.5, name)
    if passed:
        return CheckOutcome(spec, True, "通过", {}, None, 0.0)
    if precision:
        failure = PrecisionNamed("只有 float32 的精度。" + PRECISION.explanation, {"max_abs_error": 1e-7},
                                 CheckFailed("输出与参考实现不一致（float64 精度检查；错在哪里见本题的其他检查）",
                                             {"max_abs_error": 1e-7}))
        return CheckOutcome(spec, False, failure.message, failure.details, failure.diagnosis, 0.0,
                            unnamed=failure.unnamed)
    return CheckOutcome(spec, False, "不一致", {}, None, 0.0, crash="boom" if crashed else None)


@pytest.mark.parametrize("others, named", [
    ({"a": True, "b": True}, True),  # every other check of the part passed: the algorithm is shown right
    ({"a": True, "b": False}, False),  # one failed: a plain mismatch
    ({"a": True, "b": "crashed"}, False),
    ({"a": True}, False),  # b did not run (a subset of the checks): nothing shows the algorithm right
])
def test_the_precision_is_named_only_where_the_parts_other_checks_passed(others, named):
    from autograder.checks.plugin import precision_where_shown_right

    outcomes = [_outcome(n, "part", p is True, crashed=p == "crashed") for n, p in others.items()]
    outcomes += [_outcome("precision", "part", False, precision=True), _outcome("elsewhere", "other", False)]
    parts = {"part": {"a", "b", "precision"}, "other": {"elsewhere"}}
    judged = {o.spec.name: o for o in precision_where_shown_right(outcomes, parts)}
    precision = judged["precision"]
    assert not precision.passed
    if named:
        assert precision.diagnosis == PRECISION.name and PRECISION.explanation in precision.message
    else:
        assert precision.diagnosis is None and "float32" not in precision.message
        assert precision.message.startswith("输出与参考实现不一致（float64 精度检查")
    assert judged["elsewhere"].message == "不一致"  # a check of another part is left alone
