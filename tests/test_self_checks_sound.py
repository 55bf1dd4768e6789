"""No self-check rejects correct code.

Every grade cell's self-checks run in-process on every correct example (the reference notebook and each ALTERNATIVES
style of autograder/examples/), once with each of 200 other seeds in place of the cell's own, and once with each
other order of creating the direct submodules and parameters of each module class the cell builds (the statements of
its __init__ swapped: every order, or 50 random ones where there are more than 120). Each run must print ✅.
"""

import random

import pytest
import torch

from self_checks import NotebookRun, cpu_manual_seed, cpu_seeding, student_env, with_seeds
from autograder.assignments import assignment_ids
from autograder.examples import alternatives, notebook_with_edits

SEEDS = random.Random(22).sample(range(1, 10**6), 200)

EXAMPLES = [(a, "reference", ()) for a in assignment_ids()] + [
    (a, alt.name, alt.edits) for a in assignment_ids() for alt in alternatives(a)]

# classes whose creation order cannot be varied by swapping statements of __init__, with the reason
UNVARIED = {
    ("gradient_flow", "modules_and_autograd_grad"): {
        "PreNormStack": "one loop appends a Linear and a LayerNorm per layer: they are drawn interleaved, the only "
                        "order this code has (LayerNorm draws no random numbers, so every order gives the same weights)",
    },
}


def run_all(run: NotebookRun, seeds=SEEDS, grade_ids=None) -> tuple[list[str], dict[str, int], list]:
    """The failures of every grade cell over the seeds and the creation orders, and how many orders each class had."""
    classes, unvaried = run.module_classes()
    failures, orders_run = [], {}
    for grade_id, source in run.grade_cells():
        if grade_ids is not None and grade_id not in grade_ids:
            continue
        assert run.run_check(source, grade_id) is None, f"{grade_id} fails with the notebook's own seed"
        for seed in seeds:
            message = run.run_check(with_seeds(source, [seed + 7919 * k for k in range(8)]), grade_id)
            if message:
                failures.append(f"{grade_id}, seed {seed}: {message}")
        for module_class in classes:
            with run.counting(module_class.name) as made:
                run.run_check(source, grade_id)
            if not made:
                continue
            for order in module_class.orders():
                orders_run[module_class.name] = orders_run.get(module_class.name, 0) + 1
                with run.reordered(module_class, order):
                    message = run.run_check(source, grade_id)
                if message:
                    failures.append(f"{grade_id}, {module_class.name} created in order {order}: {message}")
    return failures, orders_run, unvaried


@pytest.mark.slow
@pytest.mark.parametrize(("assignment_id", "name", "edits"), EXAMPLES, ids=[f"{a}-{n}" for a, n, _ in EXAMPLES])
def test_no_self_check_rejects_correct_code(assignment_id, name, edits):
    torch.set_num_threads(1)
    with student_env("2024012345"):
        run = NotebookRun(notebook_with_edits(assignment_id, edits))
        failures, orders_run, unvaried = run_all(run)
    assert not failures, f"{len(failures)} runs of the self-checks reject correct code:\n" + "\n".join(failures[:20])
    assert {u.name: u.reason for u in unvaried}.keys() == UNVARIED.get((assignment_id, name), {}).keys(), unvaried
    classes, _ = run.module_classes()
    assert set(orders_run) == {c.name for c in classes}, "a module class that no self-check builds"
    if assignment_id == "llama_block" and name == "reference":
        # the four linears and the QK-Norm pair: 5! orders, the notebook's own and 119 others, in both cells
        assert orders_run == {"LlamaAttention": 2 * 119, "LlamaBlock": 23}


# ---------------------------------------------------------------- the QK-Norm self-check of llama_attention

QK_NORM_CALL = "            q, k = self.q_norm(q), self.k_norm(k)\n"
NORMS = ("            self.q_norm = RMSNorm(self.d_head, eps)\n"
         "            self.k_norm = RMSNorm(self.d_head, eps)\n")
QK_NORM_HINT = "QK-Norm 是否作用在了 q 和 k 上"
EPS_HINT = "是否用了传入的 eps"
WRONG = {
    "qk_norm_missing": [(QK_NORM_CALL, "            pass\n")],
    "qk_norm_on_q_only": [(QK_NORM_CALL, "            q = self.q_norm(q)\n")],
}
# the check as it was: eps = 1e-6 (the default) and allclose(atol=1e-6), which a correct module fails for some weights
NEW_CHECK = (
    "    _qkn = LlamaAttention(_d_model, _nq, _nkv, eps=0.0, qk_norm=True).double()\n",
    "    _gap = (_qkn(_x64, _causal.double()) - _before).abs().max().item()\n",
)
OLD_CHECK = (
    "    _qkn = LlamaAttention(_d_model, _nq, _nkv, qk_norm=True).double()\n",
    "    _gap = 0.0 if torch.allclose(_qkn(_x64, _causal.double()), _before, atol=1e-6) else 1.0\n",
)


def attention_check_failures(edits, seeds=SEEDS):
    with student_env("2024012345"):
        run = NotebookRun(notebook_with_edits("llama_block", edits))
        source = dict(run.grade_cells())["llama_attention"]
        return [run.run_check(with_seeds(source, [s]), "llama_attention") for s in seeds]


@pytest.mark.parametrize("wrong", sorted(WRONG))
def test_qk_norm_self_check_catches_a_missing_qk_norm(wrong):
    messages = attention_check_failures(WRONG[wrong])
    assert all(m is not None and QK_NORM_HINT in m for m in messages), [m for m in messages if not m][:3]


def test_qk_norm_self_check_names_eps_not_qk_norm_when_eps_is_ignored():
    """q_norm/k_norm built without the eps they were given (RMSNorm's default 1e-6): nearly scale-invariant, so the
    check may not say QK-Norm is missing; it fails on the tight bound and names eps."""
    messages = attention_check_failures([(NORMS, NORMS.replace(", eps)", ")"))], SEEDS[:50])
    assert all(m is not None and EPS_HINT in m and QK_NORM_HINT not in m for m in messages), messages[:3]


def test_the_old_qk_norm_self_check_is_caught_rejecting_the_reference():
    """The test above can fail: with the check as it was (eps = 1e-6, atol = 1e-6) the reference is rejected for
    some seeds and some orders of creating LlamaAttention's linears."""
    with student_env("2024012345"):
        run = NotebookRun(notebook_with_edits("llama_block", list(zip(NEW_CHECK, OLD_CHECK))))
        failures, _, _ = run_all(run, seeds=SEEDS[:100], grade_ids={"llama_attention"})
    by_seed = [f for f in failures if ", seed " in f]
    by_order = [f for f in failures if "created in order" in f]
    assert by_seed and by_order, failures[:3]
    assert all(QK_NORM_HINT in f for f in failures)


@pytest.mark.parametrize("seed", [0, 1, 42, 987654, 2**40 + 3])
def test_the_harness_seeds_the_generator_as_torch_manual_seed_does(seed):
    """The cells run with cpu_manual_seed in place of torch.manual_seed (self_checks.cpu_seeding): the same generator
    state and the same draws, the same object returned, and torch's own function back afterwards."""
    original = torch.manual_seed
    returned = torch.manual_seed(seed)
    state, draws = torch.get_rng_state(), torch.randn(6)
    torch.manual_seed(seed + 1)
    with cpu_seeding():
        assert torch.manual_seed is cpu_manual_seed
        assert torch.manual_seed(seed) is returned
        assert torch.equal(torch.get_rng_state(), state) and torch.equal(torch.randn(6), draws)
    assert torch.manual_seed is original

