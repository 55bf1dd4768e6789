"""Grade the examples (autograder/examples/) in this process, without a sandbox or a kernel: for the tests that need
every example graded fast (tests/test_diagnosis_coverage.py).

The notebook's graded cells run in the sandbox runner's own namespace (autograder.running.sandbox.probe_server.Runner, in
this process), and each probe goes through the wire and the reply's schema as in the sandbox (requests and replies
encoded and parsed), so the checks get what they get from a sandbox. Only for the course's own notebooks: nothing
here confines the code it runs.

Run as a script, it measures the check modules with coverage.py while it grades (coverage starts before anything
under autograder/checks is imported, so the figure counts their module-level lines too) and writes a JSON report:

    python tests/inprocess_grading.py REPORT.json [ASSIGNMENT ...]
"""

import contextlib
import io
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CHECKS = REPO / "autograder" / "checks"
STUDENT_ID = "coverage-student"
SECRET = b"in-process grading of the examples"
TIMEOUT = 60.0


@dataclass
class Verdict:
    assignment_id: str
    kind: str  # reference, mistake, alternative, precision
    name: str
    ok: bool
    why: str
    failed: list
    named: list
    messages: dict  # check name -> the student's message, for the failed checks
    seconds: float = 0.0
    student_id: str = STUDENT_ID


class InProcessRun:
    """What autograder.checks.probes.StudentCode needs of a NotebookRun: request(header, values, timeout)."""

    def __init__(self, cells, limits, student_id: str):
        import os

        import torch

        from autograder.running.sandbox import probe_server as runner, wire

        self.cells, self.limits, self.exhausted = cells, limits, False
        self._runner_module, self._wire = runner, wire
        self.runner = runner.Runner(torch, wire, {})
        self.cell_errors = []
        os.environ["JUPYTERHUB_USER"] = student_id  # what the sandbox's environment says (NotebookRun)
        for cell in cells:
            reply = self.request({"op": "exec_cell", "source": cell.source, "cell": cell.index}, None, TIMEOUT)
            if not reply.ok:
                self.cell_errors.append((cell.index, reply.error))

    def request(self, header: dict, values, timeout: float):
        from autograder.running.sandbox.reply import encode_frame, parse_reply_frame

        runner, wire = self._runner_module, self._wire
        header = dict(header, id=1, timeout=timeout)
        if values is not None:  # what the sandbox reads: the request's values through the wire
            buffers: list = []
            tree = wire.encode(values, buffers)
            values = wire.decode(tree, buffers, self.limits.max_elements)
        handlers = {"exec_cell": self.runner.exec_cell, "call": self.runner.call, "module": self.runner.module,
                    "variable": self.runner.variable}
        reply, result = {"op": header["op"], "id": 1, "seconds": 0.0, "output": ""}, None
        snapshot = dict(vars(runner.builtins))
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                result = handlers[header["op"]](header, values or {})
            reply["ok"] = True
        except (runner.NotDefined, runner.ShapeMismatch) as exc:
            reply.update(ok=False, error={"type": type(exc).__name__, "message": str(exc), "traceback": ""})
        except runner.Timeout:
            reply.update(ok=False, error={"type": "Timeout", "message": "", "traceback": ""})
        except BaseException as exc:  # the student's code raised: what the runner replies
            reply.update(ok=False, error=runner.describe(exc))
        finally:
            runner._restore(vars(runner.builtins), snapshot)
        try:
            frame = encode_frame(reply, {"result": result} if reply["ok"] else None)
        except BaseException as exc:  # a result that cannot be sent
            reply.update(ok=False, error={"type": "Unsendable", "message": str(exc)[:200], "traceback": ""})
            frame = encode_frame(reply, None)
        return parse_reply_frame(frame, 1)


def examples(assignment_id: str):
    """(kind, example) for the reference and every example of the assignment."""
    from autograder.examples import alternatives, mistakes, precision_cases

    yield "reference", None
    for kind, found in (("mistake", mistakes(assignment_id)), ("alternative", alternatives(assignment_id)),
                        ("precision", precision_cases(assignment_id))):
        for example in found:
            yield kind, example


