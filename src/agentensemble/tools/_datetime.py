"""`DateTimeTool` (``datetime``): the current date and time, date arithmetic and time-zone
conversion (BEHAVIOUR 7.7).

Commands (keywords and units are case-insensitive, time-zone names are not) and what they
return, for a clock reading 2024-03-15 10:30:00 UTC:

- ``now`` -> ``2024-03-15T10:30:00 UTC``
- ``now in Asia/Tokyo`` -> ``2024-03-15T19:30:00+09:00 Asia/Tokyo`` (ISO-8601 with offset,
  then the zone)
- ``today`` -> ``2024-03-15`` (the UTC date); ``today in Pacific/Kiritimati`` -> ``2024-03-16``
- ``2024-01-31 + 1 month`` (days, weeks, months, years; singular or plural) -> ``2024-02-29``
- ``2024-03-15T10:30:00 - 90 minutes`` (hours, minutes, seconds) -> ``2024-03-15T09:00:00Z``
- ``convert 2024-03-15T10:30 from UTC to America/New_York`` ->
  ``2024-03-15T06:30:00-04:00 America/New_York``

``today`` and ``now`` may stand for the date or date-time of an arithmetic command. A date-time
without an offset is taken as UTC; one with an offset is converted to UTC first. Adding
hours, minutes or seconds to a date starts from its midnight UTC; date units added to a
date-time keep the time of day. Months and years clamp to the last day of the month
(Jan 31 + 1 month is Feb 28 or 29), as ``java.time`` does. Results are to the second.
`convert` reads a local date-time (no offset) in the source zone; a time skipped by a
daylight-saving change is moved forward by the length of the gap, an ambiguous one takes
the earlier offset. Zones are IANA names (``Europe/Paris``) or ``UTC``.
"""

from __future__ import annotations

import calendar
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Annotated, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field

from agentensemble.errors import ToolConfigurationError, ValidationError
from agentensemble.tools._function import tool
from agentensemble.tools._result import ToolResult

__all__ = ["DateTimeTool"]

Clock = Callable[[], datetime]
"""Returns the current instant as an aware datetime."""

MAX_COMMAND_LENGTH = 500

_D = TypeVar("_D", bound=date)

SUPPORTED = (
    "'now', 'now in <timezone>', 'today', 'today in <timezone>', "
    "'<YYYY-MM-DD> +/- <N> days|weeks|months|years', "
    "'<YYYY-MM-DDTHH:MM:SS> +/- <N> hours|minutes|seconds', "
    "'convert <YYYY-MM-DDTHH:MM:SS> from <timezone> to <timezone>'"
)
UNRECOGNIZED = f"Unrecognized command. Supported: {SUPPORTED}"

_NOW = re.compile(r"now(?:\s+in\s+(?P<zone>\S+))?", re.IGNORECASE)
_TODAY = re.compile(r"today(?:\s+in\s+(?P<zone>\S+))?", re.IGNORECASE)
_ARITHMETIC = re.compile(
    r"(?P<base>\S+)\s+(?P<sign>[+-])\s*(?P<amount>[0-9]+)\s+(?P<unit>[a-z]+)", re.IGNORECASE
)
_CONVERT = re.compile(
    r"convert\s+(?P<moment>.+?)\s+from\s+(?P<source>\S+)\s+to\s+(?P<target>\S+)",
    re.IGNORECASE,
)

_DATE_UNITS = {"day": "days", "week": "weeks", "month": "months", "year": "years"}
_TIME_UNITS = {"hour": "hours", "minute": "minutes", "second": "seconds"}


class DateTimeError(Exception):
    """A command that cannot be answered; the message is shown to the model."""


class DateTimeTool:
    """Give it to an agent (``tools=[DateTimeTool()]``) so that it knows the current date
    and time and computes dates instead of guessing.

    `clock` returns the current instant as an aware datetime (default: the system clock in
    UTC); pass a fixed one in tests. See the module documentation for the commands.
    """

    def __init__(self, clock: Clock | None = None) -> None:
        if clock is not None and not callable(clock):
            raise ValidationError(
                f"DateTimeTool clock must be a callable returning an aware datetime, got: {clock!r}"
            )
        self.clock: Clock = clock or _system_clock

    def __repr__(self) -> str:
        return "DateTimeTool()"

    @tool(name="datetime")
    def datetime(
        self,
        command: Annotated[
            str,
            Field(
                description=(
                    "One of: 'now', 'now in Europe/Paris', 'today', 'today in Asia/Tokyo', "
                    "'2024-01-31 + 1 months', '2024-03-15T10:30:00 - 2 hours', "
                    "'convert 2024-03-15T10:30:00 from UTC to America/New_York'"
                )
            ),
        ],
    ) -> ToolResult:
        """Get the current date or time (in UTC or a time zone), add or subtract days,
        weeks, months, years, hours, minutes or seconds, or convert a date-time between
        time zones (IANA names such as Europe/London, or UTC)."""
        try:
            return ToolResult.success(_answer(command.strip(), _Now(self.clock)))
        except DateTimeError as error:
            return ToolResult.failure(str(error))


