"""Render a student report and the class summary, and take PNG screenshots with headless Chromium.

    python scripts/screenshot.py                                  # built-in sample results
    python scripts/screenshot.py --results results.json --student alice --assignment rmsnorm --out shots/
    python scripts/screenshot.py --mobile                         # also 390 px wide (a phone)

`--results` is a JSON file holding one SubmissionResult dict or a list of them (`result.to_dict()`).
The report is the one of `--student`/`--assignment` (default: the first graded result with the most
failed checks); the summary covers all results. Writes report.html, summary.html and their PNGs.
Needs `chromium` on PATH (Debian: apt-get install chromium fonts-noto-cjk).
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autograder.reporting.class_summary import render_summary  # noqa: E402
from autograder.reporting.student_page import render_report  # noqa: E402
from autograder.results import CellRun, CheckResult, PartResult, SubmissionResult  # noqa: E402
from solutions.student_params import student_answers  # noqa: E402


def chromium_screenshot(html: Path, png: Path, width: int = 1280, height: int = 1600, timeout: float = 90) -> Path:
    """One PNG of `html` (a local file) in a fresh headless Chromium profile, without network chatter."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise RuntimeError("chromium is not installed (apt-get install -y chromium)")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="autograde-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
               f"--screenshot={png}", Path(html).resolve().as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not png.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return png


def sample_results() -> list[SubmissionResult]:
    """A small made-up class for rmsnorm: a good one, a buggy one, one that borrowed bob's hand answers,
    an unreadable notebook. Built directly, no grading."""
    bob = student_answers("rmsnorm", "bob")

    def checks(hand_ok: bool, function_ok: bool, module_ok: bool, diagnosis: str | None = None):
        fail = "输出与参考实现不一致：最大绝对误差 0.0753（容限 rtol=1e-10, atol=1e-10），100% 的元素超出容限"
        details = {"shape": [3, 5, 24], "expected_shape": [3, 5, 24], "dtype": "torch.float64",
                   "max_abs_error": 0.0753, "tolerance": "rtol=1e-10, atol=1e-10", "share_outside": 1.0}

        def one(name, gid, points, desc, ok, det=None, diag=None):
            return CheckResult(name, gid, ok, points if ok else 0.0, points, desc,
                               "通过" if ok else (fail if det else "`rms` 不对（超出相对误差容限 0.0005，即 4 位有效数字）"),
                               {} if ok else (det or {"tolerance": 0.0005}), None if ok else diag)

        hand = [one("test_hand_rms", "rmsnorm_hand", 1, "手算的 rms 与按你的学号算出的答案一致（4 位有效数字）", hand_ok),
                one("test_hand_output", "rmsnorm_hand", 1, "手算的 output 与按你的学号算出的答案一致（4 位有效数字）", hand_ok)]
        func = [one("test_function_float64_batched", "rmsnorm_function", 1.5,
                    "rms_norm 在 float64、多个 batch 维、小尺度输入上与参考实现一致", function_ok, details, diagnosis),
                one("test_function_uses_eps_argument", "rmsnorm_function", 1,
                    "rms_norm 使用传入的 eps（eps = 1e-3，在根号里面）", function_ok, details, diagnosis),
                one("test_function_float32_default_eps", "rmsnorm_function", 1,
                    "rms_norm 在 float32、默认 eps 下与参考实现一致，输出仍是 float32", True),
                one("test_function_single_vector", "rmsnorm_function", 0.5,
                    "rms_norm 也适用于没有 batch 维的单个向量 [d]", function_ok, details, diagnosis)]
        module = [one("test_module_parameters", "rmsnorm_module", 1,
                      "RMSNorm(d_model) 只有一个参数 gamma，形状 [d_model]，初始化为全 1", True),
                  one("test_module_forward_backward_float64", "rmsnorm_module", 2,
                      "加载给定的 gamma 后，forward 输出、输入的梯度和 gamma 的梯度都与参考实现一致（float64）", module_ok, details),
                  one("test_module_forward_float32", "rmsnorm_module", 1,
                      "RMSNorm 在 float32 下 forward 与参考实现一致（默认 eps）", module_ok, details)]
        return [PartResult(gid, sum(c.points for c in cs), sum(c.max_points for c in cs), cs)
                for gid, cs in (("rmsnorm_hand", hand), ("rmsnorm_function", func), ("rmsnorm_module", module))]

    def result(student, parts, **kw):
        return SubmissionResult(student_id=student, assignment_id="rmsnorm", status="graded",
                                score=sum(p.score for p in parts), max_score=10.0, parts=parts, tier="bubblewrap",
                                seed=1234567890123, grader_version="0.1.0", notebook=f"submitted/{student}/rmsnorm/rmsnorm.ipynb",
                                hand_answers=kw.pop("hand", {}), **kw)

    carol_parts = checks(False, False, True, diagnosis="eps_outside_root")
    return [
        result("bob", checks(True, True, True), hand=bob),
        result("carol", carol_parts, hand={"rms": 46.0, "output": None},
               cells=[CellRun(10, "hand_answer", False, "TypeError", "unsupported operand type(s) for +: 'int' and 'str'"),
                      CellRun(19, None, False, "Timeout", "")]),
        result("alice", checks(False, True, True), hand=dict(bob)),
        SubmissionResult("dave", "rmsnorm", "error", 0.0, 10.0,
                         parts=[PartResult(g, 0.0, m, [], answered=False,
                                           message="笔记本文件不是有效的 JSON，可能已损坏；请用 Jupyter 重新保存后提交")
                                for g, m in (("rmsnorm_hand", 2.0), ("rmsnorm_function", 4.0), ("rmsnorm_module", 4.0))],
                         message="笔记本文件不是有效的 JSON，可能已损坏；请用 Jupyter 重新保存后提交", tier="bubblewrap",
                         grader_version="0.1.0"),
    ]


def load_results(path: Path) -> list[SubmissionResult]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return [SubmissionResult.from_dict(d) for d in (data if isinstance(data, list) else [data])]


def pick(results: list[SubmissionResult], student: str | None, assignment: str | None) -> SubmissionResult:
    chosen = [r for r in results if (student is None or r.student_id == student)
              and (assignment is None or r.assignment_id == assignment)]
    if not chosen:
        raise SystemExit(f"no result for student={student!r} assignment={assignment!r}")
    return max(chosen, key=lambda r: (r.status == "graded", sum(not c.passed for p in r.parts for c in p.checks)))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="JSON: one result dict or a list (default: built-in samples)")
    parser.add_argument("--student")
    parser.add_argument("--assignment")
    parser.add_argument("--roster", help="comma-separated student ids for the summary")
    parser.add_argument("--out", type=Path, default=Path("screenshots"))
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1600)
    parser.add_argument("--mobile", action="store_true", help="also shoot both pages 390 px wide")
    args = parser.parse_args(argv)

    results = load_results(args.results) if args.results else sample_results()
    roster = args.roster.split(",") if args.roster else None
    args.out.mkdir(parents=True, exist_ok=True)
    pages = {"report": render_report(pick(results, args.student, args.assignment)),
             "summary": render_summary(results, roster)}
    for name, html in pages.items():
        page = args.out / f"{name}.html"
        page.write_text(html, encoding="utf-8")
        print(chromium_screenshot(page, args.out / f"{name}.png", args.width, args.height))
        if args.mobile:
            print(chromium_screenshot(page, args.out / f"{name}-mobile.png", 390, args.height))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