def judge(kind: str, example, outcomes) -> tuple[bool, str]:
    """As `autograde selftest` judges (autograder.tools.selftest.judge), on the checks' outcomes."""
    from autograder.checks.diagnosis import PRECISION

    failed = {o.spec.name for o in outcomes if not o.passed}
    named = {o.diagnosis for o in outcomes if o.diagnosis}
    crashed = sorted(o.spec.name for o in outcomes if o.crash is not None)
    if crashed:
        return False, f"checks raised: {crashed}"
    if kind in ("reference", "alternative"):
        return not failed and not named, f"failed {sorted(failed)}, named {sorted(named)}"
    if kind == "precision":
        return (failed == set(example.failing) and named == {PRECISION.name},
                f"failed {sorted(failed)} (expected {sorted(example.failing)}), named {sorted(named)}")
    ok = example.judged(failed) and (named == {example.diagnosis} if example.diagnosis else not named)
    return ok, f"failed {sorted(failed)} (expected {sorted(example.failing)}), named {sorted(named)} " \
               f"(expected {example.diagnosis or 'nothing'})"


def grade_examples(assignment_ids=None, names=None, student_ids=(STUDENT_ID,), select=None,
                   checks_of=None) -> list[Verdict]:
    """Every example of the assignments (only those whose name is in `names`, "reference" for the reference, and
    those `select(kind, example)` keeps, when given), graded in this process for each of `student_ids` (each with its
    own seed and hand inputs), with one pytest session of their checks."""
    import nbformat

    from autograder.assignments import assignment_ids as course_assignments, load_assignment
    from autograder.checks.plugin import CheckContext, GradingPlugin, run_pytest
    from autograder.checks.probes import StudentCode
    from autograder.course import student_seed
    from autograder.examples import notebook_with_edits
    from autograder.intake.reading import prepare
    from autograder.running.sandbox.limits import Limits

    assignment_ids = list(assignment_ids or course_assignments())
    assignments = {a: load_assignment(a) for a in assignment_ids}
    limits = Limits()
    verdicts: list[Verdict] = []
    jobs = [(a, kind, example, student_id) for a in assignment_ids for kind, example in examples(a)
            if (names is None or (example.name if example else "reference") in names)
            and (select is None or select(kind, example)) for student_id in student_ids]
    prepared_cells: dict = {}  # (assignment, example) -> the cells the sandbox runs: one notebook, many students

    def cells_of(a, example):
        import tempfile

        key = (a, example.name if example else None)
        if key not in prepared_cells:
            nb = notebook_with_edits(a, example.edits if example else ())
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / f"{a}.ipynb"
                nbformat.write(nb, path)
                prepared_cells[key] = prepare(path, assignments[a]).cells
        return prepared_cells[key]

    def grade_job(job, run_checks):
        a, kind, example, student_id = job
        started = time.monotonic()
        run = InProcessRun(cells_of(a, example), limits, student_id)
        seed = student_seed(SECRET, a, student_id)
        student = StudentCode(run, student_id, a, seed, TIMEOUT)
        context = CheckContext(student, a, student_id, seed)
        outcomes = checks_of(run_checks, context) if checks_of else run_checks(context)
        ok, why = judge(kind, example, outcomes)
        verdicts.append(Verdict(a, kind, example.name if example else "reference", ok, why,
                                sorted(o.spec.name for o in outcomes if not o.passed),
                                sorted({o.diagnosis for o in outcomes if o.diagnosis}),
                                {o.spec.name: o.message for o in outcomes if not o.passed}, time.monotonic() - started,
                                student_id))

    expected = {a: {p.grade_id: p.points for p in spec.parts if not p.written} for a, spec in assignments.items()}
    run_pytest(GradingPlugin(jobs, grade_job, expected), assignment_ids)
    return verdicts


def main(argv: list[str]) -> int:
    import coverage

    report, assignment_ids = Path(argv[0]), argv[1:]
    import torch

    torch.set_num_threads(1)  # one thread for torch's small ops: idle OpenMP threads on a shared machine cost more
    cov = coverage.Coverage(branch=True, data_file=None, include=[str(CHECKS / "*.py")])
    started = time.monotonic()
    cov.start()
    try:
        verdicts = grade_examples(assignment_ids or None)
    finally:
        cov.stop()
    seconds = time.monotonic() - started
    data = cov.get_data()
    files = {}
    for path in sorted(data.measured_files()):
        files[Path(path).name] = {"lines": sorted(data.lines(path) or []), "arcs": sorted(data.arcs(path) or [])}
    with contextlib.redirect_stdout(io.StringIO()):
        percent = cov.report(include=[str(CHECKS / "*.py")], show_missing=False)
    report.write_text(json.dumps({"verdicts": [v.__dict__ for v in verdicts], "files": files, "percent": percent,
                                  "seconds": seconds}, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main(sys.argv[1:]))
