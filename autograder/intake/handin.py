"""How and when a submission was handed in: who wrote it, when, how late, and what that costs.

One function, `facts`, read once per submission before it is graded (autograder.class_run.facts_of), gives its
`HandIn` record (autograder.results) but the penalty, which `with_penalty` adds from the score where the result is
finished (autograder.recording.rendered.finish); `assess` is both at once, for one graded result. The rules:

- identity: judged only where ownership means something: the exchange's inbound folder of the submission is found
  (autograder.intake.exchange) and an OS user named like the student (or an owner named like another student of the
  roster) exists. Then every owner of the folder and its
  files must be that user; otherwise an `identity` flag, and a `feedback_withheld` flag: grading still runs, the
  instructor decides, and the report is kept out of nbgrader's feedback/ until they do (--release-flagged-feedback).
  An inbound folder but no OS user of that name (a course run as one user, a Docker spawner): `unverified`, and the
  feedback is written. A flat folder or an LMS download has no owner to judge: nothing is flagged.
- time: the student-written timestamp.txt is used when it agrees with the time the exchange saw the
  submission land (the latest ctime in its inbound folder) within `time_tolerance` seconds; otherwise
  the observed time is used and a `time` flag says so. Without an inbound folder, timestamp.txt is
  all there is (as with `nbgrader zip_collect`); an exchange whose inbound folder lacks the submission
  gives an `unverified` flag.
- lateness: against the assignment's due date in nbgrader's gradebook (`nbgrader db assignment add ID
  --duedate=...`) plus the student's extension there (`autograde extension`), with the late policy
  (autograder.intake.late) from the course's nbgrader_config.py, overridden by command-line flags.

Settings in the course's nbgrader_config.py (all optional):

    c.Autograde.late_policy = "percent_per_day"   # none | fixed | percent_per_hour | percent_per_day
    c.Autograde.late_percent = 10                 # percent of the maximum score per started hour/day
    c.Autograde.late_points = 2                   # for "fixed": points off when late
    c.Autograde.late_cap_percent = 50             # the total penalty at most this percent of the maximum
    c.Autograde.time_tolerance = 120              # seconds timestamp.txt may differ from the observed time
    c.Autograde.check_owner = True                # False where every student's files have one owner (Docker)
    c.Autograde.show_hand_answers_after_due = False  # True: reports rendered after the due date show the right hand answers

and nbgrader's own `c.Exchange.root` and `c.CourseDirectory.course_id` to find the exchange, and
`c.NbGraderAPI.timezone` / `.timestamp_format` for the times the flags and pages show (autograder.intake.local_time).
"""

import math
import pwd
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from autograder.course import UNSANDBOXED_NBGRADER_FLAG
from autograder.intake.exchange import ExchangeLocation, Provenance, match_inbound, provenance
from autograder.intake.late import LatePolicy, LatePolicyError, policy_from_settings
from autograder.results import (FLAG_FEEDBACK_WITHHELD, FLAG_IDENTITY, FLAG_TIME, FLAG_UNVERIFIED, Flag, HandIn,
                                          SubmissionResult)
from autograder.intake.local_time import (NBGRADER_TIMESTAMP_FORMAT, NBGRADER_TIMEZONE, TimeDisplay, TimeDisplayError,
                                          named_zone)

CONFIG_SECTION = "Autograde"
CONFIG_KEYS = {"late_policy": "method", "late_points": "points", "late_percent": "percent",
               "late_cap_percent": "cap_percent", "time_tolerance": None, "check_owner": None,
               "submission_timeout": None, "show_hand_answers_after_due": None}
DEFAULT_SUBMISSION_TIMEOUT = 300.0
DEFAULT_TIME_TOLERANCE = 120.0
NBGRADER_DEFAULT_EXCHANGE = "/srv/nbgrader/exchange"


class HandInError(Exception):
    """Bad settings for hand-in checks or the late policy: the message names the setting."""


@dataclass
class HandInOptions:
    """Command-line overrides of the course's settings (None: take the course's)."""

    late_policy: str | None = None
    late_points: float | None = None
    late_percent: float | None = None
    late_cap_percent: float | None = None
    time_tolerance: float | None = None
    exchange: Path | None = None
    course_id: str | None = None
    release_flagged_feedback: bool = False  # also put feedback of identity-flagged submissions into feedback/


