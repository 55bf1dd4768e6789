"""The attempt graded with the demo cells skipped stops at its first failure, undiagnosed (autograder.engine): it
is thrown away then, and the submission graded again with every cell. Unless its budget is spent: then it stands,
and every other check runs as always."""

import pytest

from inprocess_grading import grade_examples

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

EXAMPLE = "no_sqrt"  # rmsnorm's catalogued mistake: several checks fail, and the first failing names it


def graded(checks_of=None):
    (verdict,) = grade_examples(["rmsnorm"], names={EXAMPLE}, checks_of=checks_of)
    return verdict


def test_the_first_failure_stops_the_attempt_undiagnosed_and_a_spent_budget_completes_it():
    seen = {}

    def stopping(run_checks, context):
        seen["stopped"] = run_checks(context, stop_at_failure=lambda: True)
        return seen["stopped"]

    def spent(run_checks, context):
        asked = []
        seen["spent"] = run_checks(context, stop_at_failure=lambda: asked.append(1) or False)
        seen["asked"] = len(asked)
        return seen["spent"]

    full = graded()
    graded(stopping)
    graded(spent)
    assert len(full.failed) >= 2 and EXAMPLE in full.named  # the example is what this test needs

    stopped = seen["stopped"]
    # every check before the first failure passed; the failure is the last that ran, and names nothing
    assert all(o.passed for o in stopped[:-1]) and not stopped[-1].passed
    assert stopped[-1].spec.name in full.failed and stopped[-1].diagnosis is None
    assert len(stopped) < len(seen["spent"])
    # the student's message is the comparison's own (the full one adds the named mistake's explanation)
    assert full.messages[stopped[-1].spec.name].startswith(stopped[-1].message)

    # asked once (the budget is spent: the result stands), then every check ran, the later ones diagnosed as always
    spent_outcomes = {o.spec.name: o for o in seen["spent"]}
    assert seen["asked"] == 1
    assert sorted(n for n, o in spent_outcomes.items() if not o.passed) == full.failed
    first = stopped[-1].spec.name
    later = [n for n in full.failed if n != first]
    assert spent_outcomes[first].diagnosis is None
    assert any(spent_outcomes[n].diagnosis == EXAMPLE for n in later)
    assert all(spent_outcomes[n].message == full.messages[n] for n in later)
