"""A rate's marks of its recent grants (``timemath.ratelimit.pace_slack``), as properties: the
bound ``burst + w / interval`` holds in every window whatever each start's lag (up to the
pacing) and whatever the grants; a rate used at no more than a third of its burst over any
pacing window leaves every grant unpaced; one at its bound is paced in full."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from duetime.timemath.ratelimit import (
    PACE_WINDOW,
    Mark,
    Rate,
    RateState,
    allowance,
    pace_slack,
    rotate,
    spend_state,
)
from duetime.worker.flow import RATE_START_DELAY

T0 = datetime(2026, 1, 1, tzinfo=UTC)
D = RATE_START_DELAY
US = timedelta(microseconds=1)
D_US = D // US
RATES = [
    Rate(1000, timedelta(seconds=1)),
    Rate(10_000, timedelta(seconds=1)),
    Rate(7, timedelta(milliseconds=10)),  # an interval not a whole number of microseconds
]


@dataclass
class Granted:
    at: int  # µs after T0
    rows: int
    slack: int  # µs, 0 to D


def run(rate: Rate, burst: int, steps: list[tuple[int, int]]) -> list[Granted]:
    """Grants at the given gaps (µs), each wanting the given rows, from a fresh state."""
    state = RateState()
    now_us = 0
    grants: list[Granted] = []
    for gap, want in steps:
        now_us += gap
        now = T0 + now_us * US
        state = rotate(state, now)
        rows = min(want, allowance(rate, burst, state.tat, now))
        if rows <= 0:
            continue
        slack = pace_slack(rate, burst, state, now, rows, D)
        grants.append(Granted(now_us, rows, slack // US))
        state = spend_state(rate, state, now, rows)
    return grants


def most_over_bound(starts: list[int], burst: int, interval_us: int) -> int:
    """The most any window's starts exceed the bound, in µs of the rate: the largest
    ``(k - i + 1 - burst) * interval - (s_k - s_i)`` over sorted starts ``i <= k`` (> 0: broken)."""
    starts = sorted(starts)
    worst = -(10**18)
    least = 10**18  # min over i <= k of i * interval - s_i
    for k, s in enumerate(starts):
        least = min(least, k * interval_us - s)
        worst = max(worst, (k + 1 - burst) * interval_us - s - least)
    return worst


gaps = st.one_of(
    st.sampled_from([0, 1, 250, 1000, 2000, 20_000, 50_000, 99_999, 100_000, 150_000]),
    st.integers(0, 400_000),
)
steps_st = st.lists(st.tuples(gaps, st.integers(1, 80)), min_size=1, max_size=120)


@settings(max_examples=400, deadline=None)
@given(
    rate=st.sampled_from(RATES),
    burst=st.sampled_from([1, 3, 5, 50, 200]),
    steps=steps_st,
    lags=st.lists(st.sampled_from([0.0, 1.0, 0.5, 0.1, 0.9]), min_size=1, max_size=50),
    sawtooth=st.sampled_from([None, 1_000, 10_000, 50_000, D_US]),
)
def test_the_bound_holds_whatever_the_lags(
    rate: Rate,
    burst: int,
    steps: list[tuple[int, int]],
    lags: list[float],
    sawtooth: int | None,
) -> None:
    """Each row starts at ``max(grant + D - slack, grant + lag)``, lag up to ``D``: drawn per
    grant, or a sawtooth that lags each grant until the end of its span of ``sawtooth`` µs
    (the grants of each span then start together, as far as their holds let them)."""
    interval_us = rate.interval // US
    starts: list[int] = []
    for i, g in enumerate(run(rate, burst, steps)):
        for r in range(g.rows):
            if sawtooth is None:
                lag = int(D_US * lags[(i + r) % len(lags)])
            else:
                lag = D_US - g.at % sawtooth
            starts.append(max(g.at + D_US - g.slack, g.at + lag))
    assert most_over_bound(starts, burst, interval_us) <= 0


def test_without_the_hold_the_lags_would_break_the_bound() -> None:
    """The check above can fail: a rate at its bound, each grant's rows started as soon as a
    worker had them, the early ones late and the late ones early, bunch over the bound."""
    rate = Rate(1000, timedelta(seconds=1))
    steps = [(0, 5)] + [(1000, 1)] * 100  # the burst, then one a millisecond
    grants = run(rate, 5, steps)
    assert all(g.slack == 0 for g in grants[1:])  # at the bound: paced in full
    bunched = [max(g.at, D_US) for g in grants for _ in range(g.rows)]  # all at D
    assert most_over_bound(bunched, 5, 1000) > 0
    paced = [g.at + D_US - g.slack for g in grants for _ in range(g.rows)]
    assert most_over_bound(paced, 5, 1000) <= 0


@settings(max_examples=300, deadline=None)
@given(
    rate=st.sampled_from(RATES),
    burst=st.sampled_from([3, 5, 50, 200, 5000]),
    steps=steps_st,
)
def test_a_rate_used_lightly_is_never_paced(
    rate: Rate, burst: int, steps: list[tuple[int, int]]
) -> None:
    """No span of PACE_WINDOW with grants of more than ``u`` starts, ``3u <= burst`` and
    ``u`` within the rate over the window: every grant's slack covers the whole pacing."""
    interval_us = rate.interval // US
    window_us = PACE_WINDOW // US
    u = min(burst // 3, window_us // interval_us)
    light: list[tuple[int, int]] = []
    granted: list[tuple[int, int]] = []  # (µs, rows) of the light sequence
    now_us = 0
    for gap, want in steps:
        now_us += gap
        recent = sum(rows for at, rows in granted if at > now_us - window_us)
        rows = min(want, u - recent)
        if rows > 0:
            light.append((now_us - (granted[-1][0] if granted else 0), rows))
            granted.append((now_us, rows))
    grants = run(rate, burst, light)
    assert sum(g.rows for g in grants) == sum(rows for _, rows in granted)  # never limited
    assert all(g.slack == D_US for g in grants)


def test_a_rate_near_its_bound_is_paced() -> None:
    """Used at nine tenths of the rate for a while, with a burst of 50 ms of starts: the marks
    show the rate busy, and a grant waits for part of the pacing, as a single instant says."""
    rate = Rate(1000, timedelta(seconds=1))
    grants = run(rate, 50, [(10_000, 9)] * 60)
    assert all(g.rows == 9 for g in grants)
    assert all(0 < g.slack < D_US for g in grants[30:])


def test_rotation_keeps_the_earlier_mark_a_window_back() -> None:
    state = rotate(RateState(T0), T0)
    assert state == RateState(T0, T0, Mark(T0, 0), None)
    rate = Rate(1000, timedelta(seconds=1))
    state = spend_state(rate, state, T0, 3)
    assert state.recent == Mark(T0, 3)
    later = T0 + PACE_WINDOW - US
    assert rotate(state, later) is state  # within the window: unchanged
    moved = rotate(state, T0 + PACE_WINDOW)
    assert moved.earlier == Mark(T0, 3)
    assert moved.recent == Mark(state.tat, 0)
    assert moved.recent_at == T0 + PACE_WINDOW


def test_the_window_covers_the_workers_pacing() -> None:
    assert PACE_WINDOW >= RATE_START_DELAY  # else a light rate's earlier mark may be too near