def _system_clock() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class _Now:
    """Reads the clock, checked and in UTC."""

    clock: Clock

    def __call__(self) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime) or now.utcoffset() is None:
            # a broken setup, not something the model can fix: fail the task
            raise ToolConfigurationError(
                f"DateTimeTool clock must return an aware datetime, got: {now!r}"
            )
        return now.astimezone(UTC).replace(microsecond=0)


def _answer(command: str, now: _Now) -> str:
    if not command:
        raise DateTimeError("Command must not be blank")
    if len(command) > MAX_COMMAND_LENGTH:
        raise DateTimeError(
            f"Command is too long ({len(command)} characters; the limit is {MAX_COMMAND_LENGTH})"
        )
    if match := _NOW.fullmatch(command):
        zone_name = match["zone"]
        return _utc_label(now()) if zone_name is None else _zoned(now(), _zone(zone_name))
    if match := _TODAY.fullmatch(command):
        zone_name = match["zone"]
        moment = now() if zone_name is None else now().astimezone(_zone(zone_name))
        return moment.date().isoformat()
    if match := _CONVERT.fullmatch(command):
        return _convert(match["moment"], match["source"], match["target"])
    if match := _ARITHMETIC.fullmatch(command):
        return _shift(match, now)
    raise DateTimeError(UNRECOGNIZED)


def _shift(match: re.Match[str], now: _Now) -> str:
    unit = _unit(match["unit"])
    amount = int(match["amount"]) * (-1 if match["sign"] == "-" else 1)
    start = _operand(match["base"], now)
    try:
        return _add(start, amount, unit)
    except (OverflowError, ValueError):
        raise DateTimeError("Result is outside the supported years 1-9999") from None


def _unit(text: str) -> str:
    """The plural unit name (``"days"``) of a singular or plural unit in any case."""
    unit = text.lower()
    unit = _DATE_UNITS.get(unit) or _TIME_UNITS.get(unit) or unit
    if unit not in _DATE_UNITS.values() and unit not in _TIME_UNITS.values():
        raise DateTimeError(
            f"Unknown unit: '{text}'. Use days, weeks, months, years, hours, minutes or seconds"
        )
    return unit


def _operand(text: str, now: _Now) -> date | datetime:
    """The date or UTC date-time on the left of an arithmetic command."""
    keyword = text.lower()
    if keyword == "today":
        return now().date()
    if keyword == "now":
        return now()
    with contextlib.suppress(ValueError):  # not a date: perhaps a date-time
        return date.fromisoformat(text)
    moment = _parse_datetime(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _add(start: date | datetime, amount: int, unit: str) -> str:
    if unit in _TIME_UNITS.values():
        if not isinstance(start, datetime):
            start = datetime.combine(start, time(), UTC)
        return _utc_z(start + timedelta(**{unit: amount}))
    if unit in ("days", "weeks"):
        shifted = start + timedelta(**{unit: amount})
    else:
        shifted = _add_months(start, amount * (12 if unit == "years" else 1))
    return _utc_z(shifted) if isinstance(shifted, datetime) else shifted.isoformat()


def _add_months(start: _D, months: int) -> _D:
    """`start` moved by whole months, clamped to the last day of the target month."""
    year, month_index = divmod(start.year * 12 + start.month - 1 + months, 12)
    month = month_index + 1
    day = min(start.day, calendar.monthrange(year, month)[1])
    return start.replace(year=year, month=month, day=day)


def _convert(moment_text: str, source_name: str, target_name: str) -> str:
    moment = _parse_datetime(moment_text)
    if moment.tzinfo is not None:
        raise DateTimeError(
            f"Give the date-time to convert without an offset, got: '{moment_text}' "
            "(the 'from' zone says where it is)"
        )
    source, target = _zone(source_name), _zone(target_name)
    try:
        converted = moment.replace(tzinfo=source).astimezone(target)
    except (OverflowError, ValueError):
        raise DateTimeError("Result is outside the supported years 1-9999") from None
    return _zoned(converted, target)


def _parse_datetime(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise DateTimeError(
            f"Invalid date or date-time: '{text}'. Use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS"
        ) from None


def _zone(name: str) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise DateTimeError(f"Unknown timezone: '{name}'") from None


def _utc_label(moment: datetime) -> str:
    """``2024-03-15T10:30:00 UTC``"""
    return f"{_local_text(moment)} UTC"


def _utc_z(moment: datetime) -> str:
    """``2024-03-15T10:30:00Z``"""
    return f"{_local_text(moment)}Z"


def _zoned(moment: datetime, zone: tzinfo) -> str:
    """``2024-03-15T19:30:00+09:00 Asia/Tokyo``"""
    local = moment.astimezone(zone)
    name = "UTC" if zone is UTC else str(zone)
    return f"{local.isoformat(timespec='seconds')} {name}"


def _local_text(moment: datetime) -> str:
    return moment.replace(tzinfo=None).isoformat(timespec="seconds")
