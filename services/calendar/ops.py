"""Pure calendar operations: parse, format, add durations, convert zones, count business days."""

from __future__ import annotations

import calendar as _calendar
import email.utils
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_INPUT_CHARS = 64
MAX_FORMAT_CHARS = 200
MAX_HOLIDAYS = 1_000
MAX_BUSINESS_DAYS = 100_000
ZONE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*", re.ASCII)
DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December")

# Formats tried after ISO 8601 and RFC 2822; day-first numeric dates only with dots, because
# 03/08/2026 is ambiguous between the US and most of the world.
_DATE_FORMATS = ("%Y/%m/%d", "%d.%m.%Y", "%B %d, %Y", "%B %d %Y", "%b %d, %Y", "%b %d %Y",
                 "%d %B %Y", "%d %b %Y")
_TIME_FORMATS = ("", " %H:%M", " %H:%M:%S", " %I:%M %p", " %I:%M:%S %p")
_RFC2822_RE = re.compile(
    r"(?:[A-Za-z]{3}, ?)?\d{1,2} [A-Za-z]{3} \d{4} \d{2}:\d{2}(?::\d{2})? (?:[+-]\d{4}|[A-Z]{1,3})",
    re.ASCII,
)

# Duration fields: calendar units move the wall clock, clock units add elapsed time.
DURATION_LIMITS: dict[str, int] = {
    "years": 10_000, "months": 120_000, "weeks": 530_000, "days": 3_700_000,
    "hours": 88_000_000, "minutes": 5_300_000_000, "seconds": 316_000_000_000,
}
ISO_DURATION_RE = re.compile(
    r"(?P<sign>[+-])?P(?!$)(?:(?P<years>\d+)Y)?(?:(?P<months>\d+)M)?(?:(?P<weeks>\d+)W)?"
    r"(?:(?P<days>\d+)D)?(?:T(?=\d)(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?",
    re.ASCII,
)


class CalendarError(ValueError):
    """A date, zone, format or duration that cannot be used, or a result outside years 1..9999."""


def zone(name: str) -> ZoneInfo:
    if not (0 < len(name) <= MAX_INPUT_CHARS and ZONE_RE.fullmatch(name)):
        raise CalendarError(f"unknown time zone {name!r}: use an IANA name like Europe/Paris")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise CalendarError(f"unknown time zone {name!r}: use an IANA name") from None


def parse_datetime(value: str) -> datetime:
    """ISO 8601, RFC 2822 or a few common formats; naive when the text carries no offset."""
    text = value.strip()
    if not 0 < len(text) <= MAX_INPUT_CHARS:
        raise CalendarError(f"a date/time must be 1 to {MAX_INPUT_CHARS} characters")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    for date_format in _DATE_FORMATS:
        for time_format in _TIME_FORMATS:
            try:
                return datetime.strptime(text, date_format + time_format)
            except ValueError:
                continue
    # email.utils is lenient (it reads "March 8, 2026 2:30 PM" as 02:30): only RFC 2822 shapes.
    if _RFC2822_RE.fullmatch(text):
        try:
            return email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    raise CalendarError(
        f"unrecognized date/time {text!r}: use ISO 8601 like 2026-03-08T12:00:00-05:00"
    )


def parse_date(value: str) -> date:
    if not DATE_RE.fullmatch(value):
        raise CalendarError(f"{value!r} is not an ISO date YYYY-MM-DD")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise CalendarError(f"{value!r} is not a valid date: {exc}") from None


def wall(naive: datetime, tz: tzinfo) -> datetime:
    """A wall-clock time in `tz`. A time skipped by DST moves forward by the gap (02:30 -> 03:30
    on a spring-forward day); a repeated time takes its first occurrence."""
    try:
        return naive.replace(tzinfo=tz, fold=0).astimezone(UTC).astimezone(tz)
    except OverflowError:
        raise CalendarError("the date is out of range (years 1..9999)") from None


def localize(value: str, tz_name: str | None, default: tzinfo = UTC) -> datetime:
    """Parse, then interpret a naive time in `tz_name` (else `default`) or convert an aware one."""
    dt = parse_datetime(value)
    tz = zone(tz_name) if tz_name else None
    if dt.tzinfo is None:
        return wall(dt, tz or default)
    return _convert(dt, tz) if tz else dt


def _convert(dt: datetime, tz: tzinfo) -> datetime:
    try:
        return dt.astimezone(tz)
    except OverflowError:
        raise CalendarError("the date is out of range (years 1..9999)") from None


