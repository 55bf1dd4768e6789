"""The students' own pre-submission check: release/check_notebook.py (and `autograde check`, the same code).

It is tested as students get it: the committed file next to a notebook (release/<id>/check_notebook.py), loaded on
its own; with a Python that has nothing but the standard library; and, in a fresh virtual environment with
torch==2.13.0 and the student requirements only (release/<id>/student-requirements.txt), run as a student runs it.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from typer.testing import CliRunner

from autograder import REPO_ROOT
from autograder.cli import app
from conftest import release_notebook, source_notebook
from grading_helpers import edited_notebook

pytestmark = pytest.mark.slow

CHECKER = REPO_ROOT / "release" / "rmsnorm" / "check_notebook.py"  # the same file in every release/<id>/
WHEELHOUSE = REPO_ROOT / ".venv" / "student-wheelhouse"  # built by scripts/dev.sh from the student requirements


def load_checker():
    spec = importlib.util.spec_from_file_location("check_notebook", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = load_checker()


def check(path, assignment=None):
    lines = []
    code = checker.run_check(path, assignment, timeout=60, echo=lines.append)
    return code, "\n".join(lines)


def test_a_finished_notebook_passes(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    code, text = check(source_notebook("rmsnorm"))
    assert code == 0, text
    assert "自检 rmsnorm_module 通过" in text and "可以提交" in text


def test_an_unanswered_notebook_fails_and_says_which_parts_numbered_from_one(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    code, text = check(release_notebook("rmsnorm"))
    assert code == 1
    cells = nbformat.read(release_notebook("rmsnorm"), as_version=4).cells
    number = 1 + next(i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade_id") == "rms_norm_code")
    assert f"第 {number} 个单元格（rms_norm_code）还没有作答" in text
    assert "自检 rmsnorm_function（第" in text and "NotImplementedError" in text
    assert "学号" not in text  # the id is there: nothing to say about it


def test_syntax_errors_are_reported_with_the_cell_number_the_report_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    path = edited_notebook("rmsnorm", [("return rms_norm(x, self.gamma, self.eps)", "return rms_norm(x, self.gamma,")],
                           tmp_path / "rmsnorm.ipynb")
    cells = nbformat.read(path, as_version=4).cells
    index = next(i for i, c in enumerate(cells) if "return rms_norm(x, self.gamma," in c.source)
    code, text = check(path)
    assert code == 1 and f"第 {index + 1} 个单元格有语法错误" in text, text


def test_an_empty_student_id_is_reported_as_such(monkeypatch):
    monkeypatch.delenv("JUPYTERHUB_USER", raising=False)
    code, text = check(source_notebook("rmsnorm"))  # the finished work, but STUDENT_ID = "" in the notebook
    assert code == 1
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if "学号 STUDENT_ID 是空的" in line)
    assert "STUDENT_ID = \"2024012345\"" in lines[first]
    # the self-check that fails because of it says so; nothing else is reported first as the cause
    hand = next(line for line in lines if "自检 rmsnorm_hand" in line)
    assert "学号为空" in hand and lines.index(hand) > first


def written_notebook(tmp_path, answer: str | None) -> Path:
    """gradient_flow's finished work (the source notebook) with its written answer replaced by `answer`."""
    nb = json.loads(source_notebook("gradient_flow").read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "gradient_flow_observation")
    assert cell["cell_type"] == "markdown" and "YOUR ANSWER HERE" not in "".join(cell["source"])
    if answer is not None:
        cell["source"] = answer
    path = tmp_path / "gradient_flow.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


@pytest.mark.parametrize("answer, done", [
    ("YOUR ANSWER HERE", False),  # as nbgrader hands it out
    (["YOUR ANSWER ", "HERE\n", "\n"], False),  # the same, as a list of lines and with blank lines
    ("   \n", False),  # emptied
    (None, True),  # the instructor's answer in the source notebook: something written
    ("梯度在较深的层里变小，因为每层都乘以一个小于 1 的因子。", True),
])
def test_an_unanswered_written_part_is_not_done(tmp_path, monkeypatch, answer, done):
    """In-process, without a kernel: the self-checks are taken as passed, so only the written part decides."""
    monkeypatch.setattr(checker, "run_self_checks", lambda *args, **kwargs: 0)
    code, text = check(written_notebook(tmp_path, answer))
    cells = json.loads(release_notebook("gradient_flow").read_text(encoding="utf-8"))["cells"]
    number = 1 + next(i for i, c in enumerate(cells)
                      if c["metadata"].get("nbgrader", {}).get("grade_id") == "gradient_flow_observation")
    if done:
        assert code == 0 and "可以提交" in text and "还没有作答" not in text, text
    else:
        assert code == 1, text
        assert f"第 {number} 个单元格（gradient_flow_observation，书面回答，2 分）还没有作答" in text
        assert "可以提交" not in text and "发现 1 个问题" in text


