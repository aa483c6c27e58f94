"""Store conformance, event bus: claims filtered by subscriptions, fenced fan-out into delivery
rows, and dead-lettering what no live node subscribes to.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically; the
claim filter is checked against :func:`duetime.bus.routes.claims`, the rule both SQL dialects apply.
"""

from __future__ import annotations

from datetime import timedelta

from storekit import NOW, new_timer

from duetime.bus.routes import HANDLER, claims, delivery_key
from duetime.model import (
    ClaimFilter,
    FanOut,
    Finish,
    NewTimer,
    Node,
    Outcome,
    Status,
    Subscription,
    Timer,
)
from duetime.store import Store

LEASE = NOW + timedelta(seconds=30)
TYPES = ("order.paid", "order.shipped", "orderly", "user.created", "a_b", "aXb", "x.y")


async def put(store: Store, *timers: NewTimer) -> None:
    await store.put_timers(list(timers), "error", NOW)


async def claim_keys(
    store: Store, claim: ClaimFilter | list[str] | None, namespace: str = "ns"
) -> set[str]:
    claimed = await store.claim_due(namespace, claim, NOW, 100, "n1", LEASE)
    return {c.timer.key for c in claimed}


async def fanned(store: Store, key: str, destinations: tuple[str, ...]) -> Timer:
    """Claim the event ``key`` and fan it out to ``destinations``; the event as stored after."""
    stored = await store.get_timer("ns", key)
    assert stored is not None
    claimed = await store.claim_due("ns", ClaimFilter((stored.type,)), NOW, 100, "n1", LEASE)
    (claimed,) = [c for c in claimed if c.timer.key == key]
    lost = await store.fan_out(
        [FanOut(claimed.timer.id, claimed.attempt, key, destinations)], "n1", NOW
    )
    assert lost == set()
    event = await store.get_timer("ns", key)
    assert event is not None
    return event


async def test_claims_follow_the_subscriptions(store: Store) -> None:
    filters = [
        ClaimFilter(patterns=("order.*",)),
        ClaimFilter(types=("user.created", "absent")),
        ClaimFilter(patterns=("a_*",)),  # _ is literal: a_b, not aXb
        ClaimFilter(patterns=("*",)),
        ClaimFilter(types=("x.y",), patterns=("*.created",)),
        ClaimFilter(destinations=("hook",), handler_types=TYPES),  # deliveries only
        ClaimFilter(),
    ]
    for i, claim in enumerate(filters):
        namespace = f"ns{i}"
        await put(store, *(new_timer(f"k-{t}", type=t, namespace=namespace) for t in TYPES))
        expected = {f"k-{t}" for t in TYPES if claims(claim, t, None)}
        assert await store.next_run_at(namespace, claim) == (NOW if expected else None), claim
        assert await claim_keys(store, claim, namespace) == expected, claim
    assert {"k-order.paid", "k-orderly", "k-a_b"} <= {f"k-{t}" for t in TYPES}


async def test_a_list_of_types_takes_their_events_and_handler_deliveries(store: Store) -> None:
    await put(store, new_timer("e", type="order.paid"), new_timer("f", type="user.created"))
    await fanned(store, "e", (HANDLER, "hook"))
    claimed = await claim_keys(store, ["order.paid"])
    assert claimed == {delivery_key("e", HANDLER)}
    assert await claim_keys(store, ["user.created"]) == {"f"}


async def test_fan_out_inserts_one_delivery_per_destination(store: Store) -> None:
    due = NOW - timedelta(seconds=5)
    await store.put_timers(
        [
            new_timer(
                "evt",
                due,
                type="order.paid",
                payload={"order": 7},
                subject="user-9",
                correlation_id="req-1",
                expires_after=timedelta(hours=1),
                max_attempts=4,
                producer="api",
            )
        ],
        "error",
        NOW - timedelta(minutes=1),
    )
    event = await fanned(store, "evt", (HANDLER, "bus", "hook"))
    assert (event.status, event.completed_at, event.lease_owner) == (Status.DONE, NOW, None)
    (attempt,) = await store.list_attempts(event.id)
    assert (attempt.outcome, attempt.finished_at) == (Outcome.FANNED_OUT, NOW)
    assert attempt.error == "fanned out to 3 deliveries: handler, bus, hook"
    for destination in (HANDLER, "bus", "hook"):
        row = await store.get_timer("ns", delivery_key("evt", destination))
        assert row is not None
        assert (row.destination, row.type, row.payload) == (destination, "order.paid", {"order": 7})
        assert (row.subject, row.correlation_id, row.producer) == ("user-9", "req-1", "api")
        assert (row.due_at, row.run_at, row.registered_at) == (due, due, event.registered_at)
        assert (row.expires_after, row.max_attempts) == (timedelta(hours=1), 4)
        assert (row.status, row.attempts, row.fired_at) == (Status.SCHEDULED, 0, None)
    served = ClaimFilter(destinations=("hook",), handler_types=("order.paid",))
    assert await claim_keys(store, served) == {"evt@hook", "evt@handler"}
    assert await claim_keys(store, ClaimFilter(destinations=("bus",))) == {"evt@bus"}


