"""The check runner's two pieces of pytest (autograder.checks.pytest_adapter) still work as the runner uses them.

The runner (autograder/checks/plugin.py) reruns a collected item with `runtestprotocol(item, log=False,
nextitem=None)` once per submission and builds its own `TestReport` positionally in
`pytest_runtest_makereport`. If a pytest release changes either, this test fails before a grading run does.
"""

import inspect

import pytest

from autograder.checks.pytest_adapter import TestReport, runtestprotocol


def test_the_adapter_exports_pytests_own_objects():
    import _pytest.runner

    assert TestReport is pytest.TestReport
    assert runtestprotocol is _pytest.runner.runtestprotocol
    assert list(inspect.signature(runtestprotocol).parameters) == ["item", "log", "nextitem"]
    assert list(inspect.signature(TestReport).parameters)[:10] == [
        "nodeid", "location", "keywords", "outcome", "longrepr", "when", "sections", "duration", "start", "stop"]


def test_an_item_runs_again_and_again_with_the_runners_own_reports(tmp_path):
    """What the runner does, in a real pytest session: rerun each item (fresh fixtures) and report it itself."""
    (tmp_path / "test_sample.py").write_text(
        "import pytest\n"
        "calls = []\n"
        "@pytest.fixture\n"
        "def fresh():\n"
        "    return []\n"
        "def test_passes(fresh):\n"
        "    fresh.append(1); calls.append(len(fresh))\n"
        "    assert fresh == [1]\n"
        "def test_fails():\n"
        "    assert False, 'nope'\n")
    seen = []

    class Runner:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session):
            for _ in range(3):  # three "submissions"
                for item in session.items:
                    item._initrequest()  # as plugin.py does before every rerun
                    reports = runtestprotocol(item, log=False, nextitem=None)
                    seen.append((item.name, [(r.when, r.outcome) for r in reports],
                                 all(isinstance(r, TestReport) for r in reports)))
            return True

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            outcome = "failed" if call.excinfo is not None else "passed"
            return TestReport(item.nodeid, item.location, {}, outcome, None, call.when, [], call.duration,
                              call.start, call.stop)

    code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path / "test_sample.py")],
                       plugins=[Runner()])
    assert code == 0
    assert len(seen) == 6
    for name, reports, typed in seen:
        assert typed
        assert [when for when, _ in reports] == ["setup", "call", "teardown"]
        expected = "passed" if name == "test_passes" else "failed"
        assert dict(reports)["call"] == expected
