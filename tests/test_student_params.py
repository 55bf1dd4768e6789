"""The per-student numbers: deterministic, different across students, never degenerate."""

import math

import pytest

from solutions import gqa_saving, llama_block, mla, rmsnorm
from autograder.assignments import assignment_ids, has_hand
from solutions.student_params import student_answers, student_params

HAND = tuple(a for a in assignment_ids() if has_hand(a))

MANY_IDS = [f"s{i:05d}" for i in range(3000)] + ["alice", "Bob Smith", "张三", "2024012345", "a/b"]
# Two answers count as the same number below this relative distance; the graded tolerance is 5e-4
# and EXERCISES.md asks variants to stay >= 1e-2 apart.
SEPARATION = 1e-2
MODULES_WITH_SLIPS = {"rmsnorm": rmsnorm, "gqa_saving": gqa_saving, "mla": mla, "llama_block": llama_block}
# Answer fields in the same unit: a slip in one must not land on the right answer of another.
SAME_UNIT_FIELDS = {"rmsnorm": [], "gqa_saving": ["mha_kv_bytes", "gqa_kv_bytes"],
                    "mla": ["mha_bytes", "gqa_bytes", "mla_bytes"], "llama_block": []}


@pytest.mark.parametrize("assignment_id", HAND)
def test_same_id_same_numbers(assignment_id):
    assert student_params(assignment_id, "alice") == student_params(assignment_id, "alice")


@pytest.mark.parametrize("assignment_id", sorted(MODULES_WITH_SLIPS))
def test_different_ids_get_different_numbers(assignment_id):
    assert student_params(assignment_id, "alice") != student_params(assignment_id, "bob")
    sets = [repr(student_params(assignment_id, sid)) for sid in MANY_IDS[:500]]
    # in a class of 500, few students share their numbers with anyone
    shared = sum(sets.count(s) > 1 for s in sets)
    assert shared <= 50, f"{shared} of 500 students share their numbers with someone"


def test_option_orders_are_spread_evenly():
    """gradient_flow has 4! = 24 option orders: all of them occur, none far more often than 1/24."""
    orders = [tuple(student_params("gradient_flow", sid)["options"].values()) for sid in MANY_IDS]
    counts = {order: orders.count(order) for order in set(orders)}
    assert len(counts) == 24
    assert max(counts.values()) < 2 * len(orders) / 24


def test_numbers_depend_on_the_assignment_too():
    assert student_params("rmsnorm", "alice") != student_params("rmsnorm", "alice ")


def test_empty_id_is_refused_with_a_message():
    with pytest.raises(ValueError, match="STUDENT_ID"):
        student_params("rmsnorm", "")
    with pytest.raises(ValueError, match="assignment_id"):
        student_params("rope", "alice")


def distance(a, b) -> float:
    """Largest relative difference between two answers (numbers or lists of numbers)."""
    if isinstance(a, list):
        return max(distance(x, y) for x, y in zip(a, b))
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


@pytest.mark.parametrize("assignment_id", sorted(MODULES_WITH_SLIPS))
def test_no_parameter_set_makes_a_slip_look_right_or_like_another_slip(assignment_id):
    """For every answer field, two variants that differ at all differ by >= 1e-2 for every student.

    A pair of variants that coincides for some students but not for others is a degenerate parameter set
    (e.g. num_q_heads / num_kv_heads == 2 makes a forgotten `1 -` invisible).
    """
    module = MODULES_WITH_SLIPS[assignment_id]
    verdicts: dict[tuple, set] = {}
    for sid in MANY_IDS:
        inputs = student_params(assignment_id, sid)
        variants = {"right": module.hand_answers(inputs), **module.hand_slips(inputs)}
        names = sorted(variants)
        for field in variants["right"]:
            for i, a in enumerate(names):
                for b in names[i + 1 :]:
                    d = distance(variants[a][field], variants[b][field])
                    same = d == 0 or d < 1e-12
                    assert same or d >= SEPARATION, f"{sid}: {a} and {b} differ by only {d:.2g} in {field}"
                    verdicts.setdefault((field, a, b), set()).add(same)
        for field in SAME_UNIT_FIELDS[assignment_id]:
            for other in SAME_UNIT_FIELDS[assignment_id]:
                if other == field:
                    continue
                for name in names:
                    d = distance(variants[name][field], variants["right"][other])
                    same = d < 1e-12
                    assert same or d >= SEPARATION, f"{sid}: {name} {field} is within {d:.2g} of the right {other}"
                    verdicts.setdefault((field, name, "right " + other), set()).add(same)
    mixed = [key for key, seen in verdicts.items() if seen == {True, False}]
    assert not mixed, f"variants that coincide only for some students: {mixed}"


@pytest.mark.parametrize("assignment_id", HAND)
def test_answers_are_well_formed(assignment_id):
    for sid in MANY_IDS[:200]:
        answers = student_answers(assignment_id, sid)
        for value in answers.values():
            values = value if isinstance(value, list) else [value]
            assert all(isinstance(v, str) or math.isfinite(v) for v in values)


def test_gqa_configurations_never_use_ratio_two():
    for sid in MANY_IDS:
        p = student_params("gqa_saving", sid)
        assert 1 < p["num_kv_heads"] < p["num_q_heads"] and p["num_q_heads"] // p["num_kv_heads"] != 2
        assert p["num_q_heads"] % p["num_kv_heads"] == 0
