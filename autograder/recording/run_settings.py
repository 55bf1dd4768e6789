"""The settings that change grades, kept in OUT/settings.json so that every run into one OUT grades alike.

    {"late_policy": {"method": ..., "points": ..., "percent": ..., "cap_percent": ...},
     "convention_credit": 0.0, "limits": {...Limits.to_dict()...}}

The first run into an OUT writes them. A later run reuses a stored setting it is not given: the late policy (given
by any `--late-*` flag or `c.Autograde.late_*` in nbgrader_config.py; compared as a whole), the convention credit,
and the cell, probe and submission budgets (`--cell-timeout`, `--probe-timeout`, `--submission-timeout` or
`c.Autograde.submission_timeout`). A given setting that differs from the stored one stops the run before grading,
with each difference named, unless the instructor accepts the new settings (`--accept-new-settings`), which then
replace the stored ones (and every stored result is re-assessed or regraded under them). The other limits are the
grader's own: a difference there (a new version) stops the run the same way.
"""

import json
from dataclasses import asdict
from pathlib import Path

from autograder.intake.late import LatePolicy
from autograder.recording.outputs import atomic_write

FILE = "settings.json"
# the settings an instructor gives (an option, nbgrader_config.py); any other is always this run's
SETTABLE = ("late_policy", "convention_credit", "limits.cell_timeout", "limits.probe_timeout",
            "limits.submission_timeout", "limits.submission_memory_bytes")


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


def reconcile(out: Path, now: dict, given: set[str], accept_new: bool = False,
              write: bool = True) -> tuple[dict, bool]:
    """This run's settings: `now` for what it was given (`given`: names of SETTABLE) and for the grader's own limits,
    OUT/settings.json's for every other settable one that is stored (`now`'s default where nothing is); stored when
    they differ from OUT/settings.json. Returns them and whether a given one changed what was stored.

    Raises SettingsChanged (before anything is graded) when a given setting, or one of the grader's own, differs
    from the stored one and `accept_new` is False. `write=False` (a dry run): checked the same way, never stored."""
    unknown = set(given) - set(SETTABLE)
    if unknown:
        raise ValueError(f"not settable: {sorted(unknown)}")
    try:
        stored = load(out)
    except SettingsChanged:
        if not accept_new:
            raise
        stored = {}
    resolved = json.loads(json.dumps(now))
    for group in SETTABLE:  # not given: the stored value, where there is one
        if group in given:
            continue
        head, _, leaf = group.partition(".")
        value = (stored or {}).get(head)
        if leaf:
            value = value.get(leaf) if isinstance(value, dict) else None
        usable = isinstance(value, dict) if group == "late_policy" else \
            isinstance(value, (int, float)) and not isinstance(value, bool)
        if usable:
            (resolved[head] if leaf else resolved)[leaf or head] = value
    changed = stored is not None and stored != resolved
    if changed and not accept_new:
        raise SettingsChanged(
            f"the settings that change grades differ from those {Path(out) / FILE} was graded with:\n  "
            + "\n  ".join(differences(stored, resolved))
            + "\nGrade with the stored settings (leave out the option, or the line in nbgrader_config.py), or pass "
              "--accept-new-settings to regrade OUT under the new ones")
    if stored != resolved and write:
        atomic_write(Path(out) / FILE, json.dumps(resolved, indent=1, sort_keys=True))
    return resolved, changed


def check_and_store(out: Path, now: dict, accept_new: bool = False) -> bool:
    """`reconcile` with every setting given: compare with OUT/settings.json and store `now` when there is nothing or
    `accept_new`; True if they changed. Raises SettingsChanged when they differ and `accept_new` is False."""
    return reconcile(out, now, set(SETTABLE), accept_new)[1]

