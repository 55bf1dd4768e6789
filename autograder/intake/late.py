"""The late-work policy: how many points a late submission loses.

    none              no penalty (the default)
    fixed             `points` off once, however late
    percent_per_hour  `percent` % of the assignment's maximum score off for every started hour late
    percent_per_day   `percent` % of the maximum off for every started day (24 h) late

A started hour or day counts in full: one second late is one hour (or day) late. `cap_percent` caps the
total penalty at that percentage of the maximum score. The penalty never exceeds the raw score (the
final score is never negative). Lateness is measured against the due date plus the student's extension,
both from nbgrader's gradebook.
"""

import math
from dataclasses import dataclass

METHODS = ("none", "fixed", "percent_per_hour", "percent_per_day")
UNIT_SECONDS = {"percent_per_hour": 3600.0, "percent_per_day": 86400.0}


class LatePolicyError(ValueError):
    """A misconfigured late policy: the message says which setting and what is allowed."""


@dataclass(frozen=True)
class LatePolicy:
    method: str = "none"
    points: float = 0.0  # fixed: points off
    percent: float = 0.0  # percent_per_hour / percent_per_day: percent of the maximum score per started unit
    cap_percent: float | None = None  # at most this percent of the maximum score in all (None: no cap)

    def __post_init__(self):
        where = "late policy"
        if self.method not in METHODS:
            raise LatePolicyError(f"{where}: unknown method {self.method!r}; use one of {', '.join(METHODS)}")
        for name in ("points", "percent", "cap_percent"):
            value = getattr(self, name)
            if value is None and name == "cap_percent":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise LatePolicyError(f"{where}: {name} must be a number, not {value!r}")
            if value < 0:
                raise LatePolicyError(f"{where}: {name} must not be negative (got {value:g})")
        if self.method == "fixed" and self.points <= 0:
            raise LatePolicyError(f"{where}: method 'fixed' needs points > 0 (the points taken off a late submission)")
        if self.method in UNIT_SECONDS and not 0 < self.percent <= 100:
            raise LatePolicyError(f"{where}: method {self.method!r} needs 0 < percent <= 100 (percent of the maximum "
                                  f"score per started {'hour' if self.method == 'percent_per_hour' else 'day'})")
        if self.cap_percent is not None and not 0 < self.cap_percent <= 100:
            raise LatePolicyError(f"{where}: cap_percent must be in (0, 100] (percent of the maximum score), "
                                  f"got {self.cap_percent:g}")

    def describe(self) -> str:
        text = {
            "none": "no late penalty",
            "fixed": f"{self.points:g} points off if late",
            "percent_per_hour": f"{self.percent:g}% of the maximum per started hour late",
            "percent_per_day": f"{self.percent:g}% of the maximum per started day late",
        }[self.method]
        if self.cap_percent is not None and self.method != "none":
            text += f", at most {self.cap_percent:g}%"
        return text

    def describe_zh(self) -> str:
        text = {
            "none": "迟交不扣分",
            "fixed": f"迟交扣 {self.points:g} 分",
            "percent_per_hour": f"每迟交 1 小时（不足 1 小时按 1 小时计）扣满分的 {self.percent:g}%",
            "percent_per_day": f"每迟交 1 天（不足 1 天按 1 天计）扣满分的 {self.percent:g}%",
        }[self.method]
        if self.cap_percent is not None and self.method != "none":
            text += f"，最多扣满分的 {self.cap_percent:g}%"
        return text

    def penalty(self, raw_score: float, max_score: float, seconds_late: float) -> float:
        """Points off for a submission `seconds_late` after its due date; 0 <= penalty <= raw score."""
        if seconds_late <= 0 or self.method == "none":
            return 0.0
        if self.method == "fixed":
            points = self.points
        else:
            units = math.ceil(seconds_late / UNIT_SECONDS[self.method])
            points = self.percent / 100.0 * max_score * units
        if self.cap_percent is not None:
            points = min(points, self.cap_percent / 100.0 * max_score)
        return round(max(0.0, min(points, max(raw_score, 0.0))), 6)


def policy_from_settings(settings: dict, source: str) -> LatePolicy:
    """A policy from `{"method": ..., "points": ..., ...}`; errors name `source` (the file or the flags)."""
    allowed = {"method", "points", "percent", "cap_percent"}
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise LatePolicyError(f"{source}: unknown late-policy setting(s) {', '.join(unknown)}; "
                              f"the settings are {', '.join(sorted(allowed))}")
    try:
        return LatePolicy(**settings)
    except LatePolicyError as exc:
        raise LatePolicyError(f"{source}: {exc}") from None
