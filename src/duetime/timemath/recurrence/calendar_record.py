"""A checked calendar rule as a record, and the text the stores keep it as (see
:mod:`duetime.timemath.recurrence.calendar` for what the rule means and how it is checked)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, get_args

from duetime.timemath.recurrence.business import DEFAULT_WEEKEND, WEEKDAY_NAMES, Roll
from duetime.timemath.recurrence.rrule_text import RuleParts, parse_rrule

Feb29 = Literal["feb28", "mar1", "skip"]
FEB29: tuple[Feb29, ...] = get_args(Feb29)


@dataclass(frozen=True, slots=True)
class Calendar:
    """A checked calendar rule; build it with :func:`parse_calendar`. Wall times are naive."""

    rrule: str
    dtstart: datetime
    exdates: tuple[datetime, ...] = ()
    rdates: tuple[datetime, ...] = ()
    holidays: str | None = None
    holiday_dates: tuple[date, ...] = ()
    weekend: tuple[int, ...] = DEFAULT_WEEKEND
    roll: Roll | None = None
    feb29: Feb29 = "feb28"

    @property
    def parts(self) -> RuleParts:
        return rule_parts(self.rrule)

    def to_dict(self) -> dict[str, Any]:
        """The JSON view: what ``add_schedule`` takes back (local times without an offset)."""
        return {
            "rrule": self.rrule,
            "dtstart": self.dtstart.isoformat(),
            "exdates": [d.isoformat() for d in self.exdates],
            "rdates": [d.isoformat() for d in self.rdates],
            "holidays": self.holidays,
            "holiday_dates": [d.isoformat() for d in self.holiday_dates],
            "weekend": [WEEKDAY_NAMES[d] for d in self.weekend],
            "roll": self.roll,
            "feb29": self.feb29,
        }

    def to_text(self) -> str:
        """How the stores keep it (one text column): compact JSON without the fields that hold
        their defaults (a per-user rule is mostly its RRULE and DTSTART: a smaller row)."""
        kept = {
            name: value
            for name, value in self.to_dict().items()
            if name not in _STORED_DEFAULTS or _STORED_DEFAULTS[name] != value
        }
        return json.dumps(kept, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> Calendar:
        """Read a stored calendar back (it was checked when written)."""
        return _from_text(text)


CALENDAR_FIELDS = (
    "rrule",
    "dtstart",
    "exdates",
    "rdates",
    "holidays",
    "holiday_dates",
    "weekend",
    "roll",
    "feb29",
)
"""What a schedule takes besides ``timezone`` to define a calendar rule."""


def calendar_fields(calendar: Calendar | None) -> dict[str, Any]:
    """A schedule's JSON view of its calendar rule: every field None for cron and interval."""
    if calendar is None:
        return dict.fromkeys(CALENDAR_FIELDS)
    return calendar.to_dict()


def calendar_text(calendar: Calendar | None) -> str | None:
    """A calendar rule as the stores keep it, or None."""
    return None if calendar is None else _text(calendar)


@functools.lru_cache(maxsize=4096)
def _text(calendar: Calendar) -> str:
    """Written once per distinct rule: a batch of per-user schedules shares a few."""
    return calendar.to_text()


def calendar_of(text: str | None) -> Calendar | None:
    """A stored calendar rule read back, or None."""
    return None if text is None else Calendar.from_text(text)


_STORED_DEFAULTS: dict[str, object] = {
    "exdates": [],
    "rdates": [],
    "holidays": None,
    "holiday_dates": [],
    "weekend": [WEEKDAY_NAMES[d] for d in DEFAULT_WEEKEND],
    "roll": None,
    "feb29": "feb28",
}
"""Fields the stored text leaves out when they hold these values (rows written before kept
every field; both read back the same)."""


@functools.lru_cache(maxsize=4096)
def _from_text(text: str) -> Calendar:
    data = {**_STORED_DEFAULTS, **json.loads(text)}
    return Calendar(
        rrule=data["rrule"],
        dtstart=datetime.fromisoformat(data["dtstart"]),
        exdates=tuple(datetime.fromisoformat(d) for d in data["exdates"]),
        rdates=tuple(datetime.fromisoformat(d) for d in data["rdates"]),
        holidays=data["holidays"],
        holiday_dates=tuple(date.fromisoformat(d) for d in data["holiday_dates"]),
        weekend=tuple(WEEKDAY_NAMES.index(d) for d in data["weekend"]),
        roll=data["roll"],
        feb29=data["feb29"],
    )


@functools.lru_cache(maxsize=4096)
def rule_parts(text: str) -> RuleParts:
    return parse_rrule(text)
