"""What the schedules part shows of the deadline watch: each schedule read with what the watch
knows of it (its misses, its latest success), and the latest misses themselves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from duetime.model import Schedule
from duetime.store.protocol import Store


def watched(schedule: Schedule) -> bool:
    return schedule.must_succeed_within is not None or schedule.pause_after_failures is not None


async def with_watch(store: Store, schedules: Sequence[Schedule]) -> list[Schedule]:
    """``schedules``, those the watch keeps a row of with it (one read for them all; none
    when no schedule has a deadline or a pause setting)."""
    ids = [s.id for s in schedules if watched(s)]
    if not ids:
        return list(schedules)
    watches = await store.deadlines.watches(ids)
    return [replace(s, watch=watches[s.id]) if s.id in watches else s for s in schedules]
