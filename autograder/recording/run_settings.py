"""The settings that change grades, kept in OUT/settings.json so that every run into one OUT grades alike.

    {"late_policy": {"method": ..., "points": ..., "percent": ..., "cap_percent": ...},
     "convention_credit": 0.0, "limits": {...Limits.to_dict()...}}

The first run into an OUT writes them; a later run whose settings differ stops before grading and names each
difference, unless the instructor accepts the new settings (`--accept-new-settings`), which then replace the
stored ones (and every stored result is re-assessed or regraded under them).
"""

import json
from dataclasses import asdict
from pathlib import Path

from autograder.intake.late import LatePolicy
from autograder.recording.outputs import atomic_write

FILE = "settings.json"


class SettingsChanged(Exception):
    """This run's settings differ from OUT/settings.json: the message lists the differences."""


def _number(value):
    """8 and 8.0 are one setting (nbgrader_config.py, a flag and the API may write either): integral floats as int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def grade_settings(policy: LatePolicy, convention_credit: float, limits: dict) -> dict:
    return {"late_policy": {k: _number(v) for k, v in asdict(policy).items()},
            "convention_credit": _number(float(convention_credit)),
            "limits": {k: _number(v) for k, v in dict(limits).items()}}


def _flatten(data, prefix=""):
    if isinstance(data, dict):
        items = {}
        for key, value in data.items():
            items.update(_flatten(value, f"{prefix}{key}."))
        return items
    return {prefix.rstrip("."): data}


def differences(stored: dict, now: dict) -> list[str]:
    """'limits.cell_timeout: 30.0 (stored) -> 8.0 (this run)' per setting that differs."""
    old, new = _flatten(stored), _flatten(now)
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key, "(not set)") != new.get(key, "(not set)"):
            lines.append(f"{key}: {old.get(key, '(not set)')!r} (stored) -> {new.get(key, '(not set)')!r} (this run)")
    return lines


def load(out: Path) -> dict | None:
    try:
        data = json.loads((Path(out) / FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError:
        raise SettingsChanged(f"{Path(out) / FILE} is not valid JSON: fix or delete it, or pass "
                              "--accept-new-settings to replace it with this run's settings") from None
    return data if isinstance(data, dict) else None


def check_and_store(out: Path, now: dict, accept_new: bool = False) -> bool:
    """Compare with OUT/settings.json and store `now` when there is nothing or `accept_new`; True if they changed.

    Raises SettingsChanged (before anything is graded) when they differ and `accept_new` is False."""
    try:
        stored = load(out)
    except SettingsChanged:
        if not accept_new:
            raise
        stored = {}
    changed = stored is not None and stored != now
    if changed and not accept_new:
        raise SettingsChanged(
            f"the settings that change grades differ from those {Path(out) / FILE} was graded with:\n  "
            + "\n  ".join(differences(stored, now))
            + "\nGrade with the stored settings, or pass --accept-new-settings to regrade OUT under the new ones")
    if stored != now:
        atomic_write(Path(out) / FILE, json.dumps(now, indent=1, sort_keys=True))
    return changed
