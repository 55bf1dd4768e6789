"""The student's own check before submitting: no hidden checks, no answers, no reference code.

Is the notebook readable, are all parts there and answered (code and written answers), does every code cell
compile, and do the visible self-checks pass when the notebook runs top to bottom in a Jupyter kernel (as
Kernel -> Restart & Run All)? The notebook runs as the user who runs the command, on their own work.

This module is also what students get: `autograde student-checker` writes it, with the list of the assignments'
parts read from release/ (MANIFEST), as check_notebook.py into every assignment's folder (assignments/<id>/, so
that `nbgrader generate_assignment` copies it to release/<id>/, and release/<id>/ itself), next to the student
requirements (student-requirements.txt); `nbgrader release_assignment` hands out the whole folder. Students run,
offline:

    python check_notebook.py rmsnorm.ipynb

So it imports nothing of this repository. Reading the notebook and the structure checks need the standard library
only (the notebook is JSON); running the self-checks needs the student requirements (nbformat, nbclient,
ipykernel, torch), and without them the checker says in Chinese what to install.
`autograde check` runs the same code with the manifest read from release/ directly.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import pprint
import re
import subprocess
import sys
from pathlib import Path

OK, PROBLEM, NOTE = "✅", "❌", "⚠️"
MAX_NOTEBOOK_BYTES = 64 * 1024**2
STUDENT_ID_CELL = "student_id"  # the locked cell that reads STUDENT_ID (and stops when it is empty)
PLACEHOLDER = "YOUR ANSWER HERE"  # what nbgrader puts into a written answer cell of the student version
CHECKER_NAME, REQUIREMENTS_NAME = "check_notebook.py", "student-requirements.txt"
SUBMIT_NAME = "autograde_submit.py"  # autograder/tools/submit.py: practice grading from the terminal (`autograde serve`)
# what running the self-checks needs, and how to install it (torch first: the CPU build the grader uses)
RUN_NEEDS = {"nbformat": "nbformat", "nbclient": "nbclient", "ipykernel": "ipykernel", "torch": "PyTorch（torch）"}
INSTALL = (f"python -m pip install torch==2.13.0，然后 python -m pip install -r {REQUIREMENTS_NAME}"
           f"（{REQUIREMENTS_NAME} 和 {CHECKER_NAME} 在同一个作业文件夹里）")

# Written by `autograde student-checker` (from release/): assignment id -> its notebook name, its parts
# (grade id, points, the answer cells before it, written or not, and a written part's text as handed out)
# and its grade (self-check) cells.
MANIFEST: dict = {'gqa_saving': {'grade_cells': ['gqa_hand', 'kv_cache_bytes', 'repeat_kv', 'gqa_module'],
                'notebook': 'gqa_saving.ipynb',
                'parts': [{'answer_cells': ['hand_answer'],
                           'grade_id': 'gqa_hand',
                           'points': 3.0,
                           'written': False},
                          {'answer_cells': ['kv_cache_bytes_code'],
                           'grade_id': 'kv_cache_bytes',
                           'points': 2.0,
                           'written': False},
                          {'answer_cells': ['repeat_kv_code'],
                           'grade_id': 'repeat_kv',
                           'points': 2.0,
                           'written': False},
                          {'answer_cells': ['gqa_module_code'],
                           'grade_id': 'gqa_module',
                           'points': 5.0,
                           'written': False}]},
 'gradient_flow': {'grade_cells': ['gradient_flow_choice',
                                   'norm_stacks',
                                   'layer_grad_norms',
                                   'gradient_flow_observation'],
                   'notebook': 'gradient_flow.ipynb',
                   'parts': [{'answer_cells': ['choice_answer'],
                              'grade_id': 'gradient_flow_choice',
                              'points': 2.0,
                              'written': False},
                             {'answer_cells': ['norm_stacks_code'],
                              'grade_id': 'norm_stacks',
                              'points': 4.0,
                              'written': False},
                             {'answer_cells': ['layer_grad_norms_code'],
                              'grade_id': 'layer_grad_norms',
                              'points': 4.0,
                              'written': False},
                             {'answer_cells': ['gradient_flow_observation'],
                              'grade_id': 'gradient_flow_observation',
                              'handed_out': 'YOUR ANSWER HERE',
                              'points': 2.0,
                              'written': True}]},
 'llama_block': {'grade_cells': ['llama_hand', 'llama_attention', 'llama_block_module', 'permute_rotate_half'],
                 'notebook': 'llama_block.ipynb',
                 'parts': [{'answer_cells': ['hand_answer'],
                            'grade_id': 'llama_hand',
                            'points': 3.0,
                            'written': False},
                           {'answer_cells': ['llama_attention_code'],
                            'grade_id': 'llama_attention',
                            'points': 4.0,
                            'written': False},
                           {'answer_cells': ['llama_block_code'],
                            'grade_id': 'llama_block_module',
                            'points': 3.5,
                            'written': False},
                           {'answer_cells': ['permute_code'],
                            'grade_id': 'permute_rotate_half',
                            'points': 2.0,
                            'written': False}]},
 'mla': {'grade_cells': ['mla_module', 'mla_cache', 'mla_comparison', 'mla_bonus'],
         'notebook': 'mla.ipynb',
         'parts': [{'answer_cells': ['mla_module_code'], 'grade_id': 'mla_module', 'points': 5.0, 'written': False},
                   {'answer_cells': ['mla_cache_code'], 'grade_id': 'mla_cache', 'points': 3.0, 'written': False},
                   {'answer_cells': ['hand_answer'], 'grade_id': 'mla_comparison', 'points': 2.0, 'written': False},
                   {'answer_cells': ['mla_bonus_code'], 'grade_id': 'mla_bonus', 'points': 2.0, 'written': False}]},
 'rmsnorm': {'grade_cells': ['rmsnorm_hand', 'rmsnorm_function', 'rmsnorm_module'],
             'notebook': 'rmsnorm.ipynb',
             'parts': [{'answer_cells': ['hand_answer'],
                        'grade_id': 'rmsnorm_hand',
                        'points': 2.0,
                        'written': False},
                       {'answer_cells': ['rms_norm_code'],
                        'grade_id': 'rmsnorm_function',
                        'points': 4.0,
                        'written': False},
                       {'answer_cells': ['rmsnorm_module_code'],
                        'grade_id': 'rmsnorm_module',
                        'points': 4.0,
                        'written': False}]},
 'rope': {'grade_cells': ['rope_freqs', 'rope_apply', 'rope_relative'],
          'notebook': 'rope.ipynb',
          'parts': [{'answer_cells': ['rope_freqs_code'],
                     'grade_id': 'rope_freqs',
                     'points': 3.0,
                     'written': False},
                    {'answer_cells': ['rope_apply_code'],
                     'grade_id': 'rope_apply',
                     'points': 5.0,
                     'written': False},
                    {'answer_cells': ['rope_relative_code'],
                     'grade_id': 'rope_relative',
                     'points': 2.0,
                     'written': False}]},
 'swiglu': {'grade_cells': ['swish', 'swiglu_module', 'swiglu_params'],
            'notebook': 'swiglu.ipynb',
            'parts': [{'answer_cells': ['swish_code'], 'grade_id': 'swish', 'points': 2.0, 'written': False},
                      {'answer_cells': ['swiglu_module_code'],
                       'grade_id': 'swiglu_module',
                       'points': 5.0,
                       'written': False},
                      {'answer_cells': ['swiglu_params_code'],
                       'grade_id': 'swiglu_params',
                       'points': 3.0,
                       'written': False}]}}


# --- reading: the notebook is JSON (nbformat 4), read with the standard library --------------------------


class Unreadable(Exception):
    pass


def cell_source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def grade_id(cell: dict) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if isinstance(meta, dict) else None


def parse_notebook(text: str) -> dict:
    """The notebook's JSON, checked for the shape the checks read: nbformat 4, cells with a type and a source."""
    try:
        nb = json.loads(text)
    except ValueError as exc:
        where = f"，第 {exc.lineno} 行" if hasattr(exc, "lineno") else ""
        raise Unreadable(f"笔记本文件不是有效的 JSON，可能已损坏（{getattr(exc, 'msg', exc)}{where}）；"
                         "请用 Jupyter 重新保存") from None
    except RecursionError:
        raise Unreadable("笔记本文件的 JSON 嵌套太深，这不是 Jupyter 保存的笔记本") from None
    if not isinstance(nb, dict) or "nbformat" not in nb:
        raise Unreadable("这不是一个 Jupyter 笔记本文件")
    if nb.get("nbformat") != 4:
        raise Unreadable(f"笔记本的格式版本是 {nb.get('nbformat')!r}，不是 4：请用 Jupyter 打开并重新保存，"
                         "或者从原始作业重新开始")
    if not isinstance(nb.get("cells"), list):
        raise Unreadable("笔记本里没有单元格列表，可能已损坏；请用 Jupyter 重新保存")
    for number, cell in enumerate(nb["cells"], start=1):
        ok = (isinstance(cell, dict) and cell.get("cell_type") in ("code", "markdown", "raw")
              and isinstance(cell.get("metadata", {}), dict)
              and isinstance(cell.get("source", ""), (str, list))
              and all(isinstance(line, str) for line in cell.get("source", []) if isinstance(cell.get("source"), list))
              and isinstance(cell.get("metadata", {}).get("nbgrader", {}), dict))
        if not ok:
            raise Unreadable(f"第 {number} 个单元格的格式不对，笔记本可能已损坏；请用 Jupyter 重新保存")
    return nb


