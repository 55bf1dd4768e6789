"""Read a submitted notebook into the code the sandbox will run, without trusting anything in it.

Cells are matched by nbgrader grade_id, never by position; saved outputs are ignored; IPython
magics and shell escapes are neutralised; the grade cells (the visible self-checks) are not run, nor the
instructor's demo cells left unchanged (autograder.intake.skipping) unless `run_all_cells`.
A notebook that cannot be read raises UnreadableNotebook with a message for the student.
"""

import json
import math
import os
import re
import stat
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from autograder.assignments import Assignment
from autograder.intake.skipping import cells_to_skip
from autograder.intake.validate import MAX_JSON_NESTING, nesting_within

MAX_NOTEBOOK_BYTES = 64 * 1024**2
MAX_CELL_CHARS = 1024**2


class UnreadableNotebook(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class CodeCell:
    index: int  # position in the submitted notebook
    grade_id: str | None
    source: str


@dataclass
class PreparedNotebook:
    cells: list[CodeCell]
    skipped: list[int] = field(default_factory=list)  # positions in the notebook of unchanged demo cells not run
    all_cells: list[CodeCell] = field(default_factory=list)  # every cell that runs when none is skipped
    answer_cells_found: set[str] = field(default_factory=set)
    written_answers: dict[str, str] = field(default_factory=dict)  # markdown answers, for the report


_MAGIC = re.compile(r"^(\s*)(%|!)")


def neutralise_magics(source: str) -> str:
    """Lines that start with %, %% or ! become `pass` (IPython syntax is not Python)."""
    lines = source.split("\n")
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n".join("# " + line for line in lines)  # a cell magic owns the whole cell
    out = []
    for line in lines:
        match = _MAGIC.match(line)
        out.append(f"{match.group(1)}pass  # IPython: {line.strip()[:60]}" if match else line)
    return "\n".join(out)


def load_notebook_bytes(path: Path) -> bytes:
    """The file's bytes, refusing links and special files (a submission may be a link to a secret)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise UnreadableNotebook(f"无法打开提交的文件（{exc.strerror}）；请重新提交一个 .ipynb 文件") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableNotebook("提交的不是一个普通文件；请重新提交 .ipynb 文件")
        if info.st_size > MAX_NOTEBOOK_BYTES:
            raise UnreadableNotebook(
                f"笔记本太大（{math.ceil(info.st_size / 1024**2 * 10) / 10:g} MiB，上限 {MAX_NOTEBOOK_BYTES // 1024**2} MiB）："
                "请清除输出（Kernel → Restart & Clear Output）后重新提交"
            )
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_NOTEBOOK_BYTES + 1)
    finally:
        os.close(fd)


def parse_notebook(data: bytes):
    if not nesting_within(data):  # measured before the parser recurses into it (nesting_within says why)
        raise UnreadableNotebook(f"笔记本文件的 JSON 嵌套太深（超过 {MAX_JSON_NESTING} 层）："
                                 "请清除输出（Kernel → Restart & Clear Output）后保存再提交；若仍如此，文件可能已损坏")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableNotebook("笔记本文件不是 UTF-8 编码，可能已损坏；请用 Jupyter 重新保存后提交") from None
    try:
        raw = json.loads(text)
    except RecursionError:
        raise UnreadableNotebook("笔记本文件的 JSON 嵌套太深，可能已损坏；请用 Jupyter 重新保存后提交") from None
    except ValueError as exc:
        raise UnreadableNotebook(f"笔记本文件不是有效的 JSON，可能已损坏（{str(exc)[:80]}）；请用 Jupyter 重新保存后提交") from None
    if not isinstance(raw, dict) or "nbformat" not in raw:
        raise UnreadableNotebook("这不是一个 Jupyter 笔记本（缺少 nbformat 字段）；请提交作业的 .ipynb 文件")
    for cell in raw.get("cells", []) if isinstance(raw.get("cells"), list) else []:
        if isinstance(cell, dict) and "outputs" in cell:
            cell["outputs"] = []  # saved outputs are never looked at
    import nbformat  # here: the `autograde` process reads notebooks' bytes (decide), and parses one only when it
    # grades in this process (tests, the Python API): a run starts its workers without importing nbformat

    try:
        with warnings.catch_warnings():  # nbformat warns once per duplicated cell id: a student's, not the log's
            warnings.simplefilter("ignore")
            nb = nbformat.reads(json.dumps(raw, ensure_ascii=True), as_version=4)
    except Exception as exc:  # nbformat raises many kinds on a foreign or broken notebook
        raise UnreadableNotebook(f"无法读取这个笔记本（{type(exc).__name__}）；请用 Jupyter 重新保存后提交") from None
    if not isinstance(nb.get("cells"), list):
        raise UnreadableNotebook("笔记本里没有单元格列表；请提交作业的 .ipynb 文件")
    return nb


def prepare(path: Path, assignment: Assignment, run_all_cells: bool = False,
            data: bytes | None = None) -> PreparedNotebook:
    """What grading runs of the notebook at `path` (its bytes `data`, when the caller read them already)."""
    nb = parse_notebook(load_notebook_bytes(Path(path)) if data is None else data)
    prepared = PreparedNotebook(cells=[])
    raw = []  # each code cell's source as submitted
    answer_ids = {cell_id for part in assignment.parts for cell_id in part.answer_cells}
    for index, cell in enumerate(nb.cells):
        if not isinstance(cell, dict):
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
        grade_id = meta.get("grade_id") if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) else None
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        if grade_id in answer_ids:
            prepared.answer_cells_found.add(grade_id)
        if cell.get("cell_type") == "markdown" and grade_id in answer_ids:
            prepared.written_answers[grade_id] = source[:20000]
        if cell.get("cell_type") != "code" or grade_id in assignment.grade_cells:
            continue
        prepared.cells.append(CodeCell(index, grade_id, neutralise_magics(source[:MAX_CELL_CHARS])))
        raw.append(source)
    prepared.all_cells = list(prepared.cells)
    if not run_all_cells and assignment.not_for_grading:
        skip = cells_to_skip([c.source for c in prepared.cells], [s in assignment.not_for_grading for s in raw],
                             [s in assignment.instructor_code for s in raw])
        prepared.skipped = [prepared.cells[i].index for i in sorted(skip)]
        prepared.cells = [c for i, c in enumerate(prepared.cells) if i not in skip]
    return prepared
