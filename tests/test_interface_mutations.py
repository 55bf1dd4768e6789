"""Every argument of every pinned interface is varied by a check (issue 22, Build 1).

tests/interface_mutations.py builds, from the source of solutions/, one mutant per argument that the student's code
could ignore (each parameter with a default, num_kv_heads, mask; see there). Each mutant's notebook (the source
notebook with that definition replaced) is graded in this process (tests/inprocess_grading.py: no kernel, no
sandbox), only the checks of the definition's part, and must lose at least one of them by a clear margin: its
failing comparison is off by at least MARGIN times the tolerance, max|mutant - reference| >= 100 (atol + rtol
|reference|), on that check's own inputs. The tolerance counted for a float64 output is at least float32 rounding
(FLOAT32_ROUNDING: a smaller difference passes every check but the part's precision check, which then says
"precision"), so a mutant caught only by a precision check does not count. A check that fails otherwise (a wrong
shape or dtype, weights that do not load, an exception, a wrong integer) tells the mutant apart by any margin.

A mutant that no input can tell from the reference is listed in EQUIVALENT with its reason; the test also requires
each listed one to pass every check (else it is not equivalent, and the list is wrong).
"""

import time
from dataclasses import dataclass, field

import pytest
import torch

from autograder.assignments import assignment_ids

from interface_mutations import CAUSAL_LABEL, Mutant, interface_mutants, student_definitions

MARGIN = 100.0
STRUCTURAL = float("inf")  # a failure that is not a tolerance: wrong type, shape, dtype, integer, an exception

# (assignment, definition, parameter, value) -> why no input tells this mutant from the reference
EQUIVALENT: dict[tuple[str, str, str, str], str] = {}

# assignments whose student-written definitions have no argument to vary (no default, no num_kv_heads, no mask)
NOTHING_TO_VARY = {
    "gradient_flow": "PostNormStack/PreNormStack(d_model, num_layers) and layer_grad_norms(model, x, target) take no "
                     "defaulted argument, no num_kv_heads and no mask",
}


@dataclass
class Graded:
    mutant: Mutant | None  # None: the reference
    assignment_id: str
    failed: dict = field(default_factory=dict)  # check name -> (margin, the student's message)
    passed: list = field(default_factory=list)
    crashed: list = field(default_factory=list)
    seconds: float = 0.0


def _margin_of_close(actual, expected, tol, *_, **__) -> float:
    """max |actual - expected| / allowed, with at least float32 rounding allowed for a float64 output."""
    from autograder.checks import FLOAT32_ROUNDING

    if not (isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor)) or actual.shape != expected.shape \
            or actual.dtype != expected.dtype or not actual.dtype.is_floating_point \
            or not bool(torch.isfinite(actual).all()):
        return STRUCTURAL
    a, e = actual.detach().double(), expected.detach().double()
    allowed = tol.atol + tol.rtol * e.abs()
    if expected.dtype == torch.float64:
        allowed = torch.maximum(allowed, FLOAT32_ROUNDING.atol + FLOAT32_ROUNDING.rtol * e.abs())
    return float(((a - e).abs() / allowed).max()) if a.numel() else 0.0


def _margin_of_number(actual, expected, what=None, rel=None) -> float:
    from autograder.checks import HAND, is_number

    if not is_number(actual):
        return STRUCTURAL
    return abs(actual - expected) / ((rel or HAND) * max(abs(expected), 1e-300))


class Recorder:
    """Wraps the comparisons of autograder.checks: the margin of each one that fails, for the running check."""

    def __init__(self, monkeypatch):
        import autograder.checks as kit

        self.failures: list[float] = []
        self.errors: list[str] = []  # the margin itself could not be computed: a bug here
        for name, margin in (("_expect_close", _margin_of_close), ("_expect_number", _margin_of_number),
                             ("_expect_int", lambda *a, **k: STRUCTURAL)):
            monkeypatch.setattr(kit, name, self._wrap(getattr(kit, name), margin))

    def _wrap(self, compare, margin):
        def recorded(*args, **kwargs):
            try:
                return compare(*args, **kwargs)
            except Exception:
                try:
                    self.failures.append(margin(*args, **kwargs))
                except Exception as exc:
                    self.errors.append(f"{compare.__name__}: {exc!r}")
                raise
        return recorded


