"""gradient_flow: the hand computation's numbers and answers, without torch (the reference itself is solutions/gradient_flow.py,
which re-exports these). The notebook shows the student the numbers their id gives (hand_inputs, mirrored into
it); the run that records the grades computes the right answers here without importing torch."""

from solutions.student_params import student_rng


# The options of the multiple-choice question, in a fixed order; each student sees them shuffled.
CHOICE_OPTIONS = [
    "Pre-Norm 把 Norm 放在子层之后，让每层的输出更平滑，所以梯度更稳定",
    "Pre-Norm 的残差路径上没有 Norm：x_L = x_l + Σ F(Norm(x_k))，∂x_L/∂x_l 里有一个恒等项，梯度有一条不被任何 Norm 缩放的通路直接传回浅层",
    "Post-Norm 没有残差连接，所以梯度只能穿过每一层的子层",
    "Pre-Norm 的参数比 Post-Norm 少，所以梯度更稳定",
]


_CORRECT_OPTION = 1  # index into CHOICE_OPTIONS; never shown to students


def choice_options(student_id):
    """你这份作业里选择题的选项顺序（由学号决定）：返回 {字母: 选项} 的字典。"""
    rng = student_rng("gradient_flow", student_id)
    order = list(range(len(CHOICE_OPTIONS)))
    rng.shuffle(order)
    return {letter: CHOICE_OPTIONS[i] for letter, i in zip("ABCD", order)}


def hand_inputs(student_id):
    """The student's option order (what the notebook prints)."""
    return {"options": choice_options(student_id)}


def hand_answers(inputs: dict) -> dict:
    """The letter under which this student sees the right option."""
    right = CHOICE_OPTIONS[_CORRECT_OPTION]
    return {"answer": next(letter for letter, text in inputs["options"].items() if text == right)}
