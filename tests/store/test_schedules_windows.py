"""A backlog walked in windows of ids, on each backend: every due occurrence made once, in
the table's order, nothing of another namespace or a paused schedule touched; where few of
the ids are due, the windows stop and the rest is made earliest first."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from test_schedules_batches import START, app_on, expected_keys, mixed
from test_schedules_materializer import all_timers

from duetime import AsyncApp, FrozenClock
from duetime.model import TimerFilter
from duetime.schedules import ScheduleRequest
from duetime.services import materializer as materializer_module
from duetime.services.materializer import Materializer
from duetime.store import Store

BATCH = 7


def recorded(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[tuple[range | None, int]]:
    """Each materialising transaction's window (None: earliest first) and its due rows."""
    calls: list[tuple[range | None, int]] = []
    original = store.schedules.materialize

    async def materialize(*args: Any, ids: range | None = None) -> Any:
        result = await original(*args, ids=ids)
        calls.append((ids, result.due))
        return result

    monkeypatch.setattr(store.schedules, "materialize", materialize)
    return calls


async def made_once(
    app: AsyncApp, worker: Materializer, until: datetime, paused: frozenset[str] = frozenset()
) -> None:
    made = Counter(t.key for t in await all_timers(app))
    expected = await expected_keys(app, until, worker.lookahead)
    assert made == Counter({k: n for k, n in expected.items() if k.split(":")[1] not in paused})
    assert made
    assert not [k for k in made if k.split(":")[1] in paused]


async def test_a_backlog_is_made_window_by_window_in_id_order(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    other = AsyncApp(store.url, "elsewhere", clock=clock, store=store)
    rows = BATCH * store.schedules.backlog_growth
    count = materializer_module.WINDOWS_FROM * rows + 3 * rows
    requests = mixed(count)
    # Another namespace's schedules and paused ones among the ids, all due too.
    for n in range(0, count, 10):
        await other.schedules.add(f"other-{n}", "t", cron="*/45 * * * *")
        requests[n] = dataclasses.replace(requests[n], active=False)
    for start in range(0, count, 500):
        await app.schedules.add_many(requests[start : start + 500])
    calls = recorded(store, monkeypatch)
    worker = app.schedules.materializer(check_tzdata=False, batch_size=BATCH)
    until = START + timedelta(days=1, hours=1)
    clock.set(until)
    await worker.tick(clock.now())

    await made_once(app, worker, until, frozenset(r.name for r in requests if not r.active))
    elsewhere = await store.list_timers("elsewhere", TimerFilter(), None, 10)
    assert elsewhere.items == []
    # (Lanes finish their windows in any order.)
    windows = sorted((ids for ids, _ in calls if ids is not None), key=lambda w: w.start)
    assert len(windows) > materializer_module.WINDOWS_FROM // 2
    assert [i for w in windows for i in w] == list(range(windows[0].start, windows[-1].stop))
    assert calls[-1][0] is None  # then earliest first: what the windows left (here nothing)
    # A second round finds nothing left.
    assert await worker.tick(clock.now()) == 0


async def test_windows_stop_where_few_of_the_ids_are_due(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FrozenClock(START)
    app = app_on(store, clock)
    rows = BATCH * store.schedules.backlog_growth
    far = AsyncApp(store.url, "far", clock=clock, store=store)
    # Most ids belong to schedules not due: another namespace's, in a year.
    count = materializer_module.WINDOWS_FROM * rows
    ours = mixed(count // 8 + 2 * rows)
    later = START + timedelta(days=365)
    for start in range(0, count, 500):
        await far.schedules.add_many(
            [
                ScheduleRequest(name=f"far-{n}", type="t", every=3600, start_at=later)
                for n in range(start, min(count, start + 500))
            ]
        )
        await app.schedules.add_many(ours[start // 8 : (start + 500) // 8])
    await app.schedules.add_many(ours[count // 8 :])
    calls = recorded(store, monkeypatch)
    worker = app.schedules.materializer(check_tzdata=False, batch_size=BATCH)
    until = START + timedelta(days=1, hours=1)
    clock.set(until)
    await worker.tick(clock.now())

    await made_once(app, worker, until)
    windows = [ids for ids, _ in calls if ids is not None]
    assert 0 < len(windows) < 20  # stopped early, not walked to the end
    assert [ids for ids, due in calls[len(windows) + 1 :] if ids is not None] == []
