"""The README's sandbox tier table says what each tier protects against: every claim of every row is backed by
hostile-corpus cases that the row's tier runs (tests/test_hostile.py grades each case under each tier in its
`contained_by`). A claim the corpus cannot back, or a case the tier does not run, fails here."""

import re

import pytest

from autograder import REPO_ROOT
from hostile.corpus import CASES, CLAIMS, ROOT

BY_NAME = {c.name: c for c in CASES}


def tier_rows() -> dict[str, list[str]]:
    """tier -> the claims of its "protects against" cell, read from the README."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    header = "| tier | isolation | protects against | does not protect against |"
    assert header in text, "the README's tier table has changed its columns"
    rows = {}
    for line in text[text.index(header):].splitlines()[2:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        rows[cells[0].strip("`")] = [claim.strip() for claim in cells[2].split(";") if claim.strip()]
    return rows


def test_the_table_has_a_row_per_tier():
    from autograder.running.sandbox.tiers import TIERS

    assert sorted(tier_rows()) == sorted(TIERS)


@pytest.mark.parametrize("tier", sorted(tier_rows()))
def test_every_claim_of_the_row_is_backed_by_cases_the_tier_runs(tier):
    for claim in tier_rows()[tier]:
        qualifier = re.search(r"\(([^)]*)\)\s*$", claim)
        key = claim[:qualifier.start()].strip() if qualifier else claim
        assert key in CLAIMS, f"{tier}: the claim {claim!r} has no corpus cases (tests/hostile/corpus.py CLAIMS)"
        if qualifier and qualifier.group(1) == "as root" and not ROOT:
            continue  # the claim is only made for a grader that runs as root
        for name in CLAIMS[key]:
            assert name in BY_NAME, f"CLAIMS names a case that is not in the corpus: {name}"
            assert tier in BY_NAME[name].contained_by, f"{tier} claims {claim!r} but does not run {name}"
