"""Store conformance, finding timers: a payload field equal to a value (the database's JSON
operators), the listing sorted by due, updated or attempts with cursors, a selection of keys
for the bulk actions, and the known event types by prefix. Both stores."""

from __future__ import annotations

from datetime import timedelta

import pytest
from storekit import NOW, new_timer
from test_conformance_operations import LEASE, kill

from duetime.model import Finish, Outcome, Status, TimerFilter
from duetime.model.finding import PayloadMatch, TimerSort
from duetime.store import Store
from duetime.timer_filters import payload_match


async def listed(
    store: Store, filter: TimerFilter, sort: TimerSort = "newest", limit: int = 2
) -> list[str]:
    found: list[str] = []
    cursor = None
    while True:
        page = await store.list_timers("ns", filter, cursor, limit, sort)
        found += [t.key for t in page.items]
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


PAYLOADS = {
    "int": {"customer": {"id": 42, "vip": True}},
    "float": {"customer": {"id": 42.0}},
    "text": {"customer": {"id": "42"}, "note": None},
    "other": {"customer": {"id": 7}, "status": "paid"},
    "flat": {"id": 42},
    "list": {"customer": [{"id": 42}]},
    "scalar": "42",
}


async def test_payload_search_compares_json_type_and_value(store: Store) -> None:
    timers = [new_timer(key, timedelta(hours=1), payload=p) for key, p in PAYLOADS.items()]
    await store.put_timers(timers, "error", NOW)

    async def match(text: str) -> set[str]:
        return set(await listed(store, TimerFilter(payload=payload_match(text))))

    assert await match("customer.id=42") == {"int", "float"}  # numbers equal, not "42"
    assert await match('customer.id="42"') == {"text"}
    assert await match("payload.customer.id=7") == {"other"}
    assert await match("status=paid") == {"other"}  # not JSON: the text as typed
    assert await match("customer.vip=true") == {"int"}
    assert await match("note=null") == {"text"}  # present and null, not absent
    assert await match("id=42") == {"flat"}
    assert await match("customer.id=43") == set()
    narrowed = TimerFilter(type="t.int", payload=payload_match("customer.id=42"))
    assert await listed(store, narrowed) == ["int"]


async def test_bulk_actions_take_a_selection_of_keys_and_a_payload_match(store: Store) -> None:
    await store.put_timers(
        [new_timer(f"d{n}", payload={"n": n % 2}) for n in range(5)], "error", NOW
    )
    await kill(store, [f"d{n}" for n in range(5)])
    selection = TimerFilter(keys=("d1", "d3", "unknown"))
    assert await store.count_matching("ns", "replay", selection, NOW) == 2
    changed, _ = await store.bulk_batch("ns", "replay", selection, 0, NOW, 100)
    assert changed == 2
    statuses = {
        t.key: t.status for t in (await store.list_timers("ns", TimerFilter(), None, 10)).items
    }
    assert statuses == {"d0": Status.DEAD, "d1": Status.SCHEDULED, "d2": Status.DEAD,
                        "d3": Status.SCHEDULED, "d4": Status.DEAD}  # fmt: skip
    by_payload = TimerFilter(status=Status.DEAD, payload=PayloadMatch(("n",), 0))
    assert await store.count_matching("ns", "replay", by_payload, NOW) == 3


async def test_listing_sorts_by_due_updated_and_attempts_across_pages(store: Store) -> None:
    dues = {"a": 3, "b": 1, "c": 2, "d": 1, "e": 5}
    await store.put_timers(
        [new_timer(k, timedelta(hours=h)) for k, h in dues.items()], "error", NOW
    )
    assert await listed(store, TimerFilter(), "due") == ["b", "d", "c", "a", "e"]
    assert await listed(store, TimerFilter(), "due", limit=1) == ["b", "d", "c", "a", "e"]
    for n, key in enumerate(["c", "a"]):  # changed later: first by updated
        await store.run_now("ns", key, NOW + timedelta(minutes=n + 1))
    assert (await listed(store, TimerFilter(), "updated"))[:2] == ["a", "c"]
    at = timedelta(hours=6)  # all due: each attempt of "e" and "b" dies
    await kill(store, ["a", "b", "c", "d", "e"], at)
    await store.replay("ns", "e", NOW + at + timedelta(seconds=2))
    await kill(store, ["e"], at + timedelta(seconds=3))
    assert await listed(store, TimerFilter(), "attempts") == ["e", "d", "c", "b", "a"]
    dead = TimerFilter(status=Status.DEAD)
    assert await listed(store, dead, "due", limit=3) == ["b", "d", "c", "a", "e"]


async def test_known_types_by_prefix_come_from_timers_and_schedules(store: Store) -> None:
    timers = [new_timer(k, type=t) for k, t in [("1", "order.paid"), ("2", "order.shipped"),
              ("3", "order.paid"), ("4", "email.welcome")]]  # fmt: skip
    await store.put_timers(timers, "error", NOW)
    await store.put_timers([new_timer("x", type="order.other", namespace="other")], "error", NOW)
    assert await store.list_types("ns", "order.", 10) == ["order.paid", "order.shipped"]
    assert await store.list_types("ns", "", 10) == ["email.welcome", "order.paid", "order.shipped"]
    assert await store.list_types("ns", "order.", 1) == ["order.paid"]
    assert await store.list_types("ns", "z", 10) == []


async def test_chart_counts_and_lateness_percentiles_by_type_and_node(store: Store) -> None:
    """Ten ``a`` timers started 0..9 s late (five on n1, five on n2) and one ``b``: the
    database's percentiles interpolate as percentile_cont does, on both stores."""
    late = [new_timer(f"a{n}", NOW - timedelta(seconds=n), type="a") for n in range(10)]
    await store.put_timers([*late, new_timer("b0", NOW, type="b")], "error", NOW)
    for node, count in (("n1", 5), ("n2", 6)):
        claimed = await store.claim_due("ns", None, NOW, count, node, LEASE)
        ends = [Finish(c.timer.id, c.attempt, Outcome.DONE, started_at=NOW) for c in claimed]
        assert await store.finish(ends, node, NOW + timedelta(seconds=1)) == set()
    since = NOW - timedelta(minutes=1)
    until = NOW + timedelta(minutes=1)

    async def chart(type: str | None = None, node: str | None = None) -> tuple[object, ...]:
        counts, lateness = await store.history.chart(
            "ns", since, until, timedelta(minutes=1), type, node
        )
        assert {c.bucket for c in counts} <= {1}
        (row,) = lateness
        return (
            sum(c.count for c in counts),
            row.count,
            row.p50_ms,
            row.p95_ms,
            row.p99_ms,
            row.max_ms,
        )

    assert await chart("a") == (10, 10, 4500, pytest.approx(8550), pytest.approx(8910), 9000)
    assert await chart("*") == (11, 11, 4000, pytest.approx(8500), pytest.approx(8900), 9000)
    assert await chart("a", "n1") == (5, 5, 7000, pytest.approx(8800), pytest.approx(8960), 9000)
    assert (await chart(node="n2"))[:3] == (6, 6, pytest.approx(1500))
    counts, lateness = await store.history.chart(
        "ns", since, until, timedelta(minutes=1), "c.*", None
    )
    assert (counts, lateness) == ([], [])
