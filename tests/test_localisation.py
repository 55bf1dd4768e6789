"""Fewer generic messages (issue 22, item 6): llama_block's wrong block localised to the sub-layer that is wrong (its
own sub-modules probed by their pinned names with the same weights), the common block mistakes named, and one
uncatalogued module mistake each in swiglu, gqa_saving and mla whose message names the wrong step.

Two halves, both without a kernel or a sandbox: the examples graded in-process (tests/inprocess_grading.py, one
subprocess for all of them), and each new hint called directly, with a stand-in student answered by the reference
classes (a sub-module replaced, a probe failing), for the cases where the hint's condition is false."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autograder.checks import F64, StudentCodeFailed, causal_mask, random_weights
from autograder.checks.probes import ModuleRun

HERE = Path(__file__).resolve().parent

# --- the examples, graded in-process ---------------------------------------------------------------------------

ASSIGNMENTS = ["llama_block", "swiglu", "gqa_saving", "mla"]
EXAMPLES = [
    # llama_block: the four catalogued block mistakes (two ways of sharing one QK-Norm)
    "norm_attn_for_ffn", "block_gate_up_swapped", "k_through_q_norm", "one_qk_norm_module", "block_always_causal",
    # llama_block, uncatalogued: the FFN wrong, the wiring wrong, the attention wrong
    "block_own_ffn_gelu", "parallel_block", "rope_theta_not_passed",
    # one uncatalogued module mistake each, and a differently-wrong one that must not get its hint
    "residual_inside_ffn", "sigmoid_on_up_branch", "v_from_w_k", "scale_after_softmax", "w_o_weight_untransposed",
]
NAMED = {"norm_attn_for_ffn": "norm_attn_for_ffn", "block_gate_up_swapped": "gate_up_swapped",
         "k_through_q_norm": "shared_qk_norm", "one_qk_norm_module": "shared_qk_norm",
         "block_always_causal": "always_causal"}

BLOCK_FLOAT_CHECKS = {"test_block_causal_float64", "test_block_qk_norm_float64", "test_block_theta_float64",
                      "test_block_random_mask_float64", "test_block_float32"}
FFN_WRONG = "ffn（SwiGLU FFN）的输出与参考实现不一致"
ATTN_WRONG = "attn（注意力子层）的输出与参考实现不一致"
SUB_MODULE_NAMED = "的输出与参考实现不一致；"
WIRING = "问题在 forward 怎样把它们连起来"
RESIDUAL_IN_FFN = "你的输出恰好是输入 x（应该全为 0）：FFN 里加了残差"
W_DOWN_ZEROED = "把 W_down 的权重置零时"
W_V_UNUSED = "把 W_v 的权重换成别的值，你的输出完全不变"
UNUSED = "你的输出完全不变"
W_O_STEP = "把 W_o 换成单位矩阵时，你的 out 与参考实现一致"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    report = tmp_path_factory.mktemp("localisation") / "verdicts.json"
    code = ("import json, sys, torch\n"
            "torch.set_num_threads(1)\n"
            f"sys.path.insert(0, {str(HERE)!r})\n"
            "from inprocess_grading import grade_examples\n"
            f"verdicts = grade_examples({ASSIGNMENTS!r}, names={EXAMPLES!r})\n"
            f"open({str(report)!r}, 'w', encoding='utf-8').write(json.dumps([v.__dict__ for v in verdicts], "
            "ensure_ascii=False))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    return {v["name"]: v for v in json.loads(report.read_text(encoding="utf-8"))}


def test_every_example_is_graded_as_the_selftest_expects(graded):
    assert sorted(graded) == sorted(EXAMPLES)
    assert [(name, v["why"]) for name, v in graded.items() if not v["ok"]] == []


def test_the_common_block_mistakes_are_named(graded):
    for example, variant in NAMED.items():
        assert graded[example]["named"] == [variant], example
        assert any(c.startswith("test_block_") for c in graded[example]["failed"]), example


def messages(graded, example, checks=None):
    return {c: m for c, m in graded[example]["messages"].items() if checks is None or c in checks}


def test_a_wrong_ffn_in_the_block_is_localised_to_the_ffn_and_nothing_else(graded):
    shown = messages(graded, "block_own_ffn_gelu", BLOCK_FLOAT_CHECKS)
    assert set(shown) == BLOCK_FLOAT_CHECKS
    for check, text in shown.items():
        assert FFN_WRONG in text and "norm_attn、attn、norm_ffn 的输出正确" in text, check
        assert ATTN_WRONG not in text and WIRING not in text, check


def test_a_wrong_wiring_is_said_only_when_every_sub_module_is_right(graded):
    shown = messages(graded, "parallel_block", BLOCK_FLOAT_CHECKS)
    assert set(shown) == BLOCK_FLOAT_CHECKS
    for check, text in shown.items():
        assert WIRING in text and SUB_MODULE_NAMED not in text, check
    # the attention wrong (theta not passed to its RoPE): the block names attn, never the wiring
    text = messages(graded, "rope_theta_not_passed")["test_block_theta_float64"]
    assert ATTN_WRONG in text and WIRING not in text and FFN_WRONG not in text
    # a named mistake gets its name, no localisation
    for example in NAMED:
        assert all(WIRING not in t and SUB_MODULE_NAMED not in t for t in messages(graded, example).values())


def test_swiglu_a_residual_inside_the_ffn_is_named_from_w_down_zeroed(graded):
    shown = messages(graded, "residual_inside_ffn", {"test_module_forward_backward_float64",
                                                     "test_module_forward_float32"})
    assert len(shown) == 2 and all(RESIDUAL_IN_FFN in t for t in shown.values())
    # differently wrong (the sigmoid on the up branch): W_down zeroed gives zero there, nothing said about it
    assert all(W_DOWN_ZEROED not in t for t in messages(graded, "sigmoid_on_up_branch").values())


def test_gqa_an_unused_projection_is_named_only_where_the_reference_depends_on_it(graded):
    shown = messages(graded, "v_from_w_k")
    module_checks = {c for c in shown if c.startswith("test_module_") and "precision" not in c}
    assert module_checks and all(W_V_UNUSED in shown[c] for c in module_checks)
    # one token: the right output does not depend on W_q or W_k either, and the student's does not: not named
    single = shown["test_module_single_token"]
    assert "W_q" not in single.split("你的输出完全不变")[0] and "W_k" not in single.split("你的输出完全不变")[0]
    assert all(UNUSED not in t for t in messages(graded, "scale_after_softmax").values())


def test_mla_a_misapplied_w_o_is_named_from_w_o_replaced_by_the_identity(graded):
    shown = messages(graded, "w_o_weight_untransposed")
    out_checks = {"test_module_forward_backward_float64", "test_module_additive_mask", "test_module_float32_no_mask"}
    assert out_checks <= set(shown) and all(W_O_STEP in shown[c] for c in out_checks)


# --- each hint's condition false, the hint called directly ---------------------------------------------------


class ReferenceStudent:
    """Stands in for StudentCode's module probe: the reference's class of that name (solutions/<assignment>), loaded
    with the weights, its method (a sub-module's too) called. `replace` maps a method path to a function of the
    reference's output (a wrong sub-module); `failing` holds method paths whose probe fails as the student's code."""

    def __init__(self, package, replace=None, failing=(), fixed=()):
        self.package, self.replace, self.failing, self.fixed = package, replace or {}, set(failing), set(fixed)

    def module(self, class_name, init_args=(), init_kwargs=None, *, state_dict=None, dtype=None, method=None,
               args=(), kwargs=None, **_):
        if method in self.failing:
            raise StudentCodeFailed(f"运行 `{class_name}(...)` 时你的代码抛出了 AttributeError")
        module = getattr(self.package, class_name)(*init_args, **(init_kwargs or {}))
        if dtype is not None:
            module = module.to(dtype)
        module.load_state_dict(state_dict)
        for name in self.fixed:  # a weight the "student" never reads: fixed whatever is loaded
            with torch.no_grad():
                module.get_parameter(name).fill_(0.01)
        target = module
        for part in method.split(".")[:-1]:
            target = getattr(target, part)
        with torch.no_grad():
            out = getattr(target, method.split(".")[-1])(*args, **(kwargs or {}))
        if method in self.replace:
            out = self.replace[method](out)
        return ModuleRun({k: list(v.shape) for k, v in module.state_dict().items()}, [], [], None, outputs=out)


@pytest.fixture
def block_case():
    from autograder.checks import llama_block as checks

    rng = torch.Generator().manual_seed(3)
    config, options = (48, 6, 2), {"qk_norm": True}
    weights = checks.llama_weights(rng, checks.block_shapes(*config, None, True), torch.float64)
    x = torch.randn(2, 5, 48, generator=rng, dtype=torch.float64)
    return checks, config, options, weights, x, causal_mask(5, torch.float64)


def block_hint(block_case, student):
    checks, config, options, weights, x, mask = block_case
    hint = checks.localise_block(student, config, options, weights, x, mask, F64)
    return hint(torch.zeros_like(x), x)  # the values are not what the hint reads: it probes


def test_block_hint_right_sub_modules_give_the_wiring_and_nothing_else(block_case):
    from solutions import llama_block as ref

    text = block_hint(block_case, ReferenceStudent(ref))
    assert WIRING in text and SUB_MODULE_NAMED not in text


def test_block_hint_names_only_the_wrong_sub_module(block_case):
    from solutions import llama_block as ref

    text = block_hint(block_case, ReferenceStudent(ref, replace={"norm_ffn.forward": lambda t: 1.5 * t}))
    assert "norm_ffn（FFN 前的 RMSNorm）的输出与参考实现不一致" in text and "norm_attn、attn、ffn 的输出正确" in text
    assert WIRING not in text and ATTN_WRONG not in text and FFN_WRONG not in text


def test_block_hint_float32_rounding_in_a_sub_module_is_not_called_wrong(block_case):
    from solutions import llama_block as ref

    rounded = ReferenceStudent(ref, replace={"attn.forward": lambda t: t.float().double()})
    text = block_hint(block_case, rounded)
    assert WIRING in text and ATTN_WRONG not in text


def test_block_hint_says_nothing_of_a_sub_module_it_cannot_reach(block_case):
    from solutions import llama_block as ref

    # attn not reachable, the others right: nothing established about the wiring, nothing said
    assert block_hint(block_case, ReferenceStudent(ref, failing={"attn.forward"})) is None
    # attn not reachable, ffn wrong: ffn named, attn not spoken of
    text = block_hint(block_case, ReferenceStudent(ref, failing={"attn.forward"},
                                                   replace={"ffn.forward": lambda t: -t}))
    assert FFN_WRONG in text and "attn" not in text.replace("norm_attn", "") and WIRING not in text


def test_mla_w_o_hint_only_when_every_step_but_w_o_is_right():
    from autograder.checks import mla as checks
    from solutions import mla as ref

    rng = torch.Generator().manual_seed(5)
    weights = random_weights(rng, checks.pinned_shapes(checks.D_MODEL, checks.D_LATENT))
    x = torch.randn(2, 6, checks.D_MODEL, generator=rng, dtype=torch.float64)
    mask = causal_mask(6, torch.float64)
    expected, _ = checks.reference_module(weights)(x, mask)

    def hint(student):
        return checks.localise_output_projection(student, weights, x, mask, checks.NUM_HEADS, checks.D_LATENT,
                                             F64)(2 * expected, expected)

    # wrong before W_o (every output doubled, under the identity too): nothing said
    assert hint(ReferenceStudent(ref, replace={"forward": lambda o: (2 * o[0], o[1])})) is None
    # the probe fails: nothing said
    assert hint(ReferenceStudent(ref, failing={"forward"})) is None


def test_gqa_unused_projection_hint_condition_false():
    from autograder.checks import gqa_saving as checks
    from solutions import gqa_saving as ref

    rng = torch.Generator().manual_seed(11)
    config = (48, 6, 2)
    weights = checks.gqa_weights(rng, config, torch.float64)
    for S in (1, 5):
        x = torch.randn(2, S, 48, generator=rng, dtype=torch.float64)
        mask = causal_mask(S, torch.float64)

        def unused(student):
            actual = student.module("GroupedQueryAttention", config, state_dict=weights, dtype=torch.float64,
                                    method="forward", args=(x, mask)).outputs
            return checks.unused_projections(student, config, weights, x, mask, torch.float64, rng, actual, F64)

        assert unused(ReferenceStudent(ref)) == []  # every projection used
        # W_q never read: named only where the right output depends on it (not with one token)
        assert unused(ReferenceStudent(ref, fixed={"W_q.weight"})) == ([] if S == 1 else ["W_q"])