def grade(mutants: list[Mutant], recorder: Recorder) -> list[Graded]:
    """The references and every mutant, graded in this process in one pytest session: the part's checks only,
    one at a time, each with the margins of its failing comparisons."""
    import tempfile
    from pathlib import Path

    import nbformat

    from autograder.assignments import load_assignment
    from autograder.checks.plugin import CheckContext, GradingPlugin, run_pytest
    from autograder.checks.probes import StudentCode
    from autograder.course import student_seed
    from autograder.examples import notebook_with_edits
    from autograder.intake.reading import prepare
    from autograder.running.sandbox.limits import Limits
    from inprocess_grading import SECRET, STUDENT_ID, TIMEOUT, InProcessRun

    ids = sorted({m.assignment_id for m in mutants})
    assignments = {a: load_assignment(a) for a in ids}
    jobs = [(a, None) for a in ids] + [(m.assignment_id, m) for m in mutants]
    results: list[Graded] = []
    plugin: GradingPlugin

    def grade_job(job, run_checks):
        a, mutant = job
        started = time.monotonic()
        nb = notebook_with_edits(a, [(mutant.old, mutant.new)] if mutant else [])
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{a}.ipynb"
            nbformat.write(nb, path)
            prepared = prepare(path, assignments[a])
        run = InProcessRun(prepared.cells, Limits(), STUDENT_ID)
        seed = student_seed(SECRET, a, STUDENT_ID)
        context = CheckContext(StudentCode(run, STUDENT_ID, a, seed, TIMEOUT), a, STUDENT_ID, seed)
        graded = Graded(mutant, a)
        parts = {m.part for m in mutants if m.assignment_id == a} if mutant is None else {mutant.part}
        for spec in plugin.specs[a]:
            if spec.grade_id not in parts:
                continue
            recorder.failures = []
            (outcome,) = run_checks(context, {spec.name})
            if outcome.crash is not None:
                graded.crashed.append(spec.name)
            elif outcome.passed:
                graded.passed.append(spec.name)
            else:
                graded.failed[spec.name] = (max(recorder.failures, default=STRUCTURAL), outcome.message)
        graded.seconds = time.monotonic() - started
        results.append(graded)

    expected = {a: {p.grade_id: p.points for p in spec.parts if not p.written} for a, spec in assignments.items()}
    plugin = GradingPlugin(jobs, grade_job, expected)
    run_pytest(plugin, ids)
    return results


def judge(r: Graded) -> str | None:
    """None when the mutant is caught as required (or is a listed equivalent that passes), else why not."""
    m = r.mutant
    if r.crashed:
        return f"{m.label}: checks raised {r.crashed}"
    if m.key in EQUIVALENT:
        return f"{m.label} is listed as equivalent but fails {sorted(r.failed)}" if r.failed else None
    if any(margin >= MARGIN for margin, _ in r.failed.values()):
        return None
    if not r.failed:
        return f"{m.label}: passes every check of {m.part}"
    return f"{m.label}: fails only " + ", ".join(f"{n} by {margin:.3g}x the tolerance"
                                                 for n, (margin, _) in r.failed.items())


def test_the_judgement_and_the_margins_can_fail(monkeypatch):
    """A mutant caught only near the tolerance, or only by a precision check at float32 rounding, is a survivor;
    the recorder measures a comparison's margin with float32 rounding as the floor of a float64 tolerance."""
    from autograder.checks import F32, F64, CheckFailed, expect_close, expect_float64_precision, expect_int

    m = Mutant("a", "f", "eps", "1e-06", "everywhere", "p", "old", "new")
    assert judge(Graded(m, "a", failed={"c": (3.0, "")})) == "a:f:eps=1e-06: fails only c by 3x the tolerance"
    assert judge(Graded(m, "a", passed=["c"])) == "a:f:eps=1e-06: passes every check of p"
    assert judge(Graded(m, "a", failed={"c": (3.0, ""), "d": (STRUCTURAL, "")})) is None
    assert judge(Graded(m, "a", failed={"c": (250.0, "")}, crashed=["d"])) == "a:f:eps=1e-06: checks raised ['d']"
    monkeypatch.setitem(EQUIVALENT, m.key, "a reason")
    assert judge(Graded(m, "a", passed=["c"])) is None
    assert "listed as equivalent" in judge(Graded(m, "a", failed={"c": (250.0, "")}))

    recorder = Recorder(monkeypatch)
    expected = torch.linspace(-1, 1, 11, dtype=torch.float64)
    cases = [(expect_close, expected + 1e-3, F64, 1e-3 / 2e-5),  # float64: float32 rounding allowed (worst at 0)
             (expect_close, (expected + 1e-3).float(), F32, STRUCTURAL),  # a dtype that differs: not a tolerance
             (expect_float64_precision, expected * (1 + 1e-6), None, None)]
    for compare, actual, tol, want in cases:
        recorder.failures = []
        with pytest.raises(CheckFailed):
            compare(actual, expected, tol) if tol is not None else compare(actual, expected)
        if want is None:
            assert recorder.failures and max(recorder.failures) < 1  # the precision, not a slip
        else:
            assert max(recorder.failures) == pytest.approx(want, rel=1e-6)
    recorder.failures = []
    with pytest.raises(CheckFailed):
        expect_int(3, 4, "n")
    assert recorder.failures == [STRUCTURAL] and recorder.errors == []


def test_the_mutants_cover_every_student_definition_and_argument():
    """Cheap: the mutants exist where the issue names them, each compiles, and each differs from the reference."""
    labels = set()
    for a in assignment_ids():
        mutants = interface_mutants(a)
        assert bool(mutants) != (a in NOTHING_TO_VARY), a
        assert student_definitions(a)
        for m in mutants:
            compile(m.new, m.label, "exec")
            assert m.new != m.old
            labels.add(m.label)
    for expected in ["llama_block:LlamaAttention.__init__:eps=1e-06", "llama_block:LlamaBlock.__init__:eps=1e-05",
                     "llama_block:LlamaBlock.__init__:eps=1e-06 only in RMSNorm(d_model, eps) at line",
                     "llama_block:LlamaBlock.__init__:eps=1e-05 only in LlamaAttention(",
                     "llama_block:LlamaAttention.__init__:eps=1e-06 only in RMSNorm(self.d_head, eps) at line",
                     "llama_block:LlamaBlock.__init__:theta=10000.0", "llama_block:LlamaBlock.__init__:d_ff=None",
                     f"llama_block:LlamaBlock.forward:mask={CAUSAL_LABEL}", "llama_block:LlamaBlock.forward:mask=None",
                     "gqa_saving:GroupedQueryAttention.__init__:num_kv_heads=num_q_heads",
                     "gqa_saving:kv_cache_bytes:num_kv_heads=1", "rmsnorm:rms_norm:eps=1e-05",
                     "rope:precompute_rope_freqs:dtype=torch.float32", "swiglu:FeedForward_SwiGLU.__init__:d_ff=None",
                     "mla:mla_cache_bytes:d_rope=0", f"mla:mla_absorbed_latents:mask={CAUSAL_LABEL}"]:
        assert any(label.startswith(expected) for label in labels), expected
    keys = {m.key for a in assignment_ids() for m in interface_mutants(a)}
    assert set(EQUIVALENT) <= keys, "EQUIVALENT lists a mutant that is no longer made"


def test_a_new_parameter_gets_its_mutants(tmp_path, monkeypatch):
    """The construction reads the signature: a parameter added to a definition is varied without a word here."""
    import sys

    import interface_mutations

    package = tmp_path / "fake_solutions"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "block.py").write_text(
        "class Block:\n"
        "    def __init__(self, d, num_q_heads, num_kv_heads, eps=1e-6, scale=2.0):\n"
        "        self.a = Norm(d, eps)\n        self.b = Norm(d, eps)\n        self.scale = scale\n\n"
        "    def forward(self, x, mask=None):\n        \"\"\"doc\"\"\"\n        return x if mask is None else x + mask\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fake_solutions", raising=False)
    found = {m.label: m for m in interface_mutations.definition_mutants("fake", "fake_solutions.block", "Block", "p")}
    assert set(found) == {
        "fake:Block.__init__:num_kv_heads=num_q_heads", "fake:Block.__init__:eps=1e-06", "fake:Block.__init__:eps=1e-05",
        "fake:Block.__init__:eps=1e-06 only in Norm(d, eps) at line 3",
        "fake:Block.__init__:eps=1e-06 only in Norm(d, eps) at line 4",
        "fake:Block.__init__:eps=1e-05 only in Norm(d, eps) at line 3",
        "fake:Block.__init__:eps=1e-05 only in Norm(d, eps) at line 4",
        "fake:Block.__init__:scale=2.0", "fake:Block.forward:mask=None", f"fake:Block.forward:mask={CAUSAL_LABEL}"}
    namespace = {"Norm": lambda d, eps: eps}
    exec(found["fake:Block.__init__:eps=1e-06 only in Norm(d, eps) at line 4"].new, namespace)
    block = namespace["Block"](4, 2, 1, eps=0.5, scale=3.0)
    assert (block.a, block.b, block.scale) == (0.5, 1e-6, 3.0)
    exec(found["fake:Block.__init__:scale=2.0"].new, namespace)
    assert namespace["Block"](4, 2, 1, scale=3.0).scale == 2.0
    exec(found[f"fake:Block.forward:mask={CAUSAL_LABEL}"].new, namespace)
    causal = namespace["Block"](4, 2, 1).forward(torch.zeros(1, 3, 3), None)
    assert torch.equal(torch.isinf(causal[0, :3, :3]), torch.ones(3, 3, dtype=torch.bool).triu(1))


def test_every_interface_mutant_loses_a_check_of_its_part_by_a_hundred_times_the_tolerance(monkeypatch,
                                                                                          record_property):
    torch.set_num_threads(1)
    mutants = [m for a in assignment_ids() for m in interface_mutants(a)]
    started = time.monotonic()
    recorder = Recorder(monkeypatch)
    results = grade(mutants, recorder)
    seconds = time.monotonic() - started
    references = [r for r in results if r.mutant is None]
    assert len(references) == len({m.assignment_id for m in mutants})
    for r in references:  # the checks and the grading are sound: the reference loses nothing
        assert (r.assignment_id, r.failed, r.crashed) == (r.assignment_id, {}, [])
        assert r.passed
    verdicts = [judge(r) for r in results if r.mutant is not None]
    survivors = [v for v in verdicts if v is not None]
    line = (f"interface mutants: {len(mutants)} over {len(references)} assignments, graded in-process in "
            f"{seconds:.1f} s; equivalent: {len(EQUIVALENT)}")
    print(line)
    record_property("summary_line", line)
    assert recorder.errors == []
    assert survivors == []
