"""A rate's pacing of granted rows: none far from the bound, the full pacing at it, and the
bound kept either way whatever each start's lag (up to the pacing), on simulated grants."""

from __future__ import annotations

import random
from bisect import bisect_right
from datetime import UTC, datetime, timedelta

import pytest

from duetime.model import ClaimFilter
from duetime.model.flow_rules import FlowRule, plan_of
from duetime.store.flow_grants import (
    MAX_SLACK,
    all_governed,
    grant,
    rate_state,
    slack,
    spent,
    state_params,
)
from duetime.timemath.ratelimit import Mark, Rate, RateState
from duetime.worker.flow import RATE_START_DELAY

T0 = datetime(2025, 1, 1, tzinfo=UTC)
D = RATE_START_DELAY
MS = timedelta(milliseconds=1)


def row(rate: Rate, burst: int | None) -> dict[str, object]:
    return {
        "rate_count": rate.count,
        "rate_period_us": rate.period // timedelta(microseconds=1),
        "burst": burst,
        "concurrency": None,
        "partition_by": None,
    }


def test_a_fresh_or_idle_rate_leaves_its_rows_unpaced() -> None:
    rate = Rate(1_000_000, timedelta(seconds=1))
    fresh = grant(row(rate, None), RateState(), 0, 500, T0)
    assert fresh.rows == 500
    assert slack(fresh, 500) >= D  # no grant before it: nothing to keep apart from
    # Default burst (50 ms of starts): after 60 ms without a grant, 500 more start at once.
    idle = grant(row(rate, None), RateState(T0 - 60 * MS), 0, 500, T0)
    assert slack(idle, 500) >= D
    # An explicit burst of 150 ms of starts covers the pacing even right after a grant.
    busy = grant(row(rate, 150_000), RateState(T0 + MS), 0, 500, T0)
    assert slack(busy, 500) >= D


def test_a_rate_at_its_bound_is_paced_in_full() -> None:
    rate = Rate(1000, timedelta(seconds=1))  # 1 ms apart, a burst of 50
    tat = T0 + 49 * MS  # 49 of the 50 spent
    at_bound = grant(row(rate, None), RateState(tat), 0, 100, T0)
    assert at_bound.rows == 1
    assert slack(at_bound, 1) == timedelta(0)
    assert slack(grant(row(rate, None), RateState(), 0, 1, T0), 1) == MAX_SLACK


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("burst", [1, 5, 50, 200])
def test_paced_starts_keep_the_rates_bound_whatever_their_lag(seed: int, burst: int) -> None:
    """Claims at random instants (some close, some far apart) each want a random number of
    rows; each row starts after a random lag up to the pacing, and no earlier than its pacing
    instant. In every window ``w`` (ending at a start), starts ≤ burst + w / interval."""
    rng = random.Random(seed * 1000 + burst)
    rate = Rate(1000, timedelta(seconds=1))
    interval = rate.interval
    state = RateState()
    now = T0
    starts: list[datetime] = []
    for _ in range(400):
        now += rng.choice([timedelta(0), MS / 4, 2 * MS, 20 * MS, 80 * MS, 300 * MS])
        granted = grant(row(rate, burst), state, 0, rng.randint(1, 60), now)
        n = granted.rows
        if n <= 0:
            continue
        state = spent(granted, now, n) or state
        paced = now - slack(granted, n) + D
        for _ in range(n):
            lag = D * rng.choice([0.0, 1.0, rng.random()])  # the extremes most
            starts.append(max(now + lag, paced))
    starts.sort()
    assert len(starts) > 200
    for window in (timedelta(0), MS, 10 * MS, 100 * MS, timedelta(seconds=1)):
        most = max(bisect_right(starts, s + window) - i for i, s in enumerate(starts))
        assert most <= burst + window / interval, (window, most)


def test_claims_whose_every_type_is_governed_skip_the_ungoverned() -> None:
    rules = plan_of(
        [
            FlowRule("ns", "crm.*", concurrency=5),
            FlowRule("ns", "report", paused=True),
        ]
    )
    assert all_governed(rules, ["crm.sync", "report"])
    assert all_governed(rules, ClaimFilter.of_types(["crm.sync"]))
    assert not all_governed(rules, ["crm.sync", "other"])
    assert not all_governed(rules, None)  # every type
    assert not all_governed(rules, [])
    assert not all_governed(rules, ClaimFilter(patterns=("crm.*",)))
    assert not all_governed(rules, ClaimFilter(types=("crm.sync",), destinations=("hook",)))


def stored(**columns: object) -> dict[str, object]:
    marks = ("recent_at", "recent_tat", "recent_count", "earlier_tat", "earlier_count")
    return {"tat": None, "marks_tat": None, **dict.fromkeys(marks), **columns}


def test_a_rows_marks_hold_only_with_the_tat_they_were_counted_to() -> None:
    def same(at: object) -> datetime:
        assert isinstance(at, datetime)
        return at

    kept = stored(tat=T0, marks_tat=T0, recent_at=T0 - MS, recent_tat=T0 - 2 * MS, recent_count=4)
    assert rate_state(kept, same) == RateState(T0, T0 - MS, Mark(T0 - 2 * MS, 4), None)
    earlier = {**kept, "earlier_tat": None, "earlier_count": 9}
    assert rate_state(earlier, same).earlier == Mark(None, 9)
    # Written before the marks were kept, or by a version that does not keep them: a TAT
    # they were not counted up to. Only the TAT counts.
    assert rate_state(stored(tat=T0), same) == RateState(T0)
    assert rate_state({**kept, "tat": T0 + MS}, same) == RateState(T0 + MS)
    legacy = {k: v for k, v in kept.items() if k == "tat"}  # a row without the columns
    assert rate_state(legacy, same) == RateState(T0)


def test_a_rows_state_round_trips_through_its_parameters() -> None:
    rate = Rate(1000, timedelta(seconds=1))
    granted = grant(row(rate, None), RateState(), 0, 5, T0)
    state = spent(granted, T0, 5)
    assert state is not None
    params = state_params(state, lambda at: at)
    columns = {k: v for k, v in params.items() if k != "tat"}
    assert (
        rate_state(stored(tat=params["tat"], marks_tat=params["tat"], **columns), lambda a: a)
        == state
    )
