"""Naming a matched mistake in a check's failure; the catalogue itself (Variant, the shared families, each
assignment's VARIANTS) is autograder.catalogue, which imports no torch.
"""

from autograder.catalogue import (  # noqa: F401 (the check modules take the catalogue's names from here too)
    ATTENTION_AND_BYTE_SLIPS, FAMILIES, PRECISION, Variant, catalogue, explain, family, heading, lookup, variants_of,
)
from autograder.checks.probes import CheckFailed


def named(failure: CheckFailed, variant: Variant | None) -> CheckFailed:
    """`failure` with the mistake named, or unchanged when nothing matched."""
    if variant is None:
        return failure
    details = dict(failure.details, convention=True) if variant.convention else failure.details
    return CheckFailed(f"{failure.message}。{variant.explanation}", details, diagnosis=variant.name)
