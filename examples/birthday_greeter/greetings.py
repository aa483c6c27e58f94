"""The birthday rules, with no I/O: which day, which instant, which key.

A user is greeted at 09:00 wall-clock time in their own IANA zone on their birthday. Someone born
on 29 February is greeted, in years without a 29 February, as their ``feb29`` says, by
duetime's own rule for leap-day anniversaries (:func:`duetime.anniversary`): on 28 February by
default (still their birthday month, before rather than after it), on 1 March (New Zealand's and
Taiwan's convention for legal age), or only in leap years (``skip``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from duetime import TimerRequest, anniversary

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
    feb29: str = "feb28"
    """Born on 29 February: greeted in common years on ``feb28``, ``mar1``, or ``skip``ped."""

    def to_payload(self) -> dict[str, str]:
        payload = {
            "user_id": self.id,
            "name": self.name,
            "birth_date": self.birth_date.isoformat(),
            "timezone": self.timezone,
        }
        if self.feb29 != "feb28":
            payload["feb29"] = self.feb29
        return payload

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> User:
        return cls(
            id=str(payload["user_id"]),
            name=str(payload["name"]),
            birth_date=date.fromisoformat(str(payload["birth_date"])),
            timezone=str(payload["timezone"]),
            feb29=str(payload.get("feb29", "feb28")),
        )


def birthday_in(birth_date: date, year: int, feb29: str = "feb28") -> date | None:
    """The day the birthday falls on in ``year`` (None: a 29 February skipped in a common year)."""
    if feb29 not in ("feb28", "mar1", "skip"):
        raise ValueError(f"feb29 must be feb28, mar1 or skip, not {feb29!r}")
    return anniversary(birth_date, year, feb29)  # type: ignore[arg-type]


def greeting_year_from(user: User, year: int) -> int:
    """The first year from ``year`` on with a birthday (a skipped 29 February has none)."""
    while birthday_in(user.birth_date, year, user.feb29) is None:
        year += 1
    return year


def greeting_key(user_id: str, year: int, series: str = "") -> str:
    """The idempotency key of one user's greeting in one year: scheduling it twice is harmless.

    ``series`` tells apart a chain of greetings started after the user changed their birthday
    or zone: the old chain's keys may belong to greetings already sent or cancelled, which
    duetime keeps as they are, so the new chain needs keys of its own."""
    return f"birthday:{user_id}:{year}" + (f":{series}" if series else "")


def greeting_local_time(user: User, year: int) -> datetime:
    """The wall-clock time of the greeting (naive: it is read in the user's zone)."""
    day = birthday_in(user.birth_date, year, user.feb29)
    if day is None:
        raise ValueError(f"{user.id} has no birthday in {year}")
    return datetime.combine(day, GREETING_TIME)


def greeting_at(user: User, year: int) -> datetime:
    """The instant of the greeting, read the way duetime reads it (``zoneinfo`` with fold=0)."""
    return greeting_local_time(user, year).replace(tzinfo=ZoneInfo(user.timezone))


def next_greeting_year(user: User, now: datetime) -> int:
    """The first year whose greeting is still ahead of ``now`` (this year's, or next year's)."""
    year = greeting_year_from(user, now.astimezone(ZoneInfo(user.timezone)).year)
    if greeting_at(user, year) <= now:
        year = greeting_year_from(user, year + 1)
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
    today = now.astimezone(ZoneInfo(user.timezone)).date()
    return today == birthday_in(user.birth_date, year, user.feb29)
