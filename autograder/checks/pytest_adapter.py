"""The two pieces of pytest the check runner needs, in one place.

`TestReport` is public API (`pytest.TestReport`). Running one collected item's setup, call and teardown again
for each submission has no public API: `runtestprotocol` is pytest's own (`_pytest.runner`), used by
plugins such as pytest-rerunfailures. tests/test_pytest_adapter.py fails when pytest changes either.
"""

from pytest import TestReport

try:
    from _pytest.runner import runtestprotocol
except ImportError as exc:  # pragma: no cover - only with a pytest that moved it
    raise ImportError(f"this pytest has no _pytest.runner.runtestprotocol, which the grader needs: {exc}; "
                      "install a pytest the grader supports (pyproject.toml)") from None

__all__ = ["TestReport", "runtestprotocol"]
