"""Times as the course shows them: nbgrader's own display zone and format, read from the course's nbgrader_config.py.

    c.NbGraderAPI.timezone = "Asia/Shanghai"          # nbgrader's default: "UTC"
    c.NbGraderAPI.timestamp_format = "%Y-%m-%d %H:%M:%S %Z"   # nbgrader's default

These are the settings formgrader shows its times with (nbgrader.apps.api.NbGraderAPI: `timezone` "UTC" and
`timestamp_format` "%Y-%m-%d %H:%M:%S %Z" by default), so our pages and CSVs say the same times. Times are stored as
naive UTC (as nbgrader stores them); they are turned into the course's zone only where they are shown, always with the
zone's name: the format's `%Z` (e.g. "CST"), and the zone's own name after it when that does not appear already
("2026-12-02 02:09:00 CST (Asia/Shanghai)"), since abbreviations such as CST are ambiguous.
"""

from dataclasses import dataclass
from datetime import datetime, timezone

NBGRADER_TIMEZONE = "UTC"  # nbgrader 0.9.6's NbGraderAPI.timezone default
NBGRADER_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S %Z"  # nbgrader 0.9.6's NbGraderAPI.timestamp_format default


class TimeDisplayError(ValueError):
    """A display zone or format the course cannot use: the message names the setting."""


def named_zone(name: str):
    """The zone of that name (dateutil's), or None."""
    from dateutil.tz import gettz

    zone = gettz(name) if isinstance(name, str) and name.strip() else None
    return zone


@dataclass(frozen=True)
class TimeDisplay:
    timezone: str = NBGRADER_TIMEZONE
    timestamp_format: str = NBGRADER_TIMESTAMP_FORMAT

    def __post_init__(self):
        if named_zone(self.timezone) is None:
            raise TimeDisplayError(f"c.NbGraderAPI.timezone: unknown time zone {self.timezone!r} (use a name such as "
                                   "'Asia/Shanghai' or 'UTC')")
        if not isinstance(self.timestamp_format, str) or "%" not in self.timestamp_format:
            raise TimeDisplayError(f"c.NbGraderAPI.timestamp_format: {self.timestamp_format!r} is not a strftime "
                                   "format (e.g. '%Y-%m-%d %H:%M:%S %Z')")

    def local(self, moment: datetime) -> datetime:
        """A naive UTC time (as nbgrader stores it) in the display zone."""
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        return moment.astimezone(named_zone(self.timezone))

    def format(self, moment: datetime | None) -> str | None:
        """`moment` (naive UTC) as the course shows times, with the zone named."""
        if moment is None:
            return None
        text = self.local(moment).strftime(self.timestamp_format)
        if self.timezone not in text:
            text += f" ({self.timezone})"
        return text

    def format_stored(self, text: str | None) -> str | None:
        """A time as the results store it ("2026-12-01 18:09:00 UTC", ISO 8601, UTC) as the course shows times;
        anything else as it was."""
        if not text:
            return text
        try:
            moment = datetime.fromisoformat(text.removesuffix(" UTC").replace(" ", "T", 1))
        except ValueError:
            return text
        if moment.tzinfo is not None:
            moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
        return self.format(moment)


def display_of(timezone_name: str | None, timestamp_format: str | None) -> TimeDisplay:
    """The display a stored hand-in names (older results name none: nbgrader's default)."""
    try:
        return TimeDisplay(timezone_name or NBGRADER_TIMEZONE, timestamp_format or NBGRADER_TIMESTAMP_FORMAT)
    except TimeDisplayError:
        return TimeDisplay()
