"""A timer filter that takes one schedule's occurrences: the keys ``schedule:<name>:<instant>``,
never those of a longer name that starts alike (``daily:eu``), in listings and bulk counts."""

from __future__ import annotations

from storekit import NOW, new_timer

from duetime.model import TimerFilter
from duetime.schedules import occurrence_prefix
from duetime.store import Store

KEYS = [
    "schedule:daily:2025-03-01T09:00:00Z",
    "schedule:daily:2025-03-02T09:00:00Z",
    "schedule:daily:eu:2025-03-01T08:00:00Z",  # schedule "daily:eu"
    "schedule:dailyx:2025-03-01T09:00:00Z",
    "daily-by-hand",
]


async def test_a_schedules_filter_takes_its_occurrences_only(store: Store) -> None:
    await store.put_timers([new_timer(key) for key in KEYS], "update", NOW)
    daily = TimerFilter(occurrence_prefix=occurrence_prefix("daily"))
    page = await store.list_timers("ns", daily, None, 50)
    assert [t.key for t in page.items] == [KEYS[1], KEYS[0]]
    eu = TimerFilter(occurrence_prefix=occurrence_prefix("daily:eu"))
    assert [t.key for t in (await store.list_timers("ns", eu, None, 50)).items] == [KEYS[2]]
    assert await store.count_matching("ns", "cancel", daily, NOW) == 2
    by_due = await store.list_timers("ns", daily, None, 50, "due")
    assert [t.key for t in by_due.items] == [KEYS[0], KEYS[1]]
