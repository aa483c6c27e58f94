"""Store conformance, what each rule of ``limits ls`` holds: counted in the database, so a page
of rules costs one row per rule whatever the number of types a namespace holds (50,000 held
types once made each listing 50,000 rows matched in Python, which no statement timeout ends,
and the other tenants' reads waited). Each count is checked against the rows a claim under the
rule takes (``FlowPlan.counted_by``), on both stores."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from storekit import NOW, new_timer

from duetime.model import FanOut, Status, TimerFilter
from duetime.model.flow_rules import FlowRule, RuleFilter, destination_rule, plan_of
from duetime.store import Store
from duetime.store.postgres import flow_control as postgres_limits
from duetime.store.sqlite import flow_control as sqlite_limits
from duetime.store.sqlite.store import SqliteStore
from duetime.timemath.ratelimit import Rate

LEASE = NOW + timedelta(seconds=30)
HOUR = Rate(1, timedelta(hours=1))


def glob(pattern: str, text: str) -> bool:
    """``*`` any run of characters, as both stores match a rule's pattern."""
    parts = pattern.split("*")
    if len(parts) == 1:
        return text == pattern
    if not (text.startswith(parts[0]) and text.endswith(parts[-1])):
        return False
    at, end = len(parts[0]), len(text) - len(parts[-1])
    for part in parts[1:-1]:
        found = text.find(part, at, end)
        if found < 0:
            return False
        at = found + len(part)
    return at <= end


def takes(rows: RuleFilter, type: str, destination: str | None) -> bool:
    """Whether a claim filtered by ``rows`` takes a row of ``type`` to ``destination``."""
    if rows.destination is not None and destination != rows.destination:
        return False
    if destination is not None and destination in rows.destinations:
        return False
    return glob(rows.only, type) and not any(glob(p, type) for p in rows.excluded)


async def delivery(store: Store, namespace: str, key: str, type: str, destination: str) -> None:
    """A due delivery row of an event of ``type`` to ``destination``."""
    await store.put_timers(
        [new_timer(key, NOW - timedelta(seconds=30), namespace=namespace, type=type)],
        "error",
        NOW - timedelta(minutes=1),
    )
    (event,) = await store.claim_due(namespace, None, NOW, 1, "n1", LEASE)
    fan = FanOut(event.timer.id, event.attempt, key, (destination,))
    assert await store.fan_out([fan], "n1", NOW) == set()


async def scenario(store: Store, namespace: str, rng: random.Random) -> list[FlowRule]:
    """Rules of random globs (limits, pauses, both; a destination's), running and due rows of
    random types, deliveries to destinations with a rule and without."""
    limits = store.limits
    patterns = {"".join(rng.choice("ab.*") for _ in range(rng.randint(1, 4))) for _ in range(6)}
    for pattern in sorted(patterns):
        limited, paused = rng.random() < 0.7, rng.random() < 0.4
        if limited or not paused:
            await limits.put_limit(FlowRule(namespace, pattern, concurrency=2), NOW)
        if paused:
            await limits.set_paused(namespace, pattern, True, NOW)
    if rng.random() < 0.7:
        await limits.put_limit(destination_rule(namespace, "hook", HOUR, None), NOW)
    types = ["".join(rng.choice("ab.") for _ in range(rng.randint(1, 4))) for _ in range(8)]
    for n in range(3):
        await delivery(store, namespace, f"d{n}", rng.choice(types), rng.choice(["hook", "bus"]))
    await store.put_timers(
        [
            new_timer(f"r{n}", NOW - timedelta(seconds=n), namespace=namespace, type=t)
            for n, t in enumerate(rng.sample(types, 3))
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    await store.claim_due(namespace, None, NOW, 3, "n1", LEASE)  # some running
    await store.put_timers(
        [
            new_timer(
                f"h{n}", NOW + timedelta(seconds=rng.randint(-60, 5)), namespace=namespace, type=t
            )
            for n, t in enumerate(rng.choices(types, k=12))
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    return await limits.list_rules(namespace)


async def test_each_rule_counts_the_rows_its_claim_takes(store: Store) -> None:
    rng = random.Random(20261207)
    for round in range(12):
        namespace = f"ns{round}"
        rules = await scenario(store, namespace, rng)
        timers = (await store.list_timers(namespace, TimerFilter(), None, 1000, "newest")).items
        plan = plan_of(rules)
        size = rng.randint(1, max(1, len(rules)))
        cursor, shown = None, []
        while True:
            page = await store.limits.status(namespace, NOW, cursor, size)
            shown += page.items
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert [s.rule.pattern for s in shown] == sorted(r.pattern for r in rules)
        for status in shown:
            rows = plan.counted_by(status.rule)
            mine = [t for t in timers if takes(rows, t.type, t.destination)]
            running = [t for t in mine if t.status is Status.RUNNING]
            held = [
                t
                for t in mine
                if t.status in (Status.SCHEDULED, Status.RETRYING) and t.run_at <= NOW
            ]
            expected = (len(running), len(held), min((t.run_at for t in held), default=None))
            got = (status.running, status.held, status.oldest_held_at)
            assert got == expected, (round, status.rule, rules)


def rows_fetched(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of rows each statement of the limits part brings into Python."""
    seen: list[int] = []
    module: Any = sqlite_limits if isinstance(store, SqliteStore) else postgres_limits
    name = "_rows" if isinstance(store, SqliteStore) else "fetch_all"
    original: Callable[..., Any] = getattr(module, name)

    def counted(rows: list[Any]) -> list[Any]:
        seen.append(len(rows))
        return rows

    if isinstance(store, SqliteStore):
        monkeypatch.setattr(module, name, lambda *a, **k: counted(original(*a, **k)))
    else:

        async def fetched(*a: Any, **k: Any) -> Any:
            return counted(await original(*a, **k))

        monkeypatch.setattr(module, name, fetched)
    return seen


TYPES = 3_000


async def test_a_page_of_rules_brings_a_row_per_rule_whatever_the_types_held(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3,000 held types under 3 rules: the listing brings the rules and their 3 counts."""
    for pattern in ("t.*", "t.1*", "u.*"):
        await store.limits.put_limit(FlowRule("ns", pattern, concurrency=1), NOW)
    await store.limits.set_paused("ns", "t.2*", True, NOW)
    timers = [
        new_timer(f"k{n}", NOW - timedelta(seconds=n % 600), type=f"t.{n}") for n in range(TYPES)
    ]
    for start in range(0, TYPES, 500):
        await store.put_timers(timers[start : start + 500], "error", NOW - timedelta(hours=1))
    seen = rows_fetched(store, monkeypatch)
    page = await store.limits.status("ns", NOW, None, 3)
    assert max(seen) <= 4, seen  # the rules (and one more), then one count per rule shown
    held = {s.rule.pattern: s.held for s in page.items}
    ones = sum(1 for n in range(TYPES) if str(n).startswith("1"))
    twos = sum(1 for n in range(TYPES) if str(n).startswith("2"))
    assert held == {"t.*": TYPES - ones, "t.1*": ones, "t.2*": twos}
    assert page.next_cursor is not None
    rest = await store.limits.status("ns", NOW, page.next_cursor, 3)
    assert [(s.rule.pattern, s.held) for s in rest.items] == [("u.*", 0)]
