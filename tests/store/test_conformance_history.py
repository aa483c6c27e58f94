"""Store conformance, history side: retention (archive / prune) and the event log.

Every test runs against SQLite and PostgreSQL. The clock is a parameter (``now``): moving it on
by hours or months is how time passes here; nothing sleeps. On PostgreSQL finished timers move
to the history tables ``archive_after`` they finished; on SQLite they stay put until pruned.
Either way they must read back the same until ``retention`` has passed.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime.errors import InvalidInput
from duetime.model import Attempt, FanOut, Finish, Outcome, Page, Status, Timer, TimerFilter
from duetime.model.history import EventFilter, LoggedEvent, MaintenanceReport, RetentionPolicy
from duetime.store import Store
from duetime.store.parts import HistoryStore

POLICY = RetentionPolicy(retention=timedelta(days=30), archive_after=timedelta(hours=1))
LATER = NOW + timedelta(hours=2)
"""Past archive_after for everything finished at NOW, well within the retention."""
MUCH_LATER = NOW + timedelta(days=62)
"""Past the retention, and the month after (so PostgreSQL drops March's partitions too)."""
LEASE = NOW + timedelta(minutes=5)


def hist(store: Store) -> HistoryStore:
    return store.history


async def finish(store: Store, key: str, outcome: Outcome, at: timedelta = timedelta(0)) -> None:
    """Claim ``key`` (due at NOW) and end its attempt with ``outcome``."""
    timer = await store.get_timer("ns", key)
    assert timer is not None
    (claimed,) = await store.claim_due("ns", [timer.type], NOW + at, 1, "n1", LEASE + at)
    run_at = NOW + at + timedelta(minutes=1) if outcome is Outcome.RETRY else None
    lost = await store.finish(
        [
            Finish(
                timer.id,
                claimed.attempt,
                outcome,
                error=f"{outcome}!",
                run_at=run_at,
                traceback=None if outcome is Outcome.DONE else f"Traceback: {outcome}\n",
                started_at=NOW + at,  # as the worker reports it
            )
        ],
        "n1",
        NOW + at + timedelta(seconds=1),
    )
    assert lost == set()


async def every_state(store: Store) -> dict[str, Timer]:
    """One timer in each state, all due at NOW, each of its own type, subject ``s``.

    The newest is pending (SQLite never prunes its newest row, so ids are not reused).
    """
    keys = ["done", "cancelled", "expired", "dead", "running", "retrying", "unfired-cancel"]
    keys.append("pending")
    await store.put_timers([new_timer(k, subject="s") for k in keys], "error", NOW)
    await finish(store, "done", Outcome.DONE)
    await finish(store, "cancelled", Outcome.CANCELLED)
    await finish(store, "expired", Outcome.EXPIRED)
    await finish(store, "dead", Outcome.DEAD)
    await finish(store, "retrying", Outcome.RETRY)
    timer = await store.get_timer("ns", "running")
    assert timer is not None
    await store.claim_due("ns", [timer.type], NOW, 1, "n1", LEASE)
    await store.cancel("ns", "unfired-cancel", NOW)
    return {k: t for k in keys if (t := await store.get_timer("ns", k)) is not None}


async def snapshot(store: Store, keys: list[str]) -> dict[str, tuple[Timer | None, list[Attempt]]]:
    found = {}
    for key in keys:
        timer = await store.get_timer("ns", key)
        attempts = [] if timer is None else await store.list_attempts(timer.id)
        found[key] = (timer, list(attempts))
    return found


async def test_archived_timers_read_back_as_they_were(store: Store, backend: str) -> None:
    before = await every_state(store)
    keys = list(before)
    read = await snapshot(store, keys)
    report = await hist(store).maintain(POLICY, LATER)
    # done, expired and both cancelled ones; never dead, never unfinished
    expected = 4 if backend == "postgres" else 0
    assert report.archived == expected
    assert report.deleted == 0
    assert await snapshot(store, keys) == read
    assert [t.status for t, _ in read.values() if t] == [
        Status.DONE,
        Status.CANCELLED,
        Status.EXPIRED,
        Status.DEAD,
        Status.RUNNING,
        Status.RETRYING,
        Status.CANCELLED,
        Status.SCHEDULED,
    ]
    by_subject = await store.list_timers("ns", TimerFilter(subject="s"), None, 50)
    assert [t.key for t in by_subject.items] == keys[::-1]
    assert by_subject.items == [before[k] for k in keys[::-1]]


async def test_listings_page_across_the_hot_table_and_the_history(store: Store) -> None:
    await store.put_timers([new_timer(f"k{i}", subject="s") for i in range(7)], "error", NOW)
    for i in (0, 2, 3, 5):
        await finish(store, f"k{i}", Outcome.DONE)
    await hist(store).maintain(POLICY, LATER)
    keys: list[str] = []
    cursor = None
    while True:
        page = await store.list_timers("ns", TimerFilter(subject="s"), cursor, 2)
        keys += [t.key for t in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert keys == [f"k{i}" for i in reversed(range(7))]
    done = await store.list_timers("ns", TimerFilter(status=Status.DONE), None, 10)
    assert [t.key for t in done.items] == ["k5", "k3", "k2", "k0"]
    pending = await store.list_timers("ns", TimerFilter(status=Status.SCHEDULED), None, 10)
    assert [t.key for t in pending.items] == ["k6", "k4", "k1"]


async def test_nothing_unfinished_is_archived_or_deleted(store: Store) -> None:
    before = await every_state(store)
    unfinished = ["running", "retrying", "pending"]
    keep = await snapshot(store, unfinished)
    for now in (LATER, MUCH_LATER, NOW + timedelta(days=3650)):
        await hist(store).maintain(POLICY, now)
        assert await snapshot(store, unfinished) == keep
    assert {k for k, t in before.items() if not t.status.is_final} == set(unfinished)


async def test_dead_letters_stay_replayable_until_the_retention(store: Store) -> None:
    await every_state(store)
    await hist(store).maintain(POLICY, NOW + timedelta(days=29))
    dead = await store.list_timers("ns", TimerFilter(status=Status.DEAD), None, 10)
    assert [t.key for t in dead.items] == ["dead"]
    await hist(store).maintain(POLICY, NOW + timedelta(days=31))
    assert await store.get_timer("ns", "dead") is None
    assert (await store.list_timers("ns", TimerFilter(status=Status.DEAD), None, 10)).items == []


async def test_a_dead_letter_replayed_before_the_retention_is_kept(store: Store) -> None:
    await every_state(store)
    replayed = await store.replay("ns", "dead", NOW + timedelta(days=29))
    await hist(store).maintain(POLICY, NOW + timedelta(days=31))
    assert await store.get_timer("ns", "dead") == replayed


async def test_everything_finished_is_gone_after_the_retention(store: Store) -> None:
    states = await every_state(store)
    await hist(store).maintain(POLICY, LATER)  # PostgreSQL: archived into March's partition
    report = await hist(store).maintain(POLICY, MUCH_LATER)
    finished = [k for k, t in states.items() if t.status.is_final]
    for key in finished:
        assert await store.get_timer("ns", key) is None, key
        assert await store.list_attempts(states[key].id) == []
    assert report.deleted >= 1  # dead letters leave the hot table on both backends
    left = await store.list_timers("ns", TimerFilter(), None, 50)
    assert [t.key for t in left.items] == ["pending", "retrying", "running"]
    assert (await hist(store).list_events("ns", EventFilter(), None, 50)).items == [
        LoggedEvent(t, tuple(await store.list_attempts(t.id)))
        for t in left.items
        if t.fired_at is not None
    ]


async def test_maintaining_twice_changes_nothing_more(store: Store) -> None:
    await every_state(store)
    first = await hist(store).maintain(POLICY, LATER)
    keys = ["done", "cancelled", "expired", "dead", "running", "retrying", "pending"]
    after = await snapshot(store, keys)
    second = await hist(store).maintain(POLICY, LATER)
    assert second == MaintenanceReport()
    assert await snapshot(store, keys) == after
    assert first.archived in (0, 4)


async def test_nodes_maintaining_at_once_share_the_work(
    store: Store, make_store: StoreFactory, backend: str
) -> None:
    await store.put_timers([new_timer(f"k{i:03}", type="t") for i in range(120)], "error", NOW)
    claimed = await store.claim_due("ns", None, NOW, 120, "n1", LEASE)
    await store.finish([Finish(c.timer.id, c.attempt, Outcome.DONE) for c in claimed], "n1", NOW)
    await store.put_timers([new_timer("newest", type="t")], "error", NOW)
    others = [await make_store() for _ in range(2)]
    small = RetentionPolicy(POLICY.retention, POLICY.archive_after, batch_size=7)
    reports = await asyncio.gather(*(hist(s).maintain(small, LATER) for s in [store, *others]))
    assert sum(r.archived for r in reports) == (120 if backend == "postgres" else 0)
    reports = await asyncio.gather(*(hist(s).maintain(small, MUCH_LATER) for s in [store, *others]))
    if backend == "sqlite":
        assert sum(r.deleted for r in reports) == 120
    left = await store.list_timers("ns", TimerFilter(), None, 200)
    assert [t.key for t in left.items] == ["newest"]


async def test_a_key_can_be_used_again_once_its_timer_is_gone_from_the_hot_table(
    store: Store, backend: str
) -> None:
    await store.put_timers([new_timer("k", subject="s"), new_timer("z")], "error", NOW)
    await finish(store, "k", Outcome.DONE)
    first = await store.get_timer("ns", "k")
    assert first is not None
    kept = await store.put_timers([new_timer("k", subject="s")], "keep", LATER)
    assert [r.action for r in kept] == ["kept"]
    await hist(store).maintain(POLICY, LATER)
    now = LATER + timedelta(minutes=1)
    again = await store.put_timers([new_timer("k", LATER, subject="s")], "update", now)
    if backend == "postgres":  # archived: the key is free in the hot table
        assert [r.action for r in again] == ["created"]
        assert again[0].timer.id > first.id
        assert await store.get_timer("ns", "k") == again[0].timer
        listed = await store.list_timers("ns", TimerFilter(subject="s"), None, 10)
        assert [t.id for t in listed.items] == [again[0].timer.id, first.id]
    else:  # still in the one table: the finished timer is kept, as before
        assert [r.action for r in again] == ["kept"]
        assert again[0].timer == first


async def test_the_event_log_lists_fired_timers_newest_first_with_their_deliveries(
    store: Store,
) -> None:
    types = {"a": "order.paid", "b": "order.refunded", "c": "user_created", "d": "userXcreated"}
    await store.put_timers(
        [new_timer(k, type=t) for k, t in types.items()]
        + [new_timer("later", timedelta(days=1), type="order.paid")],
        "error",
        NOW,
    )
    for minute, key in enumerate("abcd"):
        at = timedelta(minutes=minute)
        await finish(store, key, Outcome.RETRY if key == "b" else Outcome.DONE, at)
    await finish(store, "b", Outcome.DONE, timedelta(minutes=10))  # its second attempt
    log = hist(store)

    async def keys(**given: object) -> list[str]:
        page = await log.list_events("ns", EventFilter(**given), None, 50)  # type: ignore[arg-type]
        return [e.timer.key for e in page.items]

    assert await keys() == ["d", "c", "b", "a"]  # "later" has not fired
    assert await keys(type="order.*") == ["b", "a"]
    assert await keys(type="order.paid") == ["a"]
    assert await keys(type="user_*") == ["c"]  # '_' is literal, not a one-character wildcard
    assert await keys(type="*created") == ["d", "c"]
    assert await keys(type="order") == []
    assert await keys(since=NOW + timedelta(minutes=1)) == ["d", "c", "b"]
    assert await keys(until=NOW + timedelta(minutes=1)) == ["a"]
    assert await keys(since=NOW + timedelta(minutes=1), until=NOW + timedelta(minutes=3)) == [
        "c",
        "b",
    ]
    page = await log.list_events("ns", EventFilter(type="order.refunded"), None, 50)
    (event,) = page.items
    assert event.timer.fired_at == NOW + timedelta(minutes=1)
    assert [(a.number, a.outcome) for a in event.deliveries] == [
        (1, Outcome.RETRY),
        (2, Outcome.DONE),
    ]
    assert event.to_dict()["deliveries"][0]["error"] == "retry!"


async def test_the_event_log_pages_across_the_hot_table_and_the_history(
    store: Store,
) -> None:
    await store.put_timers(
        [new_timer(f"k{i}", NOW + timedelta(minutes=i), type="t") for i in range(9)],
        "error",
        NOW,
    )
    for i in range(9):
        await finish(store, f"k{i}", Outcome.DONE, timedelta(minutes=i))
    await hist(store).maintain(POLICY, NOW + timedelta(minutes=64))  # the first 4 are archived
    seen: list[LoggedEvent] = []
    cursor = None
    while True:
        page: Page[LoggedEvent] = await hist(store).list_events("ns", EventFilter(), cursor, 2)
        seen += page.items
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert [e.timer.key for e in seen] == [f"k{i}" for i in reversed(range(9))]
    assert all([a.outcome for a in e.deliveries] == [Outcome.DONE] for e in seen)
    since = await hist(store).list_events(
        "ns", EventFilter(since=NOW + timedelta(minutes=3)), None, 50
    )
    assert [e.timer.key for e in since.items] == [f"k{i}" for i in reversed(range(3, 9))]


async def test_a_bad_event_cursor_is_refused_naming_the_field(store: Store) -> None:
    with pytest.raises(InvalidInput) as caught:
        await hist(store).list_events("ns", EventFilter(), "not-a-cursor", 10)
    assert caught.value.field == "cursor"


async def test_a_fanned_out_event_and_each_delivery_are_logged(store: Store) -> None:
    await store.put_timers([new_timer("e1", type="order.paid")], "error", NOW)
    (event,) = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    fan = FanOut(event.timer.id, event.attempt, "e1", ("hook", "bus"))
    assert await store.fan_out([fan], "n1", NOW) == set()
    soon = NOW + timedelta(seconds=1)
    deliveries = await store.claim_due("ns", None, soon, 10, "n1", LEASE)
    await store.finish(
        [Finish(d.timer.id, d.attempt, Outcome.DONE, started_at=soon) for d in deliveries],
        "n1",
        soon,
    )
    await hist(store).maintain(POLICY, LATER)
    page = await hist(store).list_events("ns", EventFilter(type="order.*"), None, 10)
    logged = {(e.timer.key, e.timer.destination): e.deliveries for e in page.items}
    assert set(logged) == {("e1", None), ("e1@hook", "hook"), ("e1@bus", "bus")}
    assert [a.outcome for a in logged["e1", None]] == [Outcome.FANNED_OUT]
    assert [a.outcome for a in logged["e1@hook", "hook"]] == [Outcome.DONE]


async def test_running_timers_are_listed_in_their_place(store: Store) -> None:
    """Running timers page in id order with the rest, filtered like the rest, and never in
    another namespace's listing (PostgreSQL reads them from their own index)."""
    early, late = NOW - timedelta(minutes=1), NOW + timedelta(minutes=1)
    await store.put_timers(
        [
            new_timer(f"k{i}", early if i in (1, 3) else late, type="t", subject="s")
            for i in range(5)
        ],
        "error",
        NOW,
    )
    await store.put_timers([new_timer("far", early, namespace="other", type="t")], "error", NOW)
    assert len(await store.claim_due("other", None, NOW, 10, "n1", LEASE)) == 1
    running = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert sorted(c.timer.key for c in running) == ["k1", "k3"]

    async def pages(timer_filter: TimerFilter, size: int) -> list[list[str]]:
        found, cursor = [], None
        while True:
            page = await store.list_timers("ns", timer_filter, cursor, size)
            found.append([t.key for t in page.items])
            if (cursor := page.next_cursor) is None:
                return found

    assert await pages(TimerFilter(), 2) == [["k4", "k3"], ["k2", "k1"], ["k0"]]
    assert await pages(TimerFilter(subject="s"), 3) == [["k4", "k3", "k2"], ["k1", "k0"]]
    assert await pages(TimerFilter(status=Status.RUNNING), 1) == [["k3"], ["k1"]]
    assert await pages(TimerFilter(status=Status.SCHEDULED, type="t"), 5) == [["k4", "k2", "k0"]]
    # a first attempt running has no known start (its outcome reports it): not in the event
    # log yet; a later attempt running is, at its timer's first start
    events = await hist(store).list_events("ns", EventFilter(), None, 50)
    assert events.items == []
    k1 = next(c for c in running if c.timer.key == "k1")
    retry = Finish(k1.timer.id, 1, Outcome.RETRY, "x", NOW, started_at=NOW)
    assert await store.finish([retry], "n1", NOW) == set()
    assert len(await store.claim_due("ns", None, NOW, 10, "n1", LEASE)) == 1
    events = await hist(store).list_events("ns", EventFilter(), None, 50)
    assert [(e.timer.key, e.timer.status, e.timer.fired_at) for e in events.items] == [
        ("k1", Status.RUNNING, NOW)
    ]
