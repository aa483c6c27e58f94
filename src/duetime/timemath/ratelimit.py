"""Rate limits as a generic cell rate algorithm (GCRA): smooth, with an optional burst.

A rate ``N/PERIOD`` allows one start every ``PERIOD / N`` (the emission interval, rounded up to
the microsecond so the rate is never exceeded). The state is one instant, the theoretical
arrival time (TAT): the instant by which every start granted so far would have been spread out.
At ``now``, ``burst`` starts fit between ``now`` and ``now + burst * interval``; what the TAT
already covers of that span is spent. So in any window of length ``w`` at most
``burst + w / interval`` starts are granted — never a burst at each period's boundary, as a
fixed window would allow (up to twice the rate across a boundary).

Pure: the caller reads and writes the TAT (in the limit's row, in the claim's transaction).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.errors import InvalidInput

_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "sec": timedelta(seconds=1),
    "second": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "min": timedelta(minutes=1),
    "minute": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "hour": timedelta(hours=1),
    "d": timedelta(days=1),
    "day": timedelta(days=1),
}
_RATE = re.compile(r"\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*")
MAX_COUNT = 1_000_000
"""The most starts a rate may allow per period (beyond it, a limit limits nothing)."""
MAX_PERIOD = timedelta(days=1)
DEFAULT_BURST_SPAN = timedelta(milliseconds=50)
"""Without an explicit burst, a rate allows the starts of this span at once (at least one), so
each claim may take a few rows instead of one claim per start at high rates."""


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts per ``period``, spread evenly."""

    count: int
    period: timedelta

    @property
    def interval(self) -> timedelta:
        """One start per this span, rounded up to the microsecond."""
        period_us = _micros(self.period)
        return timedelta(microseconds=-(-period_us // self.count))

    def __str__(self) -> str:
        return f"{self.count}/{format_period(self.period)}"


def format_period(period: timedelta) -> str:
    """``1s``, ``10min``, ``1h``, ``250ms``: the largest unit that divides the period."""
    for text, unit in (("d", "day"), ("h", "hour"), ("min", "minute"), ("s", "s"), ("ms", "ms")):
        step = _UNITS[unit]
        if period % step == timedelta(0):
            count = period // step
            return text if count == 1 else f"{count}{text}"
    return f"{_micros(period)}us"


def parse_rate(text: str, field: str = "rate") -> Rate:
    """``100/s``, ``6000/min``, ``10/30s``, ``5/h``; InvalidInput naming ``field`` otherwise."""
    match = _RATE.fullmatch(text.lower()) if isinstance(text, str) else None
    if match is None or match[3] not in _UNITS:
        raise InvalidInput(
            field, f"{text!r} is not a rate: write N/PERIOD, e.g. 100/s, 6000/min, 10/30s, 5/h"
        )
    count = int(match[1])
    period = _UNITS[match[3]] * (int(match[2]) if match[2] else 1)
    if count < 1:
        raise InvalidInput(field, f"{text!r} allows no start at all: the count must be at least 1")
    if count > MAX_COUNT:
        raise InvalidInput(field, f"{text!r}: the count must be at most {MAX_COUNT}")
    if not timedelta(0) < period <= MAX_PERIOD:
        raise InvalidInput(field, f"{text!r}: the period must be more than 0 and at most 1 day")
    return Rate(count, period)


def check_burst(burst: object, field: str = "burst") -> int:
    """A burst is a whole number of starts, at least 1."""
    if isinstance(burst, bool) or not isinstance(burst, int):
        raise InvalidInput(field, f"{burst!r} is not a whole number of starts")
    if not 1 <= burst <= MAX_COUNT:
        raise InvalidInput(field, f"{burst} must be between 1 and {MAX_COUNT}")
    return burst


def default_burst(rate: Rate) -> int:
    """The starts of :data:`DEFAULT_BURST_SPAN` at ``rate``, at least 1."""
    return max(1, math.floor(DEFAULT_BURST_SPAN / rate.interval))


def allowance(rate: Rate, burst: int, tat: datetime | None, now: datetime) -> int:
    """How many starts are allowed at ``now`` (0 to ``burst``)."""
    interval = rate.interval
    start = now if tat is None or tat < now else tat
    room = now + interval * burst - start
    return max(0, room // interval)


def spend(rate: Rate, tat: datetime | None, now: datetime, starts: int) -> datetime:
    """The TAT after ``starts`` starts granted at ``now`` (within :func:`allowance`)."""
    start = now if tat is None or tat < now else tat
    return start + rate.interval * starts


def next_allowed(rate: Rate, burst: int, tat: datetime | None, now: datetime) -> datetime:
    """The first instant at or after ``now`` when one more start is allowed."""
    if tat is None:
        return now
    return max(now, tat - rate.interval * (burst - 1))


def _micros(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds
