"""OUT/settings.json: written by the first run, a difference stops the next one with every difference named."""

import json

import pytest

from autograder.intake.late import LatePolicy
from autograder.recording.run_settings import SettingsChanged, check_and_store, grade_settings
from autograder.running.sandbox.limits import Limits


def settings(**limits):
    return grade_settings(LatePolicy("percent_per_day", percent=10), 0.5, Limits(**limits).to_dict())


def test_first_run_stores_then_a_difference_stops_with_each_setting(tmp_path):
    assert check_and_store(tmp_path, settings()) is False
    assert json.loads((tmp_path / "settings.json").read_text())["late_policy"]["percent"] == 10
    assert check_and_store(tmp_path, settings()) is False  # the same: nothing to say
    other = grade_settings(LatePolicy("fixed", points=2), 0.0, Limits(cell_timeout=9).to_dict())
    with pytest.raises(SettingsChanged) as stop:
        check_and_store(tmp_path, other)
    message = str(stop.value)
    for line in ("late_policy.method: 'percent_per_day' (stored) -> 'fixed' (this run)",
                 "late_policy.points: 0 (stored) -> 2 (this run)", "convention_credit: 0.5 (stored) -> 0 (this run)",
                 "limits.cell_timeout: 30 (stored) -> 9 (this run)", "--accept-new-settings"):
        assert line in message
    assert json.loads((tmp_path / "settings.json").read_text())["late_policy"]["method"] == "percent_per_day"
    assert check_and_store(tmp_path, other, accept_new=True) is True
    assert json.loads((tmp_path / "settings.json").read_text())["late_policy"]["method"] == "fixed"


def test_a_new_limit_shows_as_a_difference_and_integral_floats_are_ints(tmp_path):
    stored = settings()
    del stored["limits"]["processes"]  # as if written before that limit existed
    (tmp_path / "settings.json").write_text(json.dumps(stored))
    with pytest.raises(SettingsChanged, match=r"limits.processes: '\(not set\)' \(stored\) -> 64 \(this run\)"):
        check_and_store(tmp_path, settings())
    assert settings(cell_timeout=8) == settings(cell_timeout=8.0)


def test_a_broken_settings_file_is_a_clear_error(tmp_path):
    (tmp_path / "settings.json").write_text("{not json")
    with pytest.raises(SettingsChanged, match="not valid JSON"):
        check_and_store(tmp_path, settings())
    assert check_and_store(tmp_path, settings(), accept_new=True) is True  # replaced
    assert json.loads((tmp_path / "settings.json").read_text()) == settings()


def test_a_setting_not_given_is_the_stored_one_and_only_a_given_difference_stops(tmp_path):
    from autograder.recording.run_settings import SETTABLE, reconcile

    graded = grade_settings(LatePolicy("fixed", points=2), 0.5, Limits(cell_timeout=8).to_dict())
    assert reconcile(tmp_path, graded, set(SETTABLE)) == (graded, False)
    defaults = grade_settings(LatePolicy(), 0.0, Limits().to_dict())  # a plain run: nothing given
    settings, changed = reconcile(tmp_path, defaults, set())
    assert (settings, changed) == (graded, False)
    # given: the late policy only (another one) -> stops, naming it; the rest stays stored
    other = grade_settings(LatePolicy("percent_per_day", percent=10), 0.0, Limits().to_dict())
    with pytest.raises(SettingsChanged) as stop:
        reconcile(tmp_path, other, {"late_policy"})
    assert "late_policy.method: 'fixed' (stored) -> 'percent_per_day' (this run)" in str(stop.value)
    assert "cell_timeout" not in str(stop.value) and "convention_credit" not in str(stop.value)
    settings, changed = reconcile(tmp_path, other, {"late_policy"}, accept_new=True)
    assert changed and settings["late_policy"]["method"] == "percent_per_day"
    assert settings["limits"]["cell_timeout"] == 8 and settings["convention_credit"] == 0.5
    assert json.loads((tmp_path / "settings.json").read_text()) == settings
    # the grader's own limits are never "not given": a new one still shows as a difference
    newer = grade_settings(LatePolicy(), 0.0, Limits(processes=32).to_dict())
    with pytest.raises(SettingsChanged, match=r"limits.processes: 64 \(stored\) -> 32 \(this run\)"):
        reconcile(tmp_path, newer, set())
