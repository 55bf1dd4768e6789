"""A seeded fuzz class: random odd data in every place a student can put it, graded in one batch next to honest
students. The seed is printed; AUTOGRADE_FUZZ_SEED repeats a run.

Odd data: random JSON shapes and depths (metadata, outputs, whole cells), huge and odd numbers (typed answers,
returned values, a million-number hand answer), floods of failing cells, a forged reply naming one 64 MiB buffer 20
times, non-UTF-8 bytes and lone surrogates (cell sources, outputs, exception messages, prints,
metadata, student ids as folder names). Whatever a notebook holds, the run completes, every submission found has a
result, every export is written and readable, every result and report is under 4 MiB, and the honest students get what
they get alone.
"""

import json
import os
import random

import pytest

from autograder.engine import GradingOptions, grade_submission
from autograder.examples import notebook_with_edits
from autograder.run import RunOptions, run_grading
from autograder.recording.outputs import ResultStore
from autograder.reporting.student_page import render_report
from autograder.running.sandbox.limits import Limits
from hostile.corpus import FORGERY, forge

pytestmark = pytest.mark.slow

SEED = int(os.environ.get("AUTOGRADE_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
NOTEBOOKS = 30  # plus the honest students: at most 40 in all
HONEST = ("honest-a", "honest-b", "honest-c")
LIMITS = dict(cell_timeout=4.0, probe_timeout=4.0, submission_timeout=40.0)

ODD_TEXT = ["\udc80", "\ud800x", "\udfff", "\x00", "\x1b[31m", "\u202e", "零宽\u200b", "😀", "\ufeff", "\r\n",
            "'''", '"""', "\\", "{{ 7*7 }}", "<script>alert(1)</script>", "=1+2;", "%s%n"]
ODD_NUMBERS = ["10**400", "-10**400", "2**64", "2**53 + 1", "float('nan')", "float('inf')", "-0.0", "1e308 * 10",
               "True", "None", "[1] * 10000", "[0.5] * 1_000_000", "'3.14'", "complex(1, 2)", "[[[[[[[[[[1]]]]]]]]]]"]


def odd_text(rng: random.Random) -> str:
    return "".join(rng.choice(ODD_TEXT) for _ in range(rng.randint(1, 6)))


def odd_json(rng: random.Random, depth: int = 0):
    """A random JSON value: deep lists and dicts, odd strings, huge numbers."""
    kind = rng.randrange(7 if depth < 40 else 4)
    if kind == 0:
        return rng.choice([10**30, -(2**70), 1e308, -1e-320, 0, True, None])
    if kind == 1:
        return odd_text(rng)
    if kind == 2:
        return rng.random()
    if kind == 3:
        return rng.randint(-5, 5)
    if kind == 4:
        return [odd_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == 5:
        return {odd_text(rng): odd_json(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    value = None  # a deep chain
    for _ in range(rng.randint(30, 300)):
        value = [value]
    return value


def py_text(text: str) -> str:
    """A Python expression for `text` that survives being a cell source (lone surrogates as chr())."""
    return "+".join(f"chr({ord(c)})" for c in text) or "''"


def fuzz_notebook(rng: random.Random, index: int) -> bytes:
    """The rmsnorm reference with random odd data; returned as the file's bytes (some not UTF-8 at all)."""
    cells, edits = [], []
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(8)
        if choice == 0:
            cells.append((-1, f"raise ValueError({py_text(odd_text(rng))})"))
        elif choice == 1:
            cells.append((-1, f"print({py_text(odd_text(rng))} * {rng.randint(1, 3000)})"))
        elif choice == 2:
            cells.append((-1, f"rms = {rng.choice(ODD_NUMBERS)}\noutput = {rng.choice(ODD_NUMBERS)}"))
        elif choice == 3:
            cells.append((-1, f"class Odd(Exception):\n    def __str__(self):\n        return {py_text(odd_text(rng))}\n"
                              f"raise Odd()"))
        elif choice == 4:
            cells.append((12, f"def rms_norm(x, gamma, eps=1e-6):\n    return {rng.choice(ODD_NUMBERS)}"))
        elif choice == 5:
            cells.append((-1, f"_ = {json.dumps(odd_json(rng), ensure_ascii=True)!r}"))
        elif choice == 6:  # a flood of failing cells: more than a result keeps
            cells += [(-1, f"raise ValueError({py_text(odd_text(rng))} * {rng.randint(1, 3000)})")] * rng.randint(60, 400)
        elif not edits:  # a forged reply naming one 64 MiB buffer 20 times, sent from inside rms_norm
            edits, cells = list(forge("aliasing")), cells + [(12, FORGERY)]
    nb = notebook_with_edits("rmsnorm", edits, cells)
    raw = json.loads(json.dumps(nb))
    for _ in range(rng.randint(0, 3)):  # odd data where nothing runs it: metadata and saved outputs
        cell = rng.choice(raw["cells"])
        where = rng.randrange(3)
        if where == 0:
            cell.setdefault("metadata", {})[odd_text(rng)] = odd_json(rng)
        elif where == 1 and cell["cell_type"] == "code":
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": odd_text(rng)}, odd_json(rng)]
        else:
            raw["metadata"][odd_text(rng)] = odd_json(rng)
    data = json.dumps(raw, ensure_ascii=True).encode()
    if rng.random() < 0.15:  # 3000-deep JSON in the notebook's metadata: written as bytes (json.dumps would refuse)
        data = data.replace(b'"metadata": {', b'"metadata": {"deep": ' + b"[" * 3000 + b"]" * 3000 + b", ", 1)
    if rng.random() < 0.1:
        data = data.replace(b'"cells"', b'"cells\xff\xfe"', 1)  # not UTF-8
    if rng.random() < 0.05:
        data = data[: rng.randrange(len(data))]  # cut short
    return data


def student_folder(rng: random.Random, index: int) -> bytes:
    """A student folder name: mostly ordinary, some with bytes that are not UTF-8 or not printable."""
    name = f"fuzz-{index:02d}".encode()
    roll = rng.random()
    if roll < 0.15:
        name += b"-\xff\xfe"
    elif roll < 0.25:
        name += b"-\x1b[1m"
    elif roll < 0.35:
        name += "-王芳".encode()
    return name


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory):
    print(f"fuzz seed: {SEED} (AUTOGRADE_FUZZ_SEED={SEED} repeats this run)")
    rng = random.Random(SEED)
    tmp = tmp_path_factory.mktemp("fuzz")
    submitted = tmp / "submitted"
    submitted.mkdir()
    names = []
    for index in range(NOTEBOOKS):
        folder = os.path.join(os.fsencode(submitted), student_folder(rng, index), b"rmsnorm")
        os.makedirs(folder)
        with open(os.path.join(folder, b"rmsnorm.ipynb"), "wb") as f:
            f.write(fuzz_notebook(rng, index))
        names.append(os.fsdecode(os.path.basename(os.path.dirname(folder))))
    for student in HONEST:
        folder = submitted / student / "rmsnorm"
        folder.mkdir(parents=True)
        (folder / "rmsnorm.ipynb").write_bytes(json.dumps(notebook_with_edits("rmsnorm", [], [])).encode())
    out = tmp / "out"
    summary = run_grading(RunOptions(assignments=["rmsnorm"], submissions=submitted, out=out, workers=2, **LIMITS))
    return summary, out, submitted, names


def test_every_fuzzed_submission_has_a_result(fuzzed):
    summary, out, _, names = fuzzed
    assert len(summary.results) == NOTEBOOKS + len(HONEST), f"seed {SEED}"
    assert not summary.record_failures and not summary.check_bugs, (SEED, summary.record_failures)
    ids = {r.student_id for r in summary.results}
    for result in summary.results:
        stored = json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")  # storable, always
        assert len(stored) < 4 * 1024**2 and len(render_report(result).encode("utf-8")) < 4 * 1024**2, SEED
        assert result.status in ("graded", "error") and 0 <= result.score <= result.max_score, SEED
    escaped = [r for r in summary.results if any(f.kind == "id" for f in r.flags)]
    for result in escaped:
        assert result.student_id.isprintable() and "%" in result.student_id, SEED
    assert len(ids) == len(summary.results), f"two submissions under one id (seed {SEED})"


def test_the_exports_are_written_and_readable(fuzzed):
    _, out, _, _ = fuzzed
    rows = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(rows) == NOTEBOOKS + len(HONEST)
    (out / "grades.csv").read_text(encoding="utf-8")
    summary = (out / "summary.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in summary, SEED
    assert len(ResultStore(out).all()) == NOTEBOOKS + len(HONEST)
    for page in (out / "reports").glob("*/rmsnorm.html"):
        assert "<script>alert(1)</script>" not in page.read_text(encoding="utf-8"), (SEED, page)


def test_honest_students_next_to_the_fuzz_get_what_they_get_alone(fuzzed):
    summary, _, submitted, _ = fuzzed
    by_student = {r.student_id: r for r in summary.results}
    for student in HONEST:
        alone = grade_submission(submitted / student / "rmsnorm" / "rmsnorm.ipynb", "rmsnorm", student,
                                 GradingOptions(limits=Limits(**LIMITS)))
        assert by_student[student].identity() == alone.identity(), (SEED, student)
        assert alone.score == 10