def moment(dt: datetime) -> dict[str, Any]:
    """The output shape shared by parse, add and convert."""
    offset = dt.utcoffset() or timedelta(0)
    stamp = dt.timestamp()
    return {
        "datetime": dt.isoformat(),
        "date": dt.date().isoformat(),
        "time": dt.time().isoformat(),
        "weekday": WEEKDAYS[dt.weekday()],
        "iso_weekday": dt.isoweekday(),
        "utc_offset": _offset(offset, ":"),
        "tz": getattr(dt.tzinfo, "key", None) or ("UTC" if dt.tzinfo is UTC else None),
        "tz_abbreviation": dt.tzname() or "",
        "timestamp": int(stamp) if stamp.is_integer() else stamp,
    }


def _offset(offset: timedelta, sep: str) -> str:
    seconds = int(offset.total_seconds())
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}{sep}{minutes:02d}"
    return text + (f"{sep}{secs:02d}" if secs else "")


def parse(value: str, tz: str | None = None) -> dict[str, Any]:
    return moment(localize(value, tz))


def convert(value: str, to_tz: str, from_tz: str | None = None) -> dict[str, Any]:
    """A naive time is read in `from_tz` (default UTC); an explicit offset in `value` wins."""
    dt = parse_datetime(value)
    if dt.tzinfo is None:
        dt = wall(dt, zone(from_tz) if from_tz else UTC)
    return moment(_convert(dt, zone(to_tz)))


def format_datetime(value: str, pattern: str, tz: str | None = None) -> str:
    if len(pattern) > MAX_FORMAT_CHARS:
        raise CalendarError(f"the format is longer than {MAX_FORMAT_CHARS} characters")
    return render(localize(value, tz), pattern)