def read_notebook_text(path: Path) -> str:
    try:
        if path.is_symlink() or not path.is_file():
            raise Unreadable(f"{path} 不是一个普通文件（找不到，或是链接/文件夹）")
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise Unreadable("笔记本文件超过 64 MB：请清除输出（Kernel → Restart & Clear Output）后再保存")
        data = path.read_bytes()
    except OSError as exc:
        raise Unreadable(f"无法读取 {path}：{exc.strerror}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Unreadable("笔记本文件不是 UTF-8 编码，可能已损坏；请用 Jupyter 重新保存") from None


def read_notebook(path: Path) -> dict:
    return parse_notebook(read_notebook_text(Path(path)))


# --- the manifest: what release/ says about each assignment ----------------------------------------------


def manifest_from_release(release: Path) -> dict:
    """Each assignment's parts, read from the student notebooks (release/<id>/<id>.ipynb): nbgrader's metadata."""
    manifest = {}
    for notebook in sorted(Path(release).glob("*/*.ipynb")):
        if notebook.stem != notebook.parent.name:
            continue
        parts, pending, grade_cells = [], [], []
        for cell in read_notebook(notebook)["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("grade"):
                written = cell["cell_type"] == "markdown"
                grade_cells.append(meta["grade_id"])
                part = {"grade_id": meta["grade_id"], "points": float(meta.get("points", 0)),
                        "answer_cells": [meta["grade_id"]] if written else pending, "written": written}
                if written:  # the text students get (nbgrader's placeholder), never the source notebook's answer
                    part["handed_out"] = cell_source(cell)
                parts.append(part)
                pending = []
            elif meta.get("solution"):
                pending.append(meta["grade_id"])
        manifest[notebook.stem] = {"notebook": notebook.name, "parts": parts, "grade_cells": grade_cells}
    return manifest


def checker_text(release: Path) -> str:
    """This module with the manifest of `release` filled in: the checker students get."""
    source = Path(__file__).read_text(encoding="utf-8")
    marker = "MANIFEST: dict = {}\n"
    assert source.count(marker) == 1
    manifest = pprint.pformat(manifest_from_release(release), width=116, sort_dicts=True)
    return source.replace(marker, f"MANIFEST: dict = {manifest}\n", 1)


def write_checker(release: Path, out: Path) -> Path:
    Path(out).write_text(checker_text(release), encoding="utf-8")
    return Path(out)


def student_files(root: Path) -> dict[str, str]:
    """What goes into every assignment's folder next to its notebook: file name -> text."""
    # the file as it lies next to the notebook (its install line names it without the repository's folder)
    requirements = (Path(root) / "environment" / REQUIREMENTS_NAME).read_text(encoding="utf-8")
    requirements = requirements.replace(f"environment/{REQUIREMENTS_NAME}", REQUIREMENTS_NAME)
    submit = (Path(__file__).parent / "submit.py").read_text(encoding="utf-8")
    return {CHECKER_NAME: checker_text(Path(root) / "release"), REQUIREMENTS_NAME: requirements, SUBMIT_NAME: submit}


def write_student_files(root: Path) -> list[Path]:
    """The checker, the requirements and the practice-submit script into assignments/<id>/ (nbgrader's generate_assignment copies the other
    files of the source folder to release/<id>/) and into release/<id>/ (what release_assignment hands out)."""
    root = Path(root)
    files, written = student_files(root), []
    for notebook in sorted((root / "release").glob("*/*.ipynb")):
        if notebook.stem != notebook.parent.name:
            continue
        for folder in (root / "assignments" / notebook.stem, notebook.parent):
            if not folder.is_dir():
                continue
            for name, text in files.items():
                (folder / name).write_text(text, encoding="utf-8")
                written.append(folder / name)
    return written


def guess_assignment(path: Path, nb: dict, manifest: dict) -> str | None:
    if path.stem in manifest:
        return path.stem
    ids = {grade_id(c) for c in nb["cells"]} - {None, STUDENT_ID_CELL}
    for assignment_id, spec in manifest.items():
        if set(spec["grade_cells"]) & ids:
            return assignment_id
    return None


# --- the checks ------------------------------------------------------------------------------------------

MAGIC_LINE = re.compile(r"^(\s*)(%|!)")


def python_source(source: str) -> tuple[str, bool]:
    """A cell as the kernel runs it: IPython's own transformation of %magics and !shell lines into Python; without
    IPython, such lines become `pass` (and the second value says the result is only approximate)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        if source.lstrip().startswith("%%"):
            return "", True  # a cell magic: its body need not be Python
        lines = [MAGIC_LINE.sub(lambda m: m.group(1) + "pass  # ", line) for line in source.splitlines()]
        return "\n".join(lines) + "\n", True
    return TransformerManager().transform_cell(source), False


def written_answer_missing(text: str, handed_out: str) -> bool:
    """A written answer not given: empty, nbgrader's placeholder alone, or the text as handed out."""
    words = " ".join(text.split())
    return not words or words == PLACEHOLDER or words == " ".join(handed_out.split())


def structure_problems(nb: dict, spec: dict, echo) -> int:
    problems = 0
    cells = nb["cells"]
    present = {grade_id(c): c for c in cells if grade_id(c)}
    for part in spec["parts"]:
        if not any(cell_id in present for cell_id in part["answer_cells"]):
            echo(f"{PROBLEM} {part['grade_id']}：找不到这一题的答案单元格（可能被删除了）")
            problems += 1
    answer_cells = {cell_id for part in spec["parts"] if not part["written"] for cell_id in part["answer_cells"]}
    written = {part["grade_id"]: part for part in spec["parts"] if part["written"]}
    for number, cell in enumerate(cells, start=1):  # numbered from 1, as Jupyter and the report count
        source = cell_source(cell)
        if cell["cell_type"] == "markdown" and grade_id(cell) in written:
            part = written[grade_id(cell)]
            if written_answer_missing(source, part.get("handed_out", PLACEHOLDER)):
                echo(f"{PROBLEM} 第 {number} 个单元格（{grade_id(cell)}，书面回答，{part['points']:g} 分）还没有作答："
                     f"请把 {PLACEHOLDER} 换成你的回答")
                problems += 1
            elif PLACEHOLDER in source:
                echo(f"{NOTE} 第 {number} 个单元格（{grade_id(cell)}）里还留着 {PLACEHOLDER}：写好回答后请删掉它")
            continue
        if cell["cell_type"] != "code":
            continue
        python, approximate = python_source(source)
        try:
            compile(python, f"第 {number} 个单元格", "exec")
        except SyntaxError as exc:
            line = python.splitlines()[exc.lineno - 1] if exc.lineno and exc.lineno <= len(python.splitlines()) else ""
            if not (approximate and ("!" in line or "%" in line)):  # IPython syntax this reading does not know
                echo(f"{PROBLEM} 第 {number} 个单元格有语法错误（第 {exc.lineno} 行）：{exc.msg}")
                problems += 1
        if grade_id(cell) in answer_cells and "raise NotImplementedError()" in source:
            echo(f"{PROBLEM} 第 {number} 个单元格（{grade_id(cell)}）还没有作答（仍有 raise NotImplementedError()）")
            problems += 1
    for missing in [g for g in spec["grade_cells"] if g not in present]:
        echo(f"{PROBLEM} 自检单元格 {missing} 不见了：请不要删除带锁的单元格（可以从原始作业里复制回来）")
        problems += 1
    return problems


def missing_for_running() -> list[str]:
    """What running the self-checks needs and this Python lacks (names as students know them)."""
    return [label for module, label in RUN_NEEDS.items() if importlib.util.find_spec(module) is None]


def run_self_checks(path: Path, text: str, spec: dict, timeout: float, echo) -> int:
    """Run the notebook in a kernel, as Restart & Run All would; report the student id and each self-check."""
    missing = missing_for_running()
    if missing:
        need_torch = "（自检要用 PyTorch 运行你的代码）" if RUN_NEEDS["torch"] in missing else ""
        echo(f"{PROBLEM} 无法运行自检：这个 Python（{sys.executable}）里没有安装 {'、'.join(missing)}{need_torch}。"
             f"请先安装：{INSTALL}，再运行一次检查。")
        return 1
    import nbformat
    from nbclient import NotebookClient

    try:
        nb = nbformat.reads(text, as_version=4)
    except Exception as exc:  # nbformat raises several kinds for a foreign or too-old file
        echo(f"{PROBLEM} {path}：这不是一个可以运行的 Jupyter 笔记本（{type(exc).__name__}）；请用 Jupyter 重新保存")
        return 1
    client = NotebookClient(nb, timeout=int(timeout), kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(path.parent.resolve())}})
    # the kernel's own stderr (e.g. ipykernel's English warning about TCP without encryption) is not for students;
    # what the notebook's code prints reaches the cells' outputs, not this stream
    client.execute(env=dict(os.environ, MPLBACKEND="Agg"), stderr=subprocess.DEVNULL)
    problems = 0
    numbered = list(enumerate(nb.cells, start=1))
    errors = {number: next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"), None)
              for number, cell in numbered if cell.cell_type == "code"}
    id_cell = next((number for number, cell in numbered if grade_id(cell) == STUDENT_ID_CELL), None)
    no_id = id_cell is not None and errors.get(id_cell) is not None
    if no_id:
        echo(f"{PROBLEM} 学号 STUDENT_ID 是空的（第 {id_cell} 个单元格）：请在它上面的单元格里填写你的学号，"
             "例如 STUDENT_ID = \"2024012345\"（在 JupyterHub 上会自动使用你的用户名）。手算题的数字由学号推出，"
             "学号为空时依赖它的单元格和自检都无法运行。")
        problems += 1
    grade_cells = set(spec["grade_cells"])
    for number, cell in numbered:
        if cell.cell_type != "code" or grade_id(cell) in grade_cells or grade_id(cell) == STUDENT_ID_CELL:
            continue
        error = errors.get(number)
        if error is not None and error["ename"] != "NotImplementedError" and not (no_id and number > id_cell):
            echo(f"{NOTE} 第 {number} 个单元格运行出错：{error['ename']}: {error['evalue'][:200]}")
    for number, cell in numbered:
        if cell.cell_type != "code" or grade_id(cell) not in grade_cells:
            continue
        error = errors.get(number)
        if error is None:
            echo(f"{OK} 自检 {grade_id(cell)} 通过")
            continue
        because = "（学号为空：先填写学号）" if no_id and number > id_cell and error["ename"] == "NameError" else ""
        echo(f"{PROBLEM} 自检 {grade_id(cell)}（第 {number} 个单元格）：{error['ename']}: {error['evalue'][:200]}{because}")
        problems += 1
    return problems


