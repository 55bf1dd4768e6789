"""`autograde check`: what a student runs before submitting. No hidden checks, no reference code.

Is the notebook readable, are all parts there and answered, does every code cell compile, and do
the visible self-checks pass when the notebook runs top to bottom in a Jupyter kernel? The
notebook runs as the user who runs the command: this is for students, on their own work.
"""

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.assignments import Assignment, load_assignment
from autograder.reading import UnreadableNotebook, load_notebook_bytes, parse_notebook, prepare
from solutions import ASSIGNMENTS

OK, PROBLEM = "✅", "❌"


def guess_assignment(path: Path, nb) -> str | None:
    if path.stem in ASSIGNMENTS:
        return path.stem
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
    for assignment_id in ASSIGNMENTS:
        if load_assignment(assignment_id).grade_cells & ids:
            return assignment_id
    return None


def run_check(path: Path, assignment_id: str | None, timeout: float = 60.0, echo=print) -> int:
    path = Path(path)
    try:
        nb = parse_notebook(load_notebook_bytes(path))
    except UnreadableNotebook as exc:
        echo(f"{PROBLEM} {path}: {exc.message}")
        return 1
    assignment_id = assignment_id or guess_assignment(path, nb)
    if assignment_id not in ASSIGNMENTS:
        echo(f"{PROBLEM} 无法判断这是哪一次作业；请用 --assignment 指定（{', '.join(ASSIGNMENTS)}）")
        return 1
    assignment = load_assignment(assignment_id)
    problems = structure_problems(path, nb, assignment, echo)
    problems += run_self_checks(path, assignment, timeout, echo)
    echo("")
    if problems:
        echo(f"{PROBLEM} 发现 {problems} 个问题：请先修正再提交。（通过自检不等于满分：评分时还有隐藏的检查）")
        return 1
    echo(f"{OK} 笔记本完整、可以运行，所有自检都通过了，可以提交。（评分时还有隐藏的检查）")
    return 0


def structure_problems(path: Path, nb, assignment: Assignment, echo) -> int:
    problems = 0
    prepared = prepare(path, assignment)
    echo(f"作业 {assignment.id}：{len(assignment.parts)} 个部分")
    for part in assignment.parts:
        if not any(cell_id in prepared.answer_cells_found for cell_id in part.answer_cells):
            echo(f"{PROBLEM} {part.grade_id}：找不到这一题的答案单元格（可能被删除了）")
            problems += 1
    for cell in prepared.cells:
        try:
            compile(cell.source, f"cell {cell.index}", "exec")
        except SyntaxError as exc:
            echo(f"{PROBLEM} 第 {cell.index} 个单元格有语法错误（第 {exc.lineno} 行）：{exc.msg}")
            problems += 1
        if cell.grade_id in {c for p in assignment.parts for c in p.answer_cells} and "raise NotImplementedError()" in cell.source:
            echo(f"{PROBLEM} 单元格 {cell.grade_id} 还没有作答（仍有 raise NotImplementedError()）")
            problems += 1
    present = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
    for grade_id in sorted(assignment.grade_cells - present):
        echo(f"{PROBLEM} 自检单元格 {grade_id} 不见了：请不要删除带锁的单元格（可以从原始作业里复制回来）")
        problems += 1
    return problems


def run_self_checks(path: Path, assignment: Assignment, timeout: float, echo) -> int:
    """Run the notebook in a kernel, as Restart & Run All would; report each self-check cell."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    client.execute(env=dict(os.environ, MPLBACKEND="Agg"))
    problems = 0
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if cell.cell_type != "code" or grade_id not in assignment.grade_cells:
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if errors:
            first = errors[0]
            echo(f"{PROBLEM} 自检 {grade_id}：{first['ename']}: {first['evalue'][:200]}")
            problems += 1
        else:
            echo(f"{OK} 自检 {grade_id} 通过")
    return problems