def test_a_written_answer_that_keeps_the_placeholder_gets_a_note(tmp_path, monkeypatch):
    monkeypatch.setattr(checker, "run_self_checks", lambda *args, **kwargs: 0)
    code, text = check(written_notebook(tmp_path, "YOUR ANSWER HERE\n\n梯度在较深的层里变小。"))
    assert code == 0 and "里还留着 YOUR ANSWER HERE" in text and "还没有作答" not in text


def test_without_torch_the_self_checks_say_that_torch_is_needed(monkeypatch):
    """The rest of the requirements present, torch not: in Chinese, what to install; the notebook is not complete."""
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(checker.importlib.util, "find_spec", lambda name, *a: None if name == "torch" else find_spec(name, *a))
    code, text = check(source_notebook("rmsnorm"))
    assert code == 1 and "可以提交" not in text, text
    assert "无法运行自检" in text and "没有安装 PyTorch（torch）（自检要用 PyTorch 运行你的代码）" in text
    assert "nbclient" not in text and "python -m pip install torch==2.13.0" in text
    assert "-r student-requirements.txt" in text


def test_with_the_standard_library_only(tmp_path):
    """This interpreter with -I -S: no site-packages, so no nbformat, nbclient, IPython or torch. A finished and an
    unfinished notebook are read and checked; the self-checks cannot run, and it says in Chinese what to install."""
    probe = subprocess.run([sys.executable, "-I", "-S", "-c", "import nbformat"], capture_output=True)
    assert probe.returncode != 0, "nbformat is importable without site-packages: this test would prove nothing"
    shutil.copy(CHECKER, tmp_path)
    shutil.copy(source_notebook("rmsnorm"), tmp_path / "rmsnorm.ipynb")  # finished
    shutil.copy(release_notebook("gradient_flow"), tmp_path / "gradient_flow.ipynb")  # as handed out
    outputs = {}
    for name in ("rmsnorm", "gradient_flow"):
        done = subprocess.run([sys.executable, "-I", "-S", "check_notebook.py", f"{name}.ipynb"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"]})
        assert done.returncode == 1 and done.stderr == "", done.stdout + done.stderr
        assert "Traceback" not in done.stdout and "ModuleNotFoundError" not in done.stdout, done.stdout
        assert "无法运行自检" in done.stdout and "PyTorch（torch）" in done.stdout and "nbformat" in done.stdout
        assert "-r student-requirements.txt" in done.stdout and "可以提交" not in done.stdout
        outputs[name] = done.stdout
    assert "还没有作答" not in outputs["rmsnorm"] and "语法错误" not in outputs["rmsnorm"]
    assert "发现 1 个问题" in outputs["rmsnorm"]  # only that the self-checks did not run
    unfinished = outputs["gradient_flow"]
    assert "（gradient_flow_observation，书面回答，2 分）还没有作答" in unfinished
    assert "（norm_stacks_code）还没有作答（仍有 raise NotImplementedError()）" in unfinished
    assert "语法错误" not in unfinished  # the cells compile without IPython's transformation too


def test_a_misspelt_assignment_gets_a_suggestion(tmp_path):
    code, text = check(release_notebook("rmsnorm"), "rmsnrom")
    assert code == 2
    assert text == ("❌ 没有名为 'rmsnrom' 的作业。你是不是想写 rmsnorm？"
                    "（作业有：gqa_saving、gradient_flow、llama_block、mla、rmsnorm、rope、swiglu）")
    assert "无法判断" not in text


def test_a_broken_file_is_reported(tmp_path):
    path = tmp_path / "rmsnorm.ipynb"
    path.write_text("{")
    code, text = check(path)
    assert code == 1 and "JSON" in text
    code, text = check(tmp_path / "missing.ipynb", "rmsnorm")
    assert code == 1 and "不是一个普通文件" in text
    path.write_text(json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}))
    code, text = check(path)
    assert code == 1 and "格式版本是 3，不是 4" in text, text
    path.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [{"cell_type": "code"},
                                                                                        {"cell_type": 7}]}))
    code, text = check(path)
    assert code == 1 and "第 2 个单元格的格式不对" in text, text
    path.write_text("[" * 100_000 + "]" * 100_000)
    code, text = check(path)
    assert code == 1 and "嵌套太深" in text, text


