"""RFC 5545 RRULE text: parsed and checked part by part, so a mistake names the part at fault.

python-dateutil's own parser accepts what RFC 5545 forbids (``BYSETPOS`` alone, ``COUNT`` with
``UNTIL``) and reports the rest as bare ``ValueError`` text; this module checks the grammar of RFC
5545 §3.3.10 and hands dateutil only rules it defines. ``UNTIL`` is kept apart: it is compared by
:mod:`duetime.timemath.recurrence.calendar` with the resolved instants, in UTC when it ends in ``Z``
(RFC 5545: the form it must take when DTSTART has a zone)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from dateutil import rrule as du

from duetime.errors import InvalidRrule

FREQS = ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY")
DAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
PARTS = (
    "FREQ",
    "UNTIL",
    "COUNT",
    "INTERVAL",
    "BYSECOND",
    "BYMINUTE",
    "BYHOUR",
    "BYDAY",
    "BYMONTHDAY",
    "BYYEARDAY",
    "BYWEEKNO",
    "BYMONTH",
    "BYSETPOS",
    "WKST",
)
_BY_PARTS = PARTS[4:13]
_MAX_TEXT = 1000
_MAX_VALUES = 400
_DAY = re.compile(r"([+-]?)(\d{1,2})?(MO|TU|WE|TH|FR|SA|SU)")
_UNTIL = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z?))?")
_FIELD = "rrule"
_LEAP_SECOND = 60
"""RFC 5545 allows BYSECOND=60 for a leap second; POSIX time and the tz database have none, so
such a time never comes (and dateutil fails on it instead of saying so)."""

_NUMBER_RANGES: dict[str, tuple[int, int, bool]] = {
    # part: (low, high, negatives allowed)
    "BYSECOND": (0, 60, False),
    "BYMINUTE": (0, 59, False),
    "BYHOUR": (0, 23, False),
    "BYMONTHDAY": (1, 31, True),
    "BYYEARDAY": (1, 366, True),
    "BYWEEKNO": (1, 53, True),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (1, 366, True),
}


@dataclass(frozen=True, slots=True)
class Until:
    """UNTIL as written: a date, a floating wall time, or (``utc``) an instant in UTC."""

    value: datetime
    utc: bool
    is_date: bool


@dataclass(frozen=True, slots=True)
class RuleParts:
    """One RRULE, checked: the text in canonical order and what dateutil needs."""

    text: str
    freq: str
    interval: int
    count: int | None
    until: Until | None
    by: tuple[tuple[str, tuple[str, ...]], ...]

    def values(self, part: str) -> tuple[str, ...]:
        for name, values in self.by:
            if name == part:
                return values
        return ()

    def has(self, part: str) -> bool:
        return any(name == part for name, _ in self.by)

    @property
    def plain_yearly(self) -> bool:
        """FREQ=YEARLY with no BYxxx part: an anniversary of DTSTART's date."""
        return self.freq == "YEARLY" and not any(name in _BY_PARTS for name, _ in self.by)

    def dateutil_rule(self, dtstart: datetime, *, count: bool = True) -> du.rrule:
        """dateutil's expansion of the rule from a naive DTSTART, without UNTIL (see module)."""
        kwargs: dict[str, Any] = {
            "dtstart": dtstart,
            "interval": self.interval,
            "count": self.count if count else None,
        }
        for part, values in self.by:
            if part == "WKST":
                kwargs["wkst"] = DAYS.index(values[0])
            elif part == "BYDAY":
                kwargs["byweekday"] = [weekday_of(value) for value in values]
            else:
                kwargs[part.lower()] = [int(value) for value in values]
        return du.rrule(_FREQ[self.freq], **kwargs)


_FREQ = {
    "YEARLY": du.YEARLY,
    "MONTHLY": du.MONTHLY,
    "WEEKLY": du.WEEKLY,
    "DAILY": du.DAILY,
    "HOURLY": du.HOURLY,
    "MINUTELY": du.MINUTELY,
    "SECONDLY": du.SECONDLY,
}