@dataclass(frozen=True)
class HandInSettings:
    policy: LatePolicy = LatePolicy()
    exchange: ExchangeLocation | None = None
    time_tolerance: float = DEFAULT_TIME_TOLERANCE
    check_owner: bool = True
    release_flagged_feedback: bool = False
    display: TimeDisplay = TimeDisplay()  # how pages show times: c.NbGraderAPI.timezone, .timestamp_format
    roster: frozenset = frozenset()  # the course's student ids: an owner named like one is a student (identity)
    show_answers_after_due: bool = False  # c.Autograde.show_hand_answers_after_due: the reports' right hand answers
    exchange_timezone: str = NBGRADER_TIMEZONE  # c.Exchange.timezone: the zone of timestamp.txt's times (parse_time)


def load_course_config(course: Path):
    """The course's nbgrader_config.py as nbgrader reads it (traitlets), or an empty config."""
    from traitlets.config import Config
    from traitlets.config.loader import ConfigFileNotFound, PyFileConfigLoader

    if course is None or not (Path(course) / "nbgrader_config.py").is_file():
        return Config()
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    except ConfigFileNotFound:
        return Config()
    except Exception as exc:  # the instructor's file raised: say so, with the file
        raise HandInError(f"{Path(course) / 'nbgrader_config.py'}: cannot load it: {type(exc).__name__}: {exc}") \
            from None


# nbgrader's Autograde's own settings (`Autograde.class_trait_names(config=True)`), per nbgrader version: reading the
# course's settings, before any worker starts, then imports neither nbgrader's converters nor nbconvert (about 0.9 s
# of a one-submission run). tests/test_nbgrader_interop.py checks the installed version's entry against nbgrader's
# class; another version is asked its class.
NBGRADER_AUTOGRADE_KEYS = {
    "0.9.6": frozenset({"autograde_preprocessors", "create_student", "exclude_overwriting", "exporter_class", "force",
                        "permissions", "post_convert_hook", "pre_convert_hook", "sanitize_preprocessors"}),
}


def _installed_nbgrader_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("nbgrader")
    except metadata.PackageNotFoundError:
        return None


def _nbgrader_autograde_keys() -> set[str]:
    """What c.Autograde also holds for nbgrader itself: its Autograde's own settings (the course's
    autograde_preprocessors) and the switch of autograder.recording.nbgrader_guard."""
    known = NBGRADER_AUTOGRADE_KEYS.get(_installed_nbgrader_version())
    if known is None:
        from nbgrader.converters.autograde import Autograde

        known = Autograde.class_trait_names(config=True)
    return set(known) | {UNSANDBOXED_NBGRADER_FLAG}


def _section_value(section, key):
    return section[key] if key in section else None


def submission_timeout(course: Path | None, override: float | None = None) -> float:
    """The per-submission wall-clock budget: the command line's, else c.Autograde.submission_timeout, else 300 s."""
    where = f"{Path(course) / 'nbgrader_config.py'}" if course else "settings"
    if override is None:
        config = load_course_config(course)
        section = config[CONFIG_SECTION] if CONFIG_SECTION in config else {}
        override = section.get("submission_timeout", DEFAULT_SUBMISSION_TIMEOUT)
    else:
        where = "--submission-timeout"
    if isinstance(override, bool) or not isinstance(override, (int, float)) or not math.isfinite(override) \
            or override <= 0:
        raise HandInError(f"{where}: submission_timeout must be a number of seconds > 0, not {override!r}")
    return float(override)


