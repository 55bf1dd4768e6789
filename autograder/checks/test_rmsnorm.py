"""Checks of the rmsnorm assignment: the hand computation, rms_norm, RMSNorm.

Inputs: batch >= 2 with different rows; random, non-unit gamma; small-scale inputs
(mean(x^2) ~ 1e-4) so that where eps sits changes the result by far more than the tolerance.
"""

import pytest
import torch

from autograder.checks import F32, F64, check, expect_close, expect_module_matches, expect_number, expect_numbers, expect_true, run_reference
from solutions import rmsnorm as ref
from solutions.student_params import student_answers


@pytest.fixture
def answers(student_id):
    return student_answers("rmsnorm", student_id)


@pytest.fixture
def gamma64(rng):
    return 0.5 + torch.rand(24, generator=rng, dtype=torch.float64)


@pytest.fixture
def small_x64(rng):
    return 0.01 * torch.randn(3, 5, 24, generator=rng, dtype=torch.float64)


# --- rmsnorm_hand ---------------------------------------------------------------------------------


@check("rmsnorm_hand", points=1)
def test_hand_rms(student, answers):
    """手算的 rms 与按你的学号算出的答案一致（4 位有效数字）"""
    expect_number(student.variable("rms"), answers["rms"], "rms")


@check("rmsnorm_hand", points=1)
def test_hand_output(student, answers):
    """手算的 output 与按你的学号算出的答案一致（4 位有效数字）"""
    expect_numbers(student.variable("output"), answers["output"], "output")


# --- rmsnorm_function -----------------------------------------------------------------------------


@check("rmsnorm_function", points=1.5)
def test_function_float64_batched(student, small_x64, gamma64):
    """rms_norm 在 float64、多个 batch 维、小尺度输入上与参考实现一致"""
    expect_close(student.call("rms_norm", small_x64, gamma64, 1e-6), ref.rms_norm(small_x64, gamma64, 1e-6), F64)


@check("rmsnorm_function", points=1)
def test_function_uses_eps_argument(student, small_x64, gamma64):
    """rms_norm 使用传入的 eps（eps = 1e-3，在根号里面）"""
    expect_close(student.call("rms_norm", small_x64, gamma64, eps=1e-3), ref.rms_norm(small_x64, gamma64, eps=1e-3), F64)


@check("rmsnorm_function", points=1)
def test_function_float32_default_eps(student, rng):
    """rms_norm 在 float32、默认 eps 下与参考实现一致，输出仍是 float32"""
    x = 3 * torch.randn(2, 7, 32, generator=rng)
    gamma = 0.5 + torch.rand(32, generator=rng)
    expect_close(student.call("rms_norm", x, gamma), ref.rms_norm(x, gamma), F32)


@check("rmsnorm_function", points=0.5)
def test_function_single_vector(student, rng):
    """rms_norm 也适用于没有 batch 维的单个向量 [d]"""
    x = torch.randn(10, generator=rng, dtype=torch.float64)
    gamma = 0.5 + torch.rand(10, generator=rng, dtype=torch.float64)
    expect_close(student.call("rms_norm", x, gamma, 1e-6), ref.rms_norm(x, gamma, 1e-6), F64)


# --- rmsnorm_module -------------------------------------------------------------------------------


@check("rmsnorm_module", points=1)
def test_module_parameters(student):
    """RMSNorm(d_model) 只有一个参数 gamma，形状 [d_model]，初始化为全 1"""
    run = student.module("RMSNorm", (24,), return_state=True)
    expect_true(run.param_shapes == {"gamma": [24]},
                f"RMSNorm(24) 的参数应该只有 gamma（形状 [24]），你的是 {run.param_shapes}",
                {"param_shapes": run.param_shapes})
    gamma = run.state["gamma"]
    expect_true(bool(torch.all(gamma == 1)), "gamma 应该初始化为全 1")


@check("rmsnorm_module", points=2)
def test_module_forward_backward_float64(student, small_x64, gamma64, rng):
    """加载给定的 gamma 后，forward 输出、输入的梯度和 gamma 的梯度都与参考实现一致（float64）"""
    grad = torch.randn(small_x64.shape, generator=rng, dtype=torch.float64)
    reference = ref.RMSNorm(24).double()
    reference.load_state_dict({"gamma": gamma64})
    expected = run_reference(reference, (small_x64,), grad_outputs=[grad], requires_grad=[0])
    run = student.module("RMSNorm", (24,), state_dict={"gamma": gamma64}, dtype=torch.float64, method="forward",
                         args=(small_x64,), grad_outputs=[grad], requires_grad=[0])
    expect_module_matches(run, expected, F64, "RMSNorm")


@check("rmsnorm_module", points=1)
def test_module_forward_float32(student, rng):
    """RMSNorm 在 float32 下 forward 与参考实现一致（默认 eps）"""
    x = 2 * torch.randn(4, 3, 16, generator=rng)
    gamma = 0.5 + torch.rand(16, generator=rng)
    reference = ref.RMSNorm(16)
    reference.load_state_dict({"gamma": gamma})
    run = student.module("RMSNorm", (16,), state_dict={"gamma": gamma}, method="forward", args=(x,))
    with torch.no_grad():
        expect_close(run.outputs, reference(x), F32)
