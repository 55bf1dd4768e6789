"""The pieces of pytest the check runner needs, in one place.

`TestReport` is public API (`pytest.TestReport`). Running one collected item's setup, call and teardown again
for each submission has no public API: `runtestprotocol` is pytest's own (`_pytest.runner`), used by
plugins such as pytest-rerunfailures. `teardown_all` ends whatever the session still has set up (its
`SetupState`, which `runtestprotocol` leaves set up above an item when given a `nextitem` that shares it).
tests/test_pytest_adapter.py fails when pytest changes any of them.
"""

from pytest import TestReport

try:
    from _pytest.runner import runtestprotocol
except ImportError as exc:  # pragma: no cover - only with a pytest that moved it
    raise ImportError(f"this pytest has no _pytest.runner.runtestprotocol, which the grader needs: {exc}; "
                      "install a pytest the grader supports (pyproject.toml)") from None



def teardown_all(session) -> None:
    """Tear down every node the session still has set up (package, module), running their finalizers, as pytest
    does after its last item (`nextitem=None`)."""
    session._setupstate.teardown_exact(None)


__all__ = ["TestReport", "runtestprotocol", "teardown_all"]