def load_settings(course: Path | None, options: HandInOptions | None = None) -> HandInSettings:
    """Late policy, exchange and tolerances: the course's nbgrader_config.py, then the command-line flags."""
    options = options or HandInOptions()
    config = load_course_config(course)
    where = f"{Path(course) / 'nbgrader_config.py'}" if course else "settings"
    section = config[CONFIG_SECTION] if CONFIG_SECTION in config else {}
    unknown = sorted(set(section) - set(CONFIG_KEYS) - _nbgrader_autograde_keys())
    if unknown:
        raise HandInError(f"{where}: unknown setting(s) {', '.join(f'c.{CONFIG_SECTION}.{k}' for k in unknown)}; "
                          f"the settings are {', '.join(f'c.{CONFIG_SECTION}.{k}' for k in CONFIG_KEYS)}")
    policy_settings = {field: section[key] for key, field in CONFIG_KEYS.items() if field and key in section}
    flags = {"method": options.late_policy, "points": options.late_points, "percent": options.late_percent,
             "cap_percent": options.late_cap_percent}
    overridden = {k: v for k, v in flags.items() if v is not None}
    if "method" in overridden and overridden["method"] != policy_settings.get("method"):
        policy_settings = {}  # another method from the command line: the course's numbers belong to its own
    source = where + (" and the command line" if overridden else "")
    try:
        policy = policy_from_settings({**policy_settings, **overridden}, source)
    except LatePolicyError as exc:
        raise HandInError(str(exc)) from None

    tolerance = options.time_tolerance if options.time_tolerance is not None else section.get(
        "time_tolerance", DEFAULT_TIME_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) \
            or tolerance < 0:
        raise HandInError(f"{where}: time_tolerance must be a number of seconds >= 0, not {tolerance!r}")
    check_owner = section.get("check_owner", True)
    if not isinstance(check_owner, bool):
        raise HandInError(f"{where}: c.{CONFIG_SECTION}.check_owner must be True or False, not {check_owner!r}")

    show_answers = _show_answers(section, where)

    root = options.exchange
    if root is None and "Exchange" in config and "root" in config.Exchange:
        root = config.Exchange.root
    course_id = options.course_id
    if course_id is None and "CourseDirectory" in config and "course_id" in config.CourseDirectory:
        course_id = config.CourseDirectory.course_id
    exchange = None
    if course_id:
        exchange = ExchangeLocation(Path(root or NBGRADER_DEFAULT_EXCHANGE), str(course_id))
    elif options.exchange is not None:
        raise HandInError("--exchange needs the course id: set c.CourseDirectory.course_id in nbgrader_config.py "
                          "or pass --course-id")
    try:
        display = course_display(course)
    except TimeDisplayError as exc:
        raise HandInError(f"{where}: {exc}") from None
    exchange_zone = config.Exchange.timezone if "Exchange" in config and "timezone" in config.Exchange \
        else NBGRADER_TIMEZONE
    if not isinstance(exchange_zone, str) or _abbreviation(exchange_zone) or named_zone(exchange_zone) is None:
        raise HandInError(f"{where}: c.Exchange.timezone: unknown time zone {exchange_zone!r} (use a name such as "
                          "'Asia/Shanghai' or 'UTC')")
    return HandInSettings(policy, exchange, float(tolerance), check_owner, options.release_flagged_feedback, display,
                          show_answers_after_due=show_answers, exchange_timezone=exchange_zone)


def _show_answers(section, where: str) -> bool:
    value = section.get("show_hand_answers_after_due", False)
    if not isinstance(value, bool):
        raise HandInError(f"{where}: c.{CONFIG_SECTION}.show_hand_answers_after_due must be True or False, "
                          f"not {value!r}")
    return value


def show_hand_answers_after_due(course: Path) -> bool:
    """c.Autograde.show_hand_answers_after_due of the course's nbgrader_config.py (default False): may reports
    rendered after the due date show the right hand answers for the student's own numbers?"""
    config = load_course_config(course)
    return _show_answers(config[CONFIG_SECTION] if CONFIG_SECTION in config else {},
                         f"{Path(course) / 'nbgrader_config.py'}")


def os_user_exists(name: str) -> bool:
    """Is there an OS user of this name (whose files the exchange's inbound folder would show)?"""
    try:
        pwd.getpwnam(name)
        return True
    except (KeyError, ValueError, OSError):  # no such user; a name with NUL
        return False


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat(sep=" ", timespec="seconds") + " UTC" if moment is not None else None


class ZoneNotTheExchanges(ValueError):
    """A timestamp's zone abbreviation that is not c.Exchange.timezone's (parse_time)."""


def parse_time(text: str, zone: str = NBGRADER_TIMEZONE) -> datetime:
    """nbgrader's own reading of a timestamp (naive UTC), but for a zone written as an abbreviation that names no
    zone file. nbgrader's exchange writes `%Z` of c.Exchange.timezone ("2026-10-15 23:58:00.500000 CST" for
    Asia/Shanghai), and dateutil reads such an abbreviation in the grading machine's own zone when that zone has it
    (CST: Shanghai's, or Chicago's) and as UTC otherwise: the lateness would depend on where the grader runs. Here it
    is read in `zone` (c.Exchange.timezone) when it is that zone's abbreviation at that time, else refused
    (ValueError, with why)."""
    from nbgrader.utils import parse_utc

    parts = text.strip().split(" ")
    if len(parts) == 3 and _abbreviation(parts[2]):
        wall, where = parse_utc(" ".join(parts[:2])), named_zone(zone)  # the time as written, naive
        for fold in (0, 1):  # the hour a clock goes back shows twice: CDT, then CST
            moment = wall.replace(tzinfo=where, fold=fold) if where is not None else None
            if moment is not None and moment.tzname() == parts[2]:
                return moment.astimezone(timezone.utc).replace(tzinfo=None)
        raise ZoneNotTheExchanges(f"its zone {parts[2]!r} is not what c.Exchange.timezone ({zone}) is called at "
                                  "that time")
    return parse_utc(text.strip())