async def test_fan_out_is_fenced(store: Store) -> None:
    await put(store, new_timer("a", type="t"), new_timer("b", type="t"))
    claimed = {c.timer.key: c for c in await store.claim_due("ns", None, NOW, 10, "n1", LEASE)}
    a, b = claimed["a"], claimed["b"]
    wrong = [
        FanOut(a.timer.id, a.attempt, "a", ("hook",)),  # not n2's
        FanOut(b.timer.id, b.attempt + 1, "b", ("hook",)),  # not this attempt
    ]
    assert await store.fan_out(wrong, "n2", NOW) == {a.timer.id, b.timer.id}
    assert await store.fan_out(wrong[1:], "n1", NOW) == {b.timer.id}
    for key in ("a", "b"):
        timer = await store.get_timer("ns", key)
        assert timer is not None
        assert timer.status is Status.RUNNING
        assert await store.get_timer("ns", delivery_key(key, "hook")) is None
    assert await store.fan_out([FanOut(a.timer.id, a.attempt, "a", ("hook",))], "n1", NOW) == set()
    # done now: a second fan-out of the same attempt is lost and adds nothing
    assert await store.fan_out([FanOut(a.timer.id, a.attempt, "a", ("x",))], "n1", NOW) == {
        a.timer.id
    }
    assert await store.get_timer("ns", delivery_key("a", "x")) is None


async def test_fan_out_keeps_a_key_that_exists(store: Store) -> None:
    await put(store, new_timer("e", type="t"), new_timer("e@hook", type="mine", payload="keep"))
    (claimed,) = await store.claim_due("ns", ["t"], NOW, 10, "n1", LEASE)
    assert await store.fan_out([FanOut(claimed.timer.id, 1, "e", ("hook", "bus"))], "n1", NOW) == (
        set()
    )
    kept = await store.get_timer("ns", "e@hook")
    assert kept is not None
    assert (kept.type, kept.payload, kept.destination) == ("mine", "keep", None)
    bus = await store.get_timer("ns", "e@bus")
    assert bus is not None
    assert bus.destination == "bus"


async def test_a_dead_delivery_is_replayed_on_its_own(store: Store) -> None:
    await put(store, new_timer("e", type="t", max_attempts=1))
    await fanned(store, "e", (HANDLER, "hook"))
    (hook,) = await store.claim_due("ns", ClaimFilter(destinations=("hook",)), NOW, 10, "n1", LEASE)
    await store.finish([Finish(hook.timer.id, 1, Outcome.DEAD, error="HTTP 400")], "n1", NOW)
    replayed = await store.replay("ns", "e@hook", NOW + timedelta(minutes=1))
    assert (replayed.status, replayed.destination, replayed.max_attempts) == (
        Status.SCHEDULED,
        "hook",
        2,
    )
    handler = await store.get_timer("ns", "e@handler")
    assert handler is not None
    assert handler.status is Status.SCHEDULED
    later = NOW + timedelta(minutes=1)
    again = await store.claim_due("ns", ClaimFilter(destinations=("hook",)), later, 10, "n1", LEASE)
    assert [(c.timer.key, c.attempt) for c in again] == [("e@hook", 2)]


async def test_sweep_dead_letters_what_no_one_takes(store: Store) -> None:
    old = NOW - timedelta(minutes=5)
    await store.put_timers(
        [
            new_timer("nobody", old, type="audit.logged"),
            new_timer("taken", old, type="order.shipped"),
            new_timer("recent", NOW - timedelta(seconds=5), type="audit.logged"),
            new_timer("other-ns", old, type="audit.logged", namespace="other"),
            new_timer("fan", old, type="order.paid"),
            new_timer("busy", old, type="audit.busy"),
        ],
        "error",
        old,
    )
    await fanned(store, "fan", ("gone", "hook"))
    (busy,) = await store.claim_due("ns", ["audit.busy"], NOW, 10, "n1", LEASE)
    subscribed = ClaimFilter(patterns=("order.*",), destinations=("hook",))
    before = NOW - timedelta(seconds=30)
    swept = await store.sweep_unsubscribed("ns", subscribed, before, NOW, 100)
    nobody, gone = await store.get_timer("ns", "nobody"), await store.get_timer("ns", "fan@gone")
    assert nobody is not None
    assert gone is not None
    assert sorted(swept) == sorted([nobody.id, gone.id])
    assert (nobody.status, nobody.completed_at) == (Status.DEAD, NOW)
    assert nobody.last_error == "no subscriber for type audit.logged"
    assert gone.last_error == "no node serves destination gone (type order.paid)"
    for key, status in [("taken", Status.SCHEDULED), ("recent", Status.SCHEDULED)]:
        timer = await store.get_timer("ns", key)
        assert timer is not None
        assert timer.status is status
    hook = await store.get_timer("ns", "fan@hook")
    assert hook is not None
    assert hook.status is Status.SCHEDULED
    other = await store.get_timer("other", "other-ns")
    assert other is not None
    assert other.status is Status.SCHEDULED
    running = await store.get_timer("ns", "busy")
    assert running is not None
    assert running.id == busy.timer.id
    assert running.status is Status.RUNNING
    assert await store.sweep_unsubscribed("ns", subscribed, before, NOW, 100) == []
    replayed = await store.replay("ns", "nobody", NOW)
    assert replayed.status is Status.SCHEDULED


