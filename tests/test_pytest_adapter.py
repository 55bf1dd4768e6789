"""The check runner's two pieces of pytest (autograder.checks.pytest_adapter) still work as the runner uses them.

The runner (autograder/checks/plugin.py) reruns a collected item with `runtestprotocol(item, log=False,
nextitem=...)` once per submission (nextitem: another check of the same module, so that only the check's own node
is torn down; `teardown_all` ends the rest after the submission's last check) and builds its own `TestReport`
positionally in `pytest_runtest_makereport`. If a pytest release changes any of them, this test fails before a
grading run does.
"""

import inspect

import pytest

from autograder.checks.pytest_adapter import TestReport, runtestprotocol, teardown_all


def test_the_adapter_exports_pytests_own_objects():
    import _pytest.runner

    assert TestReport is pytest.TestReport
    assert runtestprotocol is _pytest.runner.runtestprotocol
    assert list(inspect.signature(runtestprotocol).parameters) == ["item", "log", "nextitem"]
    assert list(inspect.signature(_pytest.runner.SetupState.teardown_exact).parameters) == ["self", "nextitem"]
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


def test_with_a_sibling_as_nextitem_each_check_ends_its_own_fixtures_and_teardown_all_ends_the_module(tmp_path):
    """As the runner grades: every check's fixtures (function scope) are made fresh and finalized after it, even
    though the module stays set up between two checks of one submission; `teardown_all` finalizes the module after
    the submission's last check, so nothing set up for one submission is there for the next."""
    (tmp_path / "test_sibling_sample.py").write_text(
        "import pytest\n"
        "events = []\n"
        "@pytest.fixture(scope='module')\n"
        "def module_level():\n"
        "    events.append('module up')\n"
        "    yield\n"
        "    events.append('module down')\n"
        "@pytest.fixture\n"
        "def fresh(module_level):\n"
        "    box = []\n"
        "    events.append('fresh up')\n"
        "    yield box\n"
        "    events.append('fresh down %d' % len(box))\n"
        "def test_a(fresh):\n"
        "    fresh.append(1)\n"
        "    assert fresh == [1]\n"
        "def test_b(fresh):\n"
        "    fresh.append(2)\n"
        "    assert fresh == [2]\n")
    outcomes, events = [], []

    class Runner:
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtestloop(self, session):
            items = session.items
            assert len(items) == 2, 'the sample module was not collected'
            for _ in range(2):  # two "submissions"
                for item in items:
                    item._initrequest()
                    sibling = items[1] if item is items[0] else items[0]
                    outcomes.append([r.outcome for r in runtestprotocol(item, log=False, nextitem=sibling)])
                events.append(list(item.module.events))
                teardown_all(session)
                events.append(list(item.module.events))
                item.module.events.clear()
            return True

    code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path / "test_sibling_sample.py")],
                       plugins=[Runner()])
    assert code == 0
    assert outcomes == [["passed"] * 3] * 4
    during = ["module up", "fresh up", "fresh down 1", "fresh up", "fresh down 1"]
    assert events == [during, during + ["module down"]] * 2