def _abbreviation(name: str) -> bool:
    """A zone written as an abbreviation no zone file has ("CST", "PDT"): what dateutil reads by the machine's zone."""
    if name.upper() in ("UTC", "GMT", "Z") or name.lstrip("+-").isdigit():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return True
    return False


MISSING_TIMESTAMP = Flag(FLAG_TIME, "the submission has no timestamp.txt: when it was handed in is unknown",
                         "提交中没有 timestamp.txt，提交时间未知")


def _student_timestamp(folder: Path | None, zone: str = NBGRADER_TIMEZONE) -> tuple[datetime | None, Flag | None]:
    """What timestamp.txt says (`zone`: c.Exchange.timezone, see parse_time), or the flag saying it is absent
    (MISSING_TIMESTAMP) or unreadable."""
    if folder is None:
        return None, None
    path = folder / "timestamp.txt"
    try:
        if not path.is_symlink() and not path.exists():
            return None, MISSING_TIMESTAMP
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1000:
            raise ValueError
        text = path.read_text(encoding="utf-8", errors="replace")
        return parse_time(text, zone), None
    except FileNotFoundError:
        return None, MISSING_TIMESTAMP
    except ZoneNotTheExchanges as exc:
        return None, Flag(FLAG_TIME, f"timestamp.txt cannot be read as a time: {exc} (set c.Exchange.timezone in "
                          "nbgrader_config.py to the zone the exchange writes times in)",
                          "提交中的 timestamp.txt 不是一个有效的时间")
    except (OSError, ValueError, OverflowError):
        return None, Flag(FLAG_TIME, "timestamp.txt cannot be read as a time",
                          "提交中的 timestamp.txt 不是一个有效的时间")


def assess(result: SubmissionResult, folder: Path | None, notebook: Path | None, settings: HandInSettings,
           due: datetime | None, extension: timedelta | None) -> HandIn | None:
    """The hand-in record of one graded submission (None: nothing is known about its hand-in)."""
    handin = facts(result.student_id, result.assignment_id, folder, notebook, settings, due, extension)
    return with_penalty(handin, settings.policy, result.score, result.max_score) if handin is not None else None


def with_penalty(handin: HandIn, policy: LatePolicy, score: float, max_score: float) -> HandIn:
    """`handin` with the penalty its lateness costs a submission of `score` out of `max_score`."""
    handin.penalty = policy.penalty(score, max_score, handin.seconds_late)
    return handin


LMS_LATE_SECONDS = 1.0  # an LMS's late mark without a time: late by the least the policy counts (one started unit)