def unknown_assignment(name: str, manifest: dict) -> str:
    close = difflib.get_close_matches(name, list(manifest), n=1, cutoff=0.6)
    hint = f"你是不是想写 {close[0]}？" if close else ""
    return f"{PROBLEM} 没有名为 {name!r} 的作业。{hint}（作业有：{'、'.join(manifest)}）"


def run_check(path: Path, assignment_id: str | None = None, timeout: float = 60.0, echo=print,
              manifest: dict | None = None) -> int:
    """0: ready to submit; 1: something to fix; 2: a wrong assignment name."""
    manifest = manifest if manifest is not None else MANIFEST
    path = Path(path)
    if assignment_id is not None and assignment_id not in manifest:
        echo(unknown_assignment(assignment_id, manifest))
        return 2
    try:
        text = read_notebook_text(path)
        nb = parse_notebook(text)
    except Unreadable as exc:
        echo(f"{PROBLEM} {path}：{exc}")
        return 1
    assignment_id = assignment_id or guess_assignment(path, nb, manifest)
    if assignment_id is None:
        echo(f"{PROBLEM} 无法从文件名或内容判断 {path.name} 是哪一次作业；请用 -a 指定（{'、'.join(manifest)}）")
        return 2
    spec = manifest[assignment_id]
    echo(f"作业 {assignment_id}：{len(spec['parts'])} 个部分，检查 {path.name}")
    problems = structure_problems(nb, spec, echo)
    problems += run_self_checks(path, text, spec, timeout, echo)
    echo("")
    if problems:
        echo(f"{PROBLEM} 发现 {problems} 个问题：请先修正再提交。（通过自检不等于满分：评分时还有隐藏的检查）")
        return 1
    written = [p["grade_id"] for p in spec["parts"] if p["written"]]
    if written:
        echo(f"{NOTE} 书面回答（{'、'.join(written)}）已填写；内容由老师批改，这里不检查。")
    echo(f"{OK} 笔记本完整、可以运行，所有自检都通过了，可以提交。（评分时还有隐藏的检查）")
    return 0


def main(argv: list[str] | None = None, manifest: dict | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="check_notebook.py",
        description="提交前检查你的作业笔记本：是否完整、每个单元格能否编译、可见的自检是否通过"
                    "（在本机的 Jupyter 内核里从头运行一遍；没有隐藏的检查，也不含答案）。")
    parser.add_argument("notebook", type=Path, help="你的笔记本，例如 rmsnorm.ipynb")
    parser.add_argument("-a", "--assignment", help="作业名（默认从文件名判断）")
    parser.add_argument("--timeout", type=float, default=60.0, help="每个单元格最多运行的秒数（默认 60）")
    args = parser.parse_args(argv)
    try:
        return run_check(args.notebook, args.assignment, args.timeout, manifest=manifest)
    except ImportError as exc:  # a part of the student requirements this Python lacks, or a broken install
        print(f"{PROBLEM} 检查无法完成：缺少 Python 模块 {exc.name or exc}。请先安装：{INSTALL}")
        return 1
    except KeyboardInterrupt:
        print(f"{PROBLEM} 检查被中断，没有完成。")
        return 1


if __name__ == "__main__":
    sys.exit(main())
