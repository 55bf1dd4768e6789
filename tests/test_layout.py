"""The layout of autograder/: the pipeline's map resolves, and the README's "What is where" lists every module."""

import re

import pytest

from autograder import REPO_ROOT
from autograder.assignments import assignment_ids
from autograder.pipeline import STEPS, resolve

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("step", STEPS, ids=[s.name for s in STEPS])
def test_each_step_of_the_pipeline_names_code_that_exists(step):
    assert callable(resolve(step)), step.where


def test_the_steps_are_named_once():
    names = [s.name for s in STEPS]
    assert len(names) == len(set(names))


def _what_is_where() -> str:
    section = README.split("## What is where", 1)[1]
    return section.split("```", 2)[1]


def test_what_is_where_lists_every_module():
    """Every module and folder of autograder/ is in the README's map, under its folder (the sandbox's modules on
    the sandbox's lines); an assignment's check and example modules are the `<id>.py` lines."""
    text = _what_is_where()
    # (folder, name) as the map's indentation nests them
    listed, stack = set(), []
    for line in text.splitlines():
        match = re.match(r"^( *)(\S+)", line)
        if not match or not line.strip():
            continue
        depth = len(match.group(1)) // 2
        if depth > 6:  # a continuation line of a description
            names = re.findall(r"([a-z_]+\.py)", line)
            listed |= {"/".join(stack + [n]) for n in names}
            continue
        entry = match.group(2).rstrip("/")
        stack = stack[:depth] + [entry]
        listed.add("/".join(stack))
        for n in re.findall(r"\b([a-z_]+\.py)\b", line[len(match.group(0)):]):
            listed.add("/".join(stack + [n]))  # a folder's line naming its modules
    ids = set(assignment_ids())
    missing = []
    for path in sorted((REPO_ROOT / "autograder").rglob("*.py")):
        rel = path.relative_to(REPO_ROOT)
        if "__pycache__" in rel.parts or rel.name == "__init__.py" and rel.parent.name != "checks":
            continue
        if rel.parent.name in ("catalogue", "checks", "examples") and rel.stem in ids:
            rel = rel.with_name("<id>.py")
        key = "/".join(rel.parts)
        if key not in listed and f"{rel.parent.as_posix()}/{rel.name}" not in listed:
            missing.append(key)
    assert not missing, f"modules missing from README's What is where: {missing}"


def test_python_dash_m_pytest_on_autograder_collects_nothing():
    """The product's check modules are not this project's tests (pytest's default pattern is test_*.py)."""
    assert not [p for p in (REPO_ROOT / "autograder").rglob("test_*.py")]