def facts(student_id: str, assignment_id: str, folder: Path | None, notebook: Path | None, settings: HandInSettings,
          due: datetime | None, extension: timedelta | None, lms_late: bool = False) -> HandIn | None:
    """What `assess` finds before the submission is graded: everything but the penalty (`with_penalty`, from the
    score), so that the hand-in can travel with the job and the record be finished where it is graded.

    `lms_late`: the LMS marked the file late (Canvas's `_late`) and says nothing of when it came: it is late (by the
    least the policy counts: one started hour or day, or the fixed points), and flagged `time`."""
    shown = settings.display.format
    student_ts, ts_flag = _student_timestamp(folder, settings.exchange_timezone)
    absent = ts_flag is MISSING_TIMESTAMP
    flags = [ts_flag] if ts_flag and not (absent and due is None) else []  # absent: said where lateness counts
    prov: Provenance | None = None
    if folder is not None and settings.exchange is not None and settings.exchange.inbound.is_dir():
        inbound = match_inbound(settings.exchange, student_id, assignment_id, folder, notebook)
        if inbound is None:
            flags.append(Flag(FLAG_UNVERIFIED,
                              f"no folder in {settings.exchange.inbound} matches this submission's timestamp.txt: "
                              "who wrote it and when cannot be checked",
                              "在交换目录中找不到这份提交的原件，无法核对提交者和提交时间"))
        else:
            try:
                prov = provenance(inbound)
            except OSError as exc:
                flags.append(Flag(FLAG_UNVERIFIED, f"cannot read {inbound}: {exc.strerror}",
                                  "无法读取这份提交在交换目录中的原件"))
    if folder is None and due is None and not lms_late:
        return None

    if prov is not None and settings.check_owner and set(prov.owners) != {student_id}:
        students_wrote = any(owner in settings.roster for owner in prov.owners)  # another student's OS user
        if not os_user_exists(student_id) and not students_wrote:  # ownership says nothing: some other owner
            flags.append(Flag(FLAG_UNVERIFIED,
                              f"no OS user is named {student_id!r} (the files are the OS user(s) "
                              f"{', '.join(prov.owners)}'s): who wrote it cannot be checked; its feedback is written",
                              "系统中没有与学号同名的用户，无法核对提交者"))
        else:
            flags.append(Flag(FLAG_IDENTITY,
                              f"submitted under the id {student_id!r} but written by the OS user(s) "
                              f"{', '.join(prov.owners)}",
                              f"这份以学号 {student_id} 提交的作业由系统用户 {', '.join(prov.owners)} 写入，"
                              "与学号不符；成绩待老师核实"))
            if not settings.release_flagged_feedback:
                flags.append(Flag(FLAG_FEEDBACK_WITHHELD,
                                  f"its report is not put into nbgrader's feedback/ (it would go to whoever made the "
                                  f"submission, OS user(s) {', '.join(prov.owners)}): check it, then grade again with "
                                  "--release-flagged-feedback",
                                  "反馈暂不发布，待老师核实提交者"))

    submitted, source = student_ts, "timestamp.txt" if student_ts else "none"
    if prov is not None:
        if student_ts is None or abs((student_ts - prov.observed_at).total_seconds()) > settings.time_tolerance:
            submitted, source = prov.observed_at, "exchange"
            if absent:
                flags = [f for f in flags if f is not MISSING_TIMESTAMP]  # the exchange's time is known: said below
            said = f"says {shown(student_ts)}" if student_ts else "is missing" if absent else "is unreadable"
            flags.append(Flag(FLAG_TIME,
                              f"timestamp.txt {said}, but the exchange saw the submission land at "
                              f"{shown(prov.observed_at)}; the observed time is used",
                              f"提交中的 timestamp.txt 与交换目录记录的提交时间（{shown(prov.observed_at)}）不符；"
                              "以交换目录记录的时间为准"))

    due_with_extension = due + extension if due is not None and extension else due
    seconds_late = max(0.0, (submitted - due_with_extension).total_seconds()) \
        if submitted is not None and due_with_extension is not None else 0.0
    if lms_late and submitted is None:
        seconds_late = max(seconds_late, LMS_LATE_SECONDS)
        flags = [f for f in flags if f is not MISSING_TIMESTAMP]
        flags.append(Flag(FLAG_TIME,
                          "the LMS marks it late (Canvas: `_late` in its file name) but the download does not say when "
                          "it was handed in: counted late by the least the late policy counts (one started hour or "
                          "day); its time is in the LMS (SpeedGrader)",
                          "LMS 标记这份作业为迟交，但下载中没有提交时间：按最少的迟交计算（不足 1 小时或 1 天按 1 计）"))
    return HandIn(
        submitted_at=_iso(submitted), submitted_exact=submitted.isoformat() if submitted is not None else None,
        time_source=source, student_timestamp=_iso(student_ts),
        observed_at=_iso(prov.observed_at) if prov else None,
        submitter=", ".join(prov.owners) if prov else None, inbound=prov.folder.name if prov else None,
        due=_iso(due_with_extension), extension_seconds=extension.total_seconds() if extension else 0.0,
        seconds_late=seconds_late, penalty=0.0, policy=settings.policy.describe(),
        policy_zh=settings.policy.describe_zh(), flags=flags, lms_late=lms_late and submitted is None,
        timezone=settings.display.timezone, timestamp_format=settings.display.timestamp_format,
        show_answers_after_due=settings.show_answers_after_due,
    )


def from_iso(text: str | None) -> datetime | None:
    """A time written by `_iso` back to naive UTC."""
    if not text:
        return None
    return datetime.fromisoformat(text.removesuffix(" UTC"))


def course_display(course) -> TimeDisplay:
    """c.NbGraderAPI.timezone and .timestamp_format of the course's nbgrader_config.py, else nbgrader's defaults."""
    config = load_course_config(course)
    section = config["NbGraderAPI"] if "NbGraderAPI" in config else {}
    return TimeDisplay(section.get("timezone", NBGRADER_TIMEZONE),
                       section.get("timestamp_format", NBGRADER_TIMESTAMP_FORMAT))
