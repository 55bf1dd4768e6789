"""Run a notebook top to bottom in a real Jupyter kernel and report what each cell raised."""

import os
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient


@dataclass(frozen=True)
class CellError:
    index: int
    grade_id: str | None
    ename: str
    evalue: str


def execute_notebook(path: Path, student_id: str, timeout: int = 120) -> tuple[nbformat.NotebookNode, list[CellError]]:
    """Execute every cell in order, continuing past errors, as a student's "Restart & Run All" would.

    The kernel sees the student id through JUPYTERHUB_USER, as on a JupyterHub.
    """
    nb = nbformat.read(path, as_version=4)
    env = dict(os.environ, JUPYTERHUB_USER=student_id, MPLBACKEND="Agg", PYTHONHASHSEED="0")
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    )
    # nbclient passes extra keyword arguments on to the kernel manager's start_kernel
    client.execute(env=env)
    errors = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                errors.append(CellError(index, grade_id, output["ename"], output["evalue"]))
    return nb, errors
