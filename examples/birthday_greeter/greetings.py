"""The birthday rules, with no I/O: which day, which instant, which key.

A user is greeted at 09:00 wall-clock time in their own IANA zone on their birthday. Someone born
on 29 February is greeted on 28 February in years without a 29 February: it is still their
birthday month, and the greeting comes before their birthday rather than after it (the
convention most countries use for legal age, e.g. the UK; New Zealand and Taiwan use 1 March).
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from duetime import TimerRequest

GREETING = "birthday.greeting"
"""The event type of a birthday greeting."""
GREETING_TIME = time(9, 0)
"""Greetings go out at this wall-clock time in the user's zone."""


@dataclass(frozen=True, slots=True)
class User:
    """Whom to greet: an id, a name, a birth date and the IANA zone they live in."""

    id: str
    name: str
    birth_date: date
    timezone: str

    def to_payload(self) -> dict[str, str]:
        return {
            "user_id": self.id,
            "name": self.name,
            "birth_date": self.birth_date.isoformat(),
            "timezone": self.timezone,
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> User:
        return cls(
            id=str(payload["user_id"]),
            name=str(payload["name"]),
            birth_date=date.fromisoformat(str(payload["birth_date"])),
            timezone=str(payload["timezone"]),
        )


def birthday_in(birth_date: date, year: int) -> date:
    """The day the birthday falls on in ``year``: 29 February becomes 28 February off leap years."""
    if birth_date.month == 2 and birth_date.day == 29 and not calendar.isleap(year):
        return date(year, 2, 28)
    return birth_date.replace(year=year)


def greeting_key(user_id: str, year: int, series: str = "") -> str:
    """The idempotency key of one user's greeting in one year: scheduling it twice is harmless.

    ``series`` tells apart a chain of greetings started after the user changed their birthday
    or zone: the old chain's keys may belong to greetings already sent or cancelled, which
    duetime keeps as they are, so the new chain needs keys of its own."""
    return f"birthday:{user_id}:{year}" + (f":{series}" if series else "")


def greeting_local_time(user: User, year: int) -> datetime:
    """The wall-clock time of the greeting (naive: it is read in the user's zone)."""
    return datetime.combine(birthday_in(user.birth_date, year), GREETING_TIME)


def greeting_at(user: User, year: int) -> datetime:
    """The instant of the greeting, read the way duetime reads it (``zoneinfo`` with fold=0)."""
    return greeting_local_time(user, year).replace(tzinfo=ZoneInfo(user.timezone))


def next_greeting_year(user: User, now: datetime) -> int:
    """The first year whose greeting is still ahead of ``now`` (this year's, or next year's)."""
    year = now.astimezone(ZoneInfo(user.timezone)).year
    if greeting_at(user, year) <= now:
        year += 1
    return year


def greeting_request(user: User, year: int, series: str = "") -> TimerRequest:
    """The timer for ``user``'s greeting in ``year``, in the form duetime stores it.

    It is given as a local time with the zone name (not as a UTC instant), so if the zone's rules
    change before then, duetime keeps it at 09:00 local.
    """
    return TimerRequest(
        type=GREETING,
        payload={**user.to_payload(), "year": year, **({"series": series} if series else {})},
        local=greeting_local_time(user, year).isoformat(timespec="minutes"),
        timezone=user.timezone,
        key=greeting_key(user.id, year, series),
        subject=user.id,
    )


def is_still_birthday(user: User, year: int, now: datetime) -> bool:
    """True while it is still the birthday in the user's zone (a late greeting is fine today)."""
    return now.astimezone(ZoneInfo(user.timezone)).date() == birthday_in(user.birth_date, year)
