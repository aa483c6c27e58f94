"""A metrics scrape reads every namespace's gauges in as many database calls whatever the
number of namespaces: a tenant that makes many namespaces cannot make every scrape (and the
server answering it) slower by as many round trips.

Each backend's calls are counted where every one of them passes: its database object's ``read``
and ``write``.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from storekit import NOW, new_timer

from duetime.clock import FrozenClock
from duetime.model import Status
from duetime.observability.metrics import read_snapshots
from duetime.store import Store


@pytest.fixture
def calls(store: Store) -> Iterator[list[str]]:
    """The names of the store's database calls (``read``/``write``) while the test runs."""
    db: Any = store._db  # type: ignore[attr-defined]
    made: list[str] = []
    originals = {name: getattr(db, name) for name in ("read", "write")}

    def counting(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            made.append(name)
            return originals[name](*args, **kwargs)

        return call

    for name in originals:
        setattr(db, name, counting(name))
    yield made
    for name, original in originals.items():
        setattr(db, name, original)


async def _fill(store: Store, namespaces: int) -> None:
    for index in range(namespaces):
        namespace = f"ns{index:03d}"
        await store.ensure_namespace(namespace, NOW)
        await store.put_timers(
            [
                new_timer(f"k{index}", timedelta(minutes=index + 1), namespace=namespace),
                new_timer(f"j{index}", timedelta(minutes=index + 2), namespace=namespace),
            ],
            "keep",
            NOW,
        )


async def test_gauges_of_every_namespace_at_once(store: Store) -> None:
    await _fill(store, 3)
    await store.ensure_namespace("empty", NOW)
    found = await store.namespace_gauges()
    assert set(found) >= {"ns000", "ns001", "ns002", "empty"}
    counts, earliest = found["ns001"]
    assert counts == {**dict.fromkeys(Status, 0), Status.SCHEDULED: 2}
    assert earliest == NOW + timedelta(minutes=2)
    assert found["empty"] == (dict.fromkeys(Status, 0), None)
    for namespace in ("ns000", "ns001", "ns002"):
        assert found[namespace][0] == await store.count_by_status(namespace)
        assert found[namespace][1] == await store.next_run_at(namespace, None)


async def test_a_scrape_costs_the_same_for_2_or_40_namespaces(
    store: Store, calls: list[str]
) -> None:
    clock = FrozenClock(NOW)
    await _fill(store, 2)
    calls.clear()
    few = await read_snapshots(store, clock)
    per_scrape = len(calls)
    await _fill(store, 40)
    calls.clear()
    many = await read_snapshots(store, clock)
    assert len(few) >= 2
    assert len(many) >= 40
    assert len(calls) == per_scrape == 1
    assert many["ns039"].counts[Status.SCHEDULED] == 2