def render(dt: datetime, pattern: str) -> str:
    """strftime for a fixed set of directives, computed here: locale- and platform-independent."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char != "%":
            out.append(char)
            i += 1
            continue
        directive = pattern[i + 1 : i + 2]
        if directive not in DIRECTIVES:
            raise CalendarError(
                f"format directive %{directive} is not supported "
                f"(allowed: {' '.join('%' + d for d in DIRECTIVES)})"
            )
        out.append(DIRECTIVES[directive](dt))
        i += 2
    return "".join(out)


DIRECTIVES: dict[str, Callable[[datetime], str]] = {
    "a": lambda d: WEEKDAYS[d.weekday()][:3],
    "A": lambda d: WEEKDAYS[d.weekday()],
    "w": lambda d: str(d.isoweekday() % 7),
    "u": lambda d: str(d.isoweekday()),
    "d": lambda d: f"{d.day:02d}",
    "b": lambda d: MONTHS[d.month - 1][:3],
    "B": lambda d: MONTHS[d.month - 1],
    "m": lambda d: f"{d.month:02d}",
    "y": lambda d: f"{d.year % 100:02d}",
    "Y": lambda d: f"{d.year:04d}",
    "H": lambda d: f"{d.hour:02d}",
    "I": lambda d: f"{(d.hour % 12) or 12:02d}",
    "p": lambda d: "AM" if d.hour < 12 else "PM",
    "M": lambda d: f"{d.minute:02d}",
    "S": lambda d: f"{d.second:02d}",
    "f": lambda d: f"{d.microsecond:06d}",
    "z": lambda d: _offset(d.utcoffset() or timedelta(0), "") if d.tzinfo else "",
    "Z": lambda d: d.tzname() or "",
    "j": lambda d: f"{d.timetuple().tm_yday:03d}",
    "U": lambda d: f"{(d.timetuple().tm_yday + 6 - d.isoweekday() % 7) // 7:02d}",
    "W": lambda d: f"{(d.timetuple().tm_yday + 6 - d.weekday()) // 7:02d}",
    "V": lambda d: f"{d.isocalendar().week:02d}",
    "G": lambda d: f"{d.isocalendar().year:04d}",
    "F": lambda d: f"{d.year:04d}-{d.month:02d}-{d.day:02d}",
    "T": lambda d: f"{d.hour:02d}:{d.minute:02d}:{d.second:02d}",
    "%": lambda d: "%",
}


def duration_fields(duration: dict[str, Any] | str) -> dict[str, float]:
    """An object of DURATION_LIMITS fields, or an ISO 8601 duration such as P1DT2H or -P2W."""
    if isinstance(duration, str):
        m = ISO_DURATION_RE.fullmatch(duration.strip())
        if m is None:
            raise CalendarError(f"{duration!r} is not an ISO 8601 duration like P1DT2H30M")
        sign = -1 if m["sign"] == "-" else 1
        fields = {k: sign * float(v) for k, v in m.groupdict().items() if k != "sign" and v}
    else:
        unknown = set(duration) - set(DURATION_LIMITS)
        if unknown:
            raise CalendarError(f"unknown duration fields: {', '.join(sorted(unknown))}")
        fields = dict(duration)
    for name, value in fields.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise CalendarError(f"duration {name} must be a number")
        if abs(value) > DURATION_LIMITS[name]:
            raise CalendarError(f"duration {name} is limited to ±{DURATION_LIMITS[name]}")
        if name in ("years", "months", "weeks", "days") and value != int(value):
            raise CalendarError(f"duration {name} must be a whole number")
    return fields


def add(value: str, duration: dict[str, Any] | str, tz: str | None = None) -> dict[str, Any]:
    """Years, months, weeks and days move the wall clock in the zone (the day is clamped to the
    month's end, 09:00 stays 09:00 across DST); hours, minutes and seconds add elapsed time."""
    fields = duration_fields(duration)
    dt = localize(value, tz)
    zone_info = dt.tzinfo
    assert zone_info is not None
    months = int(fields.get("years", 0)) * 12 + int(fields.get("months", 0))
    days = int(fields.get("weeks", 0)) * 7 + int(fields.get("days", 0))
    seconds = (
        fields.get("hours", 0) * 3600 + fields.get("minutes", 0) * 60 + fields.get("seconds", 0)
    )
    try:
        local = dt.replace(tzinfo=None)
        if months:
            year, month0 = divmod(local.year * 12 + local.month - 1 + months, 12)
            if not 1 <= year <= 9999:
                raise OverflowError
            last = _calendar.monthrange(year, month0 + 1)[1]
            local = local.replace(year=year, month=month0 + 1, day=min(local.day, last))
        local += timedelta(days=days)
        shifted = wall(local, zone_info) if (months or days) else dt
        result = (shifted.astimezone(UTC) + timedelta(seconds=seconds)).astimezone(zone_info)
    except OverflowError:
        raise CalendarError("the result is out of range (years 1..9999)") from None
    return moment(result)


def _weekdays(start: date, end: date) -> int:
    """Mon-Fri days in [start, end), start <= end."""
    full_weeks, rest = divmod((end - start).days, 7)
    first = start.weekday()
    return full_weeks * 5 + sum(1 for i in range(rest) if (first + i) % 7 < 5)


def _holidays(values: list[str] | None) -> set[date]:
    values = values or []
    if len(values) > MAX_HOLIDAYS:
        raise CalendarError(f"at most {MAX_HOLIDAYS} holidays")
    return {parse_date(v) for v in values}


def business_days(start: str, end: str, holidays: list[str] | None = None) -> dict[str, int]:
    """Mon-Fri days, minus holidays, in [start, end): the start counts, the end does not.
    Negative when end is before start (then the days in [end, start))."""
    a, b = parse_date(start), parse_date(end)
    sign = 1 if a <= b else -1
    low, high = min(a, b), max(a, b)
    excluded = sum(1 for h in _holidays(holidays) if low <= h < high and h.weekday() < 5)
    count = sign * (_weekdays(low, high) - excluded)
    return {"business_days": count, "holidays_excluded": excluded}


def add_business_days(start: str, days: int, holidays: list[str] | None = None) -> dict[str, Any]:
    """The `days`-th business day after `start` (before it when negative); 0 rolls a weekend or
    holiday forward to the next business day."""
    if isinstance(days, bool) or not isinstance(days, int) or abs(days) > MAX_BUSINESS_DAYS:
        raise CalendarError(f"days must be an integer within ±{MAX_BUSINESS_DAYS}")
    current = parse_date(start)
    off = _holidays(holidays)
    step = timedelta(days=-1 if days < 0 else 1)
    remaining = abs(days)
    try:
        if remaining == 0:
            while current.weekday() >= 5 or current in off:
                current += step
        while remaining:
            current += step
            if current.weekday() < 5 and current not in off:
                remaining -= 1
    except OverflowError:
        raise CalendarError("the result is out of range (years 1..9999)") from None
    return {"date": current.isoformat(), "weekday": WEEKDAYS[current.weekday()]}
