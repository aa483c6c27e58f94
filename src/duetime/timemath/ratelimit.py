"""Rate limits as a generic cell rate algorithm (GCRA): smooth, with an optional burst.

A rate ``N/PERIOD`` allows one start every ``PERIOD / N`` (the emission interval, rounded up to
the microsecond so the rate is never exceeded). The state is one instant, the theoretical
arrival time (TAT): the instant by which every start granted so far would have been spread out.
At ``now``, ``burst`` starts fit between ``now`` and ``now + burst * interval``; what the TAT
already covers of that span is spent. So in any window of length ``w`` at most
``burst + w / interval`` starts are granted — never a burst at each period's boundary, as a
fixed window would allow (up to twice the rate across a boundary).

Pure: the caller reads and writes the state (in the limit's row, in the claim's transaction):
the TAT, and two marks of the recent grants that tell how near its bound the rate ran lately
(:class:`RateState`, :func:`pace_slack`).
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
PACE_WINDOW = timedelta(milliseconds=100)
"""How often a rate's recent mark moves on (:func:`rotate`): the earlier mark is then always at
least this far back, so a rate used lightly over it leaves its grants unpaced; at least the
pacing a worker adds to a grant (the worker's ``flow.RATE_START_DELAY``) for that to hold."""
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


@dataclass(frozen=True, slots=True)
class Mark:
    """A point in a rate's sequence of grants: the TAT as it stood there (None: nothing granted
    before it), and the starts granted from there on."""

    tat: datetime | None
    count: int


@dataclass(frozen=True, slots=True)
class RateState:
    """A rate's stored state: the TAT, and two marks of its recent grants (None: not known, as
    in a row written before the marks were kept, or by a version that did not keep them).

    The ``recent`` mark was set at ``recent_at`` (a grant's instant); the ``earlier`` one where
    the recent one was before that, at least :data:`PACE_WINDOW` earlier (:func:`rotate`)."""

    tat: datetime | None = None
    recent_at: datetime | None = None
    recent: Mark | None = None
    earlier: Mark | None = None


def rotate(state: RateState, now: datetime, window: timedelta = PACE_WINDOW) -> RateState:
    """The marks a grant at ``now`` counts from: once the recent mark is ``window`` old (or
    there is none), it becomes the earlier one and a new one is set here, at the TAT as it
    stands before the grant."""
    if state.recent is not None and state.recent_at is not None and now - state.recent_at < window:
        return state
    return RateState(state.tat, now, Mark(state.tat, 0), state.recent)


def spend_state(rate: Rate, state: RateState, now: datetime, starts: int) -> RateState:
    """The state after ``starts`` starts granted at ``now`` (``state`` as :func:`rotate` gave
    it, ``starts`` within :func:`allowance`): the TAT moves on, both marks count them."""

    def counted(mark: Mark | None) -> Mark | None:
        return None if mark is None else Mark(mark.tat, mark.count + starts)

    tat = spend(rate, state.tat, now, starts)
    return RateState(tat, state.recent_at, counted(state.recent), counted(state.earlier))


def pace_slack(
    rate: Rate, burst: int, state: RateState, now: datetime, starts: int, cap: timedelta
) -> timedelta:
    """How much earlier than a fixed pacing ``D`` after their grant the ``starts`` rows granted
    at ``now`` may start, the rate's bound still kept whatever the lag from grant to start (up
    to ``D``); between 0 and ``cap``. ``state`` is as :func:`rotate` gave it, before the grant.

    **The setting.** Grant ``j`` gives ``n_j`` starts at instant ``g_j`` (grants are made one at
    a time, under the limit's lock). A worker holds them until ``e_j + D``, where
    ``e_j = g_j - h_j`` and ``h_j`` (0 to ``D``) is this slack, and has them ``λ`` after the
    grant, ``0 <= λ <= D``; each starts at ``max(e_j + D, g_j + λ)``, so within
    ``[e_j + D, g_j + D]``. The bound to keep: in every window ``[a, a + w]``, at most
    ``B + w / T`` starts (``B`` the burst, ``T`` the interval) — the GCRA's bound on grants.

    **Lemma (the GCRA's bound, from any point).** For a mark ``m`` (a point in the sequence
    with TAT ``τ_m`` there) and any instant ``x``, the grants before ``m`` made at or after
    ``x`` total at most ``max(0, τ_m - x) / T`` starts: each such grant ``i`` moves the TAT
    from ``max(TAT, g_i) >= x`` up by ``n_i T``, the TAT never goes down, and it is ``τ_m``
    at ``m``.

    **Theorem.** Let ``M_m`` be the starts granted from mark ``m`` on, before ``j``. If
    ``M_m + n_j <= B`` and ``h_j <= g_j - τ_m + (B - M_m - n_j) T``, then no window holds
    more than ``B + w / T`` starts of ``j`` and the grants before it — whatever the lags.

    *Proof.* Take a window ``[a, a + w]`` and let ``x = a - D``, ``y = a + w - D``. A grant
    ``i`` with a start in it has ``g_i + D >= a`` and ``e_i + D <= a + w``: ``g_i >= x`` and
    ``e_i <= y``. Let ``j`` be the last such grant (in the sequence), whose hold satisfies the
    condition. The others come before it: those before ``m`` total at most
    ``max(0, τ_m - x) / T`` (lemma), those from ``m`` on at most ``M_m``. With
    ``K = (B - M_m - n_j) T >= 0``, the window holds at most ``B + w / T`` starts if
    ``max(0, τ_m - x) <= K + (y - x)``. When ``x >= τ_m`` that is ``0 <= K + w``. Otherwise it
    is ``τ_m <= K + y``, which holds because ``y >= e_j = g_j - h_j >= τ_m - K``. ∎

    Each grant may take the largest ``h_j`` any mark allows (each mark is a proof of its own;
    a window's last grant brings its own). The mark at ``j`` itself (``τ_m`` the TAT before
    it, ``M_m = 0``) gives the rate's slack as a single instant knows it: the burst left after
    ``j`` plus the time the rate was idle. It is short right after any grant of a rate
    with a burst below ``D / T``: one instant cannot tell a rate used at a twentieth of its
    bound from one at nine tenths. The marks can: the earlier one is at least
    :data:`PACE_WINDOW` back, and the starts counted since say how much of the rate was used.

    **Unpaced when far from the bound.** Say no span ``[t, t + W)`` (``W`` =
    :data:`PACE_WINDOW` ``>= D``) holds grants of more than ``u`` starts, with ``3u <= B`` and
    ``u T <= W``, instants never going back, and the state fresh or its marks kept for two
    rotations. Then every grant has slack ``>= D``: no hold. The earlier mark (set at ``p``)
    is at least ``W`` before ``g_j``; the grants since fall in ``[p, p + W)`` (later ones
    rotate) and in the recent mark's span, less than ``W`` up to ``g_j``: ``M + n_j <= 2u``.
    The TAT at ``p`` is at most ``p + u T`` (it is ``g_k`` plus ``T`` per start granted from
    some ``g_k`` on, at most ``u`` per ``W`` begun, and ``u T <= W``) or None. So the slack is
    at least ``W - u T + (B - 2u) T >= W >= D``. With the default burst (50 ms of starts) that
    is a rate used at up to a sixth of its bound over any 100 ms; a rate used more is paced
    in part, one at its bound in full."""
    interval = rate.interval
    best = timedelta(0)
    for mark in (Mark(state.tat, 0), state.recent, state.earlier):
        if mark is None or mark.count + starts > burst:
            continue
        if mark.tat is None:
            return cap
        best = max(best, now - mark.tat + interval * (burst - mark.count - starts))
    return min(cap, best)


def _micros(span: timedelta) -> int:
    return (span.days * 86_400 + span.seconds) * 1_000_000 + span.microseconds
