"""A result finished and rendered where it was graded: the run's facts travel with the job, the files come back as text.

Before a submission is sent to a worker, the run reads what its record needs from the gradebook and the
submission's folder (`RecordingFacts`: the instructor's grades, the hand-in but its penalty, the late policy,
the notebook's digest and the cache key). The worker applies them to its result exactly as the run would
(`finish`) and renders the student's report and the result file (`Rendered`), so that this process only checks
their shape (`checked`) and writes them, in order, after the gradebook transaction (autograder.recording.batch).
A worker's files are as trusted as its results are: student code runs in sandboxes inside it, never in it.
"""

import json
from pathlib import Path
from dataclasses import asdict, dataclass, field

from autograder.intake.handin import with_penalty
from autograder.intake.late import LatePolicy
from autograder.intake.validate import sanitize_record
from autograder.recording.outputs import encode_result
from autograder.results import HandIn, SubmissionResult

MAX_REPORT_CHARS = 20_000_000  # a report bigger than this is not one of ours: the run renders it itself


@dataclass
class RecordingFacts:
    manual_grades: dict[str, tuple[float | None, str]] = field(default_factory=dict)  # from formgrader
    handin: HandIn | None = None  # without its penalty
    policy: LatePolicy | None = None  # the penalty's policy (None: the hand-in has no penalty to compute)
    digest: str | None = None  # the notebook's sha256, as the result file keeps it
    cache_key: str | None = None  # what it is graded under (autograder.recording.cache)

    def to_dict(self) -> dict:
        return {"manual_grades": {k: list(v) for k, v in self.manual_grades.items()},
                "handin": asdict(self.handin) if self.handin is not None else None,
                "policy": asdict(self.policy) if self.policy is not None else None,
                "digest": self.digest, "cache_key": self.cache_key}

    @classmethod
    def from_dict(cls, data: dict) -> "RecordingFacts":
        return cls({k: (v[0], v[1]) for k, v in data["manual_grades"].items()},
                   HandIn.from_dict(data["handin"]) if data["handin"] is not None else None,
                   LatePolicy(**data["policy"]) if data["policy"] is not None else None,
                   data["digest"], data["cache_key"])


@dataclass
class Rendered:
    report: str  # the student's page (also the nbgrader feedback page)
    result_file: str  # OUT/results/<student>/<assignment>.json


def final_handin(result: SubmissionResult, facts: RecordingFacts) -> HandIn | None:
    """The hand-in `facts` give `result` (scored as it is now): theirs, with the penalty of its lateness (a copy:
    the facts stay as they were read)."""
    handin = HandIn.from_dict(asdict(facts.handin)) if facts.handin is not None else None
    if handin is not None and facts.policy is not None:
        handin = with_penalty(handin, facts.policy, result.score, result.max_score)
    return handin


def finish(result: SubmissionResult, facts: RecordingFacts) -> Rendered:
    """Make `result` final (sanitised, the instructor's grades, the hand-in with its penalty) and render its
    files: the one way a result is finished, in a worker, on Dask or in the run (autograder.class_run)."""
    from autograder.reporting.student_page import render_report

    sanitize_record(result)
    # the instructor's grades first: they are part of the raw score the penalty is of
    result.apply_manual_grades(facts.manual_grades)
    result.handin = final_handin(result, facts)
    return Rendered(render_report(result), encode_result(result, *kept_under(result, facts.digest, facts.cache_key)))


def kept_under(result: SubmissionResult, digest: str | None, cache_key: str | None) -> tuple[str | None, str | None]:
    """The notebook digest and cache key `result`'s file keeps, given the run's (`digest`: the notebook as the run
    read it when it decided what to grade). When the engine graded other bytes (the file was replaced in between: a
    hand-in collected while the class is graded, or gone), the file keeps the digest of what was graded and no cache
    key: the next run grades the submission again, whatever is there then. Nor is a result cached that does not say
    what it graded (the engine's own error, an exception of ours or its memory limit while reading: graded again
    next run, as a worker that died is) or that was not graded for a reason of ours."""
    if result.graded_sha256 is None:
        return digest, None
    if result.graded_sha256 != digest:
        return result.graded_sha256 or None, None
    return digest, None if result.infrastructure_error else cache_key


def warm_up() -> None:
    """Import the student's page and compile its templates now (a worker does, while its warm sandbox parent
    starts), so that the first result is not kept waiting for them (0.1 s of one submission's run)."""
    from autograder.reporting.student_page import _env

    for name in ("report.html.j2", "base.html.j2"):  # the page's, and the one it extends (read as it renders)
        _env.get_template(name)


def warm_up_exports(assignments=()) -> None:
    """What a run does first after its first result, done while that submission is graded (a run on local workers
    calls this once, when one says it has started its first job: its imports are done, a core is free; a run on
    Dask or in this process does not): import the
    student's page (a report is written here), compile the class summary's templates, and build nbformat's schema
    validator for the notebooks of `assignments` that nbformat.read reads then (the release whose cells the
    gradebook records, the source that titles the pages; ~0.04 s), the one each of them is checked with. About
    0.1 s less after one submission's result. What fails here fails again where it is used, and is said there."""
    try:
        from autograder.reporting.class_summary import _env
        from autograder.reporting import student_page  # noqa: F401

        for name in ("summary.html.j2", "base.html.j2"):  # the summary's, and the one it extends (read as it renders)
            _env.get_template(name)
        notebooks = [path for a in assignments for path in (a.cells_notebook, a.source)]
        versions = {version for version in map(_nbformat_version, notebooks) if version is not None}
        if versions:
            from nbformat.validator import get_validator

            for version, minor in sorted(versions):
                get_validator(version, minor)  # nbformat.read's validate asks for this one (and keeps it)
    except Exception:  # noqa: BLE001
        pass


def _nbformat_version(path) -> tuple[int, int] | None:
    """(4, minor) of a notebook of version 4, as nbformat reads them (assignments.v4_minor); None for anything
    else (converted first, or refused: nothing to build in advance)."""
    from autograder.assignments import v4_minor

    try:
        minor = v4_minor(json.loads(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None
    return None if minor is None else (4, minor)


def checked(rendered, result: SubmissionResult, digest: str | None, cache_key: str | None) -> Rendered | None:
    """`rendered` as a worker sent it (a Rendered or its dict) if it has the shape of `result`'s files: text, its
    student and assignment, the digest and cache key this run sent; else None (the run renders them itself)."""
    if isinstance(rendered, dict):
        rendered = Rendered(rendered.get("report"), rendered.get("result_file"))
    if not isinstance(rendered, Rendered) or not isinstance(rendered.report, str) \
            or not isinstance(rendered.result_file, str) or len(rendered.report) > MAX_REPORT_CHARS:
        return None
    try:
        data = json.loads(rendered.result_file)
    except (ValueError, RecursionError):
        return None
    digest, cache_key = kept_under(result, digest, cache_key)
    expected = {"student_id": result.student_id, "assignment_id": result.assignment_id, "score": result.score,
                "notebook_sha256": digest, "cache_key": cache_key}
    if not isinstance(data, dict) or any(data.get(k) != v for k, v in expected.items()):
        return None
    return rendered


def finished(result: SubmissionResult, recording: dict | None) -> dict | None:
    """Where the result was graded: finish it with its recording facts and render its files (a dict of
    autograder.recording.rendered.Rendered); None when it has none, or when that fails (the run does it then)."""
    if recording is None:
        return None
    try:
        return asdict(finish(result, RecordingFacts.from_dict(recording)))
    except Exception:  # the run finishes and renders it itself, and records what goes wrong as its failure
        return None