@functools.lru_cache(maxsize=1024)
def weekday_of(value: str) -> du.weekday:
    """dateutil's weekday for a checked BYDAY value (``MO``, ``-1FR``): a few hundred exist,
    and every expansion of a rule asks again (dateutil's weekday never changes once made)."""
    match = _DAY.fullmatch(value)
    assert match is not None  # checked by parse_rrule
    sign, number, day = match.groups()
    weekday = du.weekday(DAYS.index(day))
    if number is None:
        return weekday
    return weekday(-int(number) if sign == "-" else int(number))


def parse_rrule(value: object) -> RuleParts:
    """Check an RRULE (``RRULE:`` prefix optional) and return its parts in canonical order."""
    given = _given_parts(_rule_text(value))
    if "FREQ" not in given:
        raise InvalidRrule(_FIELD, "FREQ: is required (SECONDLY ... YEARLY)")
    freq = given["FREQ"]
    if freq not in FREQS:
        raise InvalidRrule(_FIELD, f"FREQ: {freq!r} is not one of {', '.join(FREQS)}")
    if "COUNT" in given and "UNTIL" in given:
        raise InvalidRrule(_FIELD, "COUNT: cannot be given with UNTIL (RFC 5545: one or neither)")
    count = _positive(given, "COUNT") if "COUNT" in given else None
    interval = _positive(given, "INTERVAL") if "INTERVAL" in given else 1
    until = _until(given["UNTIL"]) if "UNTIL" in given else None
    by = [(part, _values(part, given[part], freq, given)) for part in PARTS[4:] if part in given]
    if "BYSETPOS" in given and not any(part in given for part in _BY_PARTS if part != "BYSETPOS"):
        raise InvalidRrule(_FIELD, "BYSETPOS: needs another BYxxx part to select from")
    canonical = [f"FREQ={freq}"]
    if until is not None:
        canonical.append(f"UNTIL={given['UNTIL']}")
    if count is not None:
        canonical.append(f"COUNT={count}")
    if interval != 1:
        canonical.append(f"INTERVAL={interval}")
    canonical += [f"{part}={','.join(values)}" for part, values in by]
    return RuleParts(";".join(canonical), freq, interval, count, until, tuple(by))


def _rule_text(value: object) -> str:
    """The rule's text without its ``RRULE:`` prefix, refused when empty or too long."""
    if not isinstance(value, str):
        raise InvalidRrule(_FIELD, f"must be a string, not {type(value).__name__}")
    text = value.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    if not text:
        raise InvalidRrule(_FIELD, "must not be empty; e.g. 'FREQ=MONTHLY;BYMONTHDAY=15'")
    if len(text) > _MAX_TEXT:
        raise InvalidRrule(_FIELD, f"is {len(text)} characters; at most {_MAX_TEXT}")
    return text


def _given_parts(text: str) -> dict[str, str]:
    """``NAME=VALUE`` parts by name (upper case), each a known part, none given twice."""
    given: dict[str, str] = {}
    for item in text.rstrip(";").split(";"):
        name, sep, raw = item.partition("=")
        name = name.strip().upper()
        if not sep or not name:
            raise InvalidRrule(_FIELD, f"{item!r} is not a NAME=VALUE rule part")
        if name not in PARTS:
            raise InvalidRrule(
                _FIELD, f"{name}: not a rule part of RFC 5545 (known: {', '.join(PARTS)})"
            )
        if name in given:
            raise InvalidRrule(_FIELD, f"{name}: given twice")
        given[name] = raw.strip().upper()
    return given


def _positive(given: dict[str, str], part: str) -> int:
    raw = given[part]
    if not raw.isdigit() or int(raw) < 1 or len(raw) > 9:
        raise InvalidRrule(_FIELD, f"{part}: {raw!r} is not a whole number of at least 1")
    return int(raw)