async def test_sweep_looks_at_the_oldest_rows_only(store: Store) -> None:
    await store.put_timers(
        [new_timer(f"k{i}", NOW - timedelta(minutes=10 - i), type="t") for i in range(5)],
        "error",
        NOW - timedelta(hours=1),
    )
    before = NOW - timedelta(seconds=30)
    first = await store.sweep_unsubscribed("ns", ClaimFilter(), before, NOW, 2)
    second = await store.sweep_unsubscribed("ns", ClaimFilter(), before, NOW, 2)
    rows = [await store.get_timer("ns", f"k{i}") for i in range(5)]
    ids = [r.id for r in rows if r is not None]
    assert (sorted(first), sorted(second)) == (ids[:2], ids[2:4])


async def test_nodes_keep_their_subscriptions(store: Store) -> None:
    subscriptions = (
        Subscription("ns", "user.created", (HANDLER,)),
        Subscription("ns", "order.*", ("billing-hook", "bus")),
    )
    node = Node("n1", "h", 1, NOW, NOW, subscriptions=subscriptions)
    await store.register_node(node)
    await store.register_node(Node("api", "h", 2, NOW, NOW, role="api"))
    assert {n.id: n.subscriptions for n in await store.list_nodes()} == {
        "n1": subscriptions,
        "api": (),
    }
    later = NOW + timedelta(seconds=10)
    await store.heartbeat("n1", later, later + timedelta(seconds=30), [])
    (listed,) = [n for n in await store.list_nodes() if n.id == "n1"]
    assert (listed.heartbeat_at, listed.subscriptions) == (later, subscriptions)


async def test_producer_is_stored(store: Store) -> None:
    await store.put_timers([new_timer("a", producer="cli"), new_timer("b")], "error", NOW)
    a, b = await store.get_timer("ns", "a"), await store.get_timer("ns", "b")
    assert a is not None
    assert b is not None
    assert (a.producer, b.producer, a.destination) == ("cli", None, None)
    claimed = await store.claim_due("ns", None, NOW, 10, "n1", LEASE)
    assert [(c.timer.key, c.timer.producer) for c in claimed] == [("a", "cli"), ("b", None)]


async def test_unsubscribed_types_counts_the_pending_rows_nobody_takes(store: Store) -> None:
    """By type, most first, with the claim's own filter: globs, deliveries, other namespaces."""
    await store.put_timers(
        [
            *(new_timer(f"audit-{i}", NOW, type="audit.logged") for i in range(3)),
            new_timer("later", NOW + timedelta(days=365), type="report.built"),
            new_timer("taken", NOW, type="order.shipped"),
            new_timer("fan", NOW, type="order.paid"),
            new_timer("other-ns", NOW, type="audit.logged", namespace="other"),
            new_timer("finished", NOW, type="gone.type"),
        ],
        "error",
        NOW,
    )
    await store.cancel("ns", "finished", NOW)
    await fanned(store, "fan", ("gone", "hook"))
    subscribed = ClaimFilter(patterns=("order.*",), destinations=("hook",))
    assert await store.unsubscribed_types("ns", subscribed, 10) == [
        ("audit.logged", 3),
        ("order.paid", 1),  # its delivery to "gone", which no node serves
        ("report.built", 1),
    ]
    assert await store.unsubscribed_types("ns", subscribed, 1) == [("audit.logged", 3)]
    everyone = ClaimFilter(types=("audit.logged", "report.built"), patterns=("order.*",))
    # the event fanned out: its two deliveries, neither destination served now
    assert await store.unsubscribed_types("ns", everyone, 10) == [("order.paid", 2)]
    assert await store.unsubscribed_types("empty", subscribed, 10) == []
