"""`autograde check`: the student's own pre-submission check, no hidden checks."""

import pytest

from autograder.student_check import run_check
from conftest import release_notebook, source_notebook
from grading_helpers import edited_notebook

pytestmark = pytest.mark.slow


def check(path, assignment=None):
    lines = []
    code = run_check(path, assignment, timeout=60, echo=lines.append)
    return code, "\n".join(lines)


def test_a_finished_notebook_passes(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    code, text = check(source_notebook("rmsnorm"))
    assert code == 0, text
    assert "自检 rmsnorm_module 通过" in text


def test_an_unanswered_notebook_fails_and_says_which_parts(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    code, text = check(release_notebook("rmsnorm"))
    assert code == 1
    assert "rms_norm_code 还没有作答" in text and "自检 rmsnorm_function：NotImplementedError" in text


def test_deleted_cells_and_syntax_errors_are_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    path = edited_notebook("rmsnorm", [("return rms_norm(x, self.gamma, self.eps)", "return rms_norm(x, self.gamma,")],
                           tmp_path / "rmsnorm.ipynb")
    code, text = check(path)
    assert code == 1 and "语法错误" in text


def test_a_broken_file_is_reported(tmp_path):
    path = tmp_path / "rmsnorm.ipynb"
    path.write_text("{")
    code, text = check(path)
    assert code == 1 and "JSON" in text