def _until(raw: str) -> Until:
    match = _UNTIL.fullmatch(raw)
    if match is None:
        raise InvalidRrule(
            _FIELD, f"UNTIL: {raw!r} is not a DATE (19971224) or DATE-TIME (19971224T000000Z)"
        )
    year, month, day, hour, minute, second, zulu = match.groups()
    try:
        if hour is None:
            day_only = date(int(year), int(month), int(day))
            return Until(datetime(day_only.year, day_only.month, day_only.day), False, True)
        value = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    except ValueError as exc:
        raise InvalidRrule(_FIELD, f"UNTIL: {raw!r} is not a real date or time") from exc
    return Until(value, bool(zulu), False)


def _values(part: str, raw: str, freq: str, given: dict[str, str]) -> tuple[str, ...]:
    items = [item.strip() for item in raw.split(",")]
    if not raw or any(not item for item in items):
        raise InvalidRrule(_FIELD, f"{part}: needs a value (comma-separated, none empty)")
    if len(items) > _MAX_VALUES:
        raise InvalidRrule(_FIELD, f"{part}: {len(items)} values; at most {_MAX_VALUES}")
    if part == "WKST":
        if len(items) != 1 or items[0] not in DAYS:
            raise InvalidRrule(_FIELD, f"WKST: {raw!r} is not one of {', '.join(DAYS)}")
        return (items[0],)
    if part == "BYDAY":
        return tuple(_day(item, freq, given) for item in items)
    _check_freq(part, freq)
    low, high, negatives = _NUMBER_RANGES[part]
    values = []
    for item in items:
        number = item.lstrip("+-")
        if not number.isdigit() or len(number) > 3:
            raise InvalidRrule(_FIELD, f"{part}: {item!r} is not a whole number")
        value = int(item)
        if not (low <= abs(value) <= high) or (value < 0 and not negatives):
            span = f"{low}..{high}" + (f" or -{high}..-{low}" if negatives else "")
            raise InvalidRrule(_FIELD, f"{part}: {item} is out of range ({span})")
        if part == "BYSECOND" and value == _LEAP_SECOND:
            raise InvalidRrule(
                _FIELD,
                "BYSECOND: 60 is a leap second, which no wall clock here ever shows "
                "(the tz database counts none): use 0..59",
            )
        values.append(str(value))
    return tuple(dict.fromkeys(values))


def _check_freq(part: str, freq: str) -> None:
    """RFC 5545's table of which BYxxx parts each FREQ takes."""
    if part == "BYWEEKNO" and freq != "YEARLY":
        raise InvalidRrule(_FIELD, "BYWEEKNO: only with FREQ=YEARLY")
    if part == "BYYEARDAY" and freq in ("DAILY", "WEEKLY", "MONTHLY"):
        raise InvalidRrule(_FIELD, f"BYYEARDAY: not with FREQ={freq}")
    if part == "BYMONTHDAY" and freq == "WEEKLY":
        raise InvalidRrule(_FIELD, "BYMONTHDAY: not with FREQ=WEEKLY")


def _day(item: str, freq: str, given: dict[str, str]) -> str:
    match = _DAY.fullmatch(item)
    if match is None:
        raise InvalidRrule(_FIELD, f"BYDAY: {item!r} is not a weekday such as MO, 1FR or -1SU")
    sign, number, day = match.groups()
    if number is None:
        if sign:
            raise InvalidRrule(_FIELD, f"BYDAY: {item!r} has a sign but no number")
        return day
    if not 1 <= int(number) <= 53:
        raise InvalidRrule(_FIELD, f"BYDAY: {item!r}: the number must be 1..53 or -53..-1")
    if freq not in ("MONTHLY", "YEARLY"):
        raise InvalidRrule(_FIELD, f"BYDAY: {item!r}: a numbered weekday needs MONTHLY or YEARLY")
    if freq == "YEARLY" and "BYWEEKNO" in given:
        raise InvalidRrule(_FIELD, f"BYDAY: {item!r}: no numbered weekday with BYWEEKNO")
    if freq == "MONTHLY" and int(number) > 5:
        raise InvalidRrule(_FIELD, f"BYDAY: {item!r}: a month has at most 5 of a weekday")
    return f"{'-' if sign == '-' else ''}{int(number)}{day}"
