"""What a grading job is: the options a class is graded under and one submission to grade (plain records: importing
this loads no torch, so that whoever only plans the grading, the CLI starting its workers, stays light)."""

from dataclasses import dataclass, field
from pathlib import Path

from autograder import REPO_ROOT
from autograder.running.sandbox.limits import Limits


@dataclass(frozen=True)
class GradingOptions:
    limits: Limits = field(default_factory=Limits)
    tier: str | None = None  # None: the strongest tier that works here
    allow_weak_sandbox: bool = False  # accept the rlimits-only tier when nothing stronger works
    convention_credit: float = 0.0  # share of a check's points kept when it fails only by another convention
    run_all_cells: bool = False  # also the instructor's demo cells left unchanged (autograder.intake.skipping)
    secret: bytes | None = None  # None: course_secret()
    root: Path = REPO_ROOT


@dataclass(frozen=True)
class Submission:
    notebook: Path
    assignment_id: str
    student_id: str
    recording: dict | None = None  # RecordingFacts as a dict: finish and render the result where it is graded
    # the secret its hidden inputs are drawn with, in place of the run's (GradingOptions.secret): the practice
    # attempts of the students' service (autograder.service.practice); None for every submission of a final grading
    secret: bytes | None = None


def options_to_payload(options: GradingOptions) -> dict:
    """Everything a worker elsewhere needs to grade exactly as here (the secret included: workers are trusted)."""
    from autograder.course import course_secret

    secret = options.secret or course_secret(options.root)
    return {"limits": options.limits.to_dict(), "tier": options.tier, "allow_weak_sandbox": options.allow_weak_sandbox,
            "convention_credit": options.convention_credit, "run_all_cells": options.run_all_cells,
            "secret": secret.hex()}


def options_from_payload(payload: dict) -> GradingOptions:
    return GradingOptions(limits=Limits(**payload["limits"]), tier=payload["tier"],
                          allow_weak_sandbox=payload["allow_weak_sandbox"],
                          convention_credit=payload["convention_credit"], run_all_cells=bool(payload["run_all_cells"]),
                          secret=bytes.fromhex(payload["secret"]))