def test_autograde_check_is_the_same_check():
    result = CliRunner().invoke(app, ["check", str(release_notebook("rmsnorm")), "-a", "rmsnrom"])
    assert result.exit_code == 2 and "你是不是想写 rmsnorm" in result.output


def test_the_checker_as_a_student_runs_it_prints_chinese_only(tmp_path):
    """Its own process: no English kernel warning ("[IPKernelApp] WARNING | Kernel is running over TCP ...")."""
    shutil.copy(CHECKER, tmp_path)
    shutil.copy(release_notebook("rmsnorm"), tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JUPYTERHUB_USER")}
    done = subprocess.run([sys.executable, "check_notebook.py", "rmsnorm.ipynb"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "IPKernelApp" not in done.stdout + done.stderr and "WARNING" not in done.stdout + done.stderr
    assert done.stderr == ""
    assert "学号 STUDENT_ID 是空的" in done.stdout


def test_in_a_fresh_environment_with_the_student_requirements_only(tmp_path, record_property):
    """torch==2.13.0 first, then student-requirements.txt as students get it, from a local wheelhouse (no network);
    the checker and a notebook in a folder of their own: nothing of this repository is importable there."""
    if not any(WHEELHOUSE.glob("torch-2.13.0*.whl")):
        pytest.fail(f"no student wheelhouse at {WHEELHOUSE}: bash scripts/dev.sh builds it (pip wheel of the "
                    "student requirements)")
    python = Path(sys.base_prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    venv = tmp_path / "venv"
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
           "--no-index", "--find-links", str(WHEELHOUSE)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PIP_CONSTRAINT")}
    env.update(PIP_CONFIG_FILE=os.devnull, JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), JUPYTERHUB_USER="alice")
    subprocess.run([*pip, "torch==2.13.0"], check=True, env=env, timeout=600)
    subprocess.run([*pip, "-c", str(REPO_ROOT / "environment" / "constraints.txt"),
                    "-r", str(CHECKER.parent / "student-requirements.txt")], check=True, env=env, timeout=600)
    home = tmp_path / "student"
    home.mkdir()
    shutil.copy(CHECKER, home)
    shutil.copy(source_notebook("rmsnorm"), home / "rmsnorm.ipynb")  # finished work
    shutil.copy(release_notebook("swiglu"), home / "swiglu.ipynb")  # not yet
    student_python = str(venv / "bin" / "python")
    for ours in ("autograder", "solutions", "nbgrader", "pytest"):
        probe = subprocess.run([student_python, "-c", f"import {ours}"], cwd=home, env=env, capture_output=True)
        assert probe.returncode != 0, f"{ours} is importable in the student's environment"
    started = time.monotonic()
    done = subprocess.run([student_python, "check_notebook.py", "rmsnorm.ipynb"], cwd=home, env=env,
                          capture_output=True, text=True, timeout=120)
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    # a figure for the run's output, not an assertion (speed is measured, never asserted)
    record_property("summary_line", f"students' checker on a finished rmsnorm notebook, fresh environment: {seconds:.1f} s")
    assert "自检 rmsnorm_module 通过" in done.stdout and done.stderr == ""
    version = subprocess.run([student_python, "-c", "import torch; print(torch.__version__)"], env=env,
                             capture_output=True, text=True)
    assert version.stdout.startswith("2.13.0")
    done = subprocess.run([student_python, "check_notebook.py", "swiglu.ipynb"], cwd=home, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "还没有作答" in done.stdout and done.stderr == ""
