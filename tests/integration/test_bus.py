"""The event bus end to end, in one process, on SQLite and PostgreSQL: routes, fan-out into one
delivery per destination (a Python handler, a real webhook receiver, real NATS JetStream), each
retried, dead-lettered and replayed on its own; direct delivery when one destination wants an
event; nodes with different subscriptions sharing a database; no subscriber → dead letter.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    pytest.importorskip("nats", reason="the broker clients come with duetime[brokers]")

import nats
from brokers import require_nats
from test_destinations_webhook import Receiver, Reply
from tests.waiting import run, until

from duetime import AsyncApp, Event, FrozenClock, InvalidInput, NotFound, Outcome, Status
from duetime.destinations import WebhookDestination
from duetime.destinations.nats import NatsDestination
from duetime.errors import StoreUnavailable
from duetime.model import FanOut
from duetime.store.sqlite.store import SqliteStore

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'bus.db'}"
        return
    with pooled_pg_url() as found:
        yield found


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
    """Poll a background worker's effect (real time passes for its loops) until it holds."""
    await until(check, within, "a background worker's effect")


def sweeps_of(store: Any) -> list[datetime]:
    """The instants by which the no-subscriber sweeps of ``store`` judged, each recorded once
    the sweep has finished: a test waits for a sweep, not for time to pass."""
    swept_at: list[datetime] = []
    rescue_and_sweep, sweep_unsubscribed = store.rescue_and_sweep, store.sweep_unsubscribed

    async def rescuing(now: datetime, *args: Any) -> Any:
        result = await rescue_and_sweep(now, *args)
        swept_at.append(now)
        return result

    async def sweeping(
        namespace: str, everyone: Any, before: Any, now: datetime, *rest: Any
    ) -> Any:
        result = await sweep_unsubscribed(namespace, everyone, before, now, *rest)
        swept_at.append(now)
        return result

    store.rescue_and_sweep, store.sweep_unsubscribed = rescuing, sweeping
    return swept_at


async def status_of(app: AsyncApp, key: str) -> Status:
    return (await app.get(key)).status


# -- fan-out ----------------------------------------------------------------------------------
def test_one_event_fans_out_to_a_handler_a_webhook_and_nats(url: str) -> None:
    """The webhook refuses for good (400): only that delivery is dead; replayed once the
    receiver is fixed, it is delivered, with the same message id and its redelivery count."""
    nats_url = require_nats()

    async def main() -> None:
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        stream, prefix = f"DT_{uuid.uuid4().hex[:10]}", f"dt.bus.{uuid.uuid4().hex[:10]}"
        await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
        app = AsyncApp(url, clock=FrozenClock(START), producer="checkout")
        handled: list[Event] = []

        @app.handler("order.paid")
        async def paid(event: Event) -> None:
            handled.append(event)

        async with Receiver(Reply(400, b"unknown customer"), Reply(400, b"still no")) as hook:
            app.route("order.*", to=[WebhookDestination("billing-hook", hook.url), "bus"])
            app.add_destination(NatsDestination("bus", nats_url, f"{prefix}.{{type}}"))
            try:
                async with app:
                    await app.emit("order.paid", {"order": 7}, key="o-7", subject="user-9")
                    stats = await app.tick()
                    assert stats.outcomes == {"fanned_out": 1, "done": 2, "dead": 1}

                    event = await app.get("o-7")
                    assert (event.status, event.destination) == (Status.DONE, None)
                    (attempt,) = await app.timers.attempts("o-7")
                    assert attempt.outcome is Outcome.FANNED_OUT
                    assert attempt.error == (
                        "fanned out to 3 deliveries: handler, billing-hook, bus"
                    )
                    rows = {
                        k: await app.get(f"o-7@{k}") for k in ("handler", "billing-hook", "bus")
                    }
                    assert {k: t.status for k, t in rows.items()} == {
                        "handler": Status.DONE,
                        "billing-hook": Status.DEAD,
                        "bus": Status.DONE,
                    }
                    dead = rows["billing-hook"]
                    assert dead.last_error is not None
                    assert "answered 400" in dead.last_error
                    assert "unknown customer" in dead.last_error
                    assert [t.key for t in (await app.timers.dead()).items] == ["o-7@billing-hook"]

                    (seen,) = handled
                    assert (seen.key, seen.destination, seen.id) == (
                        "o-7",
                        "handler",
                        rows["handler"].id,
                    )
                    assert (seen.message_id, seen.redelivery) == ("default:o-7:handler", 0)
                    assert (seen.producer, seen.emitted_at, seen.subject) == (
                        "checkout",
                        START,
                        "user-9",
                    )

                    sub = await js.pull_subscribe(f"{prefix}.>", durable=None, stream=stream)
                    (message,) = await sub.fetch(1, timeout=5)
                    assert message.subject == f"{prefix}.order.paid"
                    assert message.headers is not None
                    assert message.headers["Nats-Msg-Id"] == "default:o-7:bus"
                    body = json.loads(message.data)
                    assert (body["key"], body["destination"], body["message_id"]) == (
                        "o-7",
                        "bus",
                        "default:o-7:bus",
                    )
                    assert (body["producer"], body["redelivery"], body["payload"]) == (
                        "checkout",
                        0,
                        {"order": 7},
                    )

                    (refused,) = hook.requests
                    assert refused.headers["idempotency-key"] == "default:o-7:billing-hook"
                    assert json.loads(refused.body)["destination"] == "billing-hook"

                    replayed = await app.timers.replay("o-7@billing-hook")
                    assert replayed.status is Status.SCHEDULED
                    hook.replies.clear()  # fixed: it answers 200 from now on
                    again = await app.tick()
                    assert again.outcomes == {"done": 1}
                    assert await status_of(app, "o-7@billing-hook") is Status.DONE
                    _, accepted = hook.requests
                    assert accepted.headers["idempotency-key"] == "default:o-7:billing-hook"
                    sent = json.loads(accepted.body)
                    assert (sent["key"], sent["attempt"], sent["redelivery"]) == ("o-7", 2, 1)
                    assert sent["emitted_at"] == "2025-03-01T12:00:00Z"
                    assert len(handled) == 1  # the handler's delivery was not repeated
                    assert (await js.stream_info(stream)).state.messages == 1
            finally:
                await js.delete_stream(stream)
                await nc.close()

    run(main)


def test_one_destination_that_wants_an_event_gets_it_as_it_is(url: str) -> None:
    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START))
        async with Receiver() as hook:
            app.route("audit.*", to=WebhookDestination("audit-hook", hook.url))
            async with app:
                await app.emit("audit.logged", {"n": 1}, key="a-1")
                stats = await app.tick()
                assert stats.outcomes == {"done": 1}
                event = await app.get("a-1")
                assert [a.outcome for a in await app.timers.attempts("a-1")] == [Outcome.DONE]
                assert event.status is Status.DONE
                with pytest.raises(NotFound):
                    await app.get("a-1@audit-hook")
                (request,) = hook.requests
                body = json.loads(request.body)
                assert list(body)[-4:] == ["emitted_at", "producer", "redelivery", "message_id"]
                assert body["message_id"] == body["delivery_id"] == "default:a-1:audit-hook"
                assert (body["key"], body["destination"], body["id"]) == (
                    "a-1",
                    "audit-hook",
                    event.id,
                )
                assert request.headers["idempotency-key"] == "default:a-1:audit-hook"

    run(main)


def test_a_handler_alone_delivers_the_event_itself_with_its_envelope(url: str) -> None:
    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START))
        seen: list[Event] = []
        app.handler("user.created")(seen.append)
        async with app:
            await app.emit("user.created", {"id": 1}, key="u-1")
            await app.tick()
        (event,) = seen
        assert (event.key, event.destination, event.message_id) == (
            "u-1",
            "handler",
            "default:u-1:handler",
        )
        assert event.producer == app.producer_id()
        assert event.emitted_at == START
        assert event.to_dict()["redelivery"] == 0

    run(main)


def test_an_expired_event_is_not_fanned_out(url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock)
        async with Receiver() as hook:
            app.route(
                "x.*", to=[WebhookDestination("a", hook.url), WebhookDestination("b", hook.url)]
            )
            async with app:
                await app.schedule("x.y", None, delay=0, key="k", expires_after=60)
                clock.advance(120)
                assert (await app.tick()).outcomes == {"expired": 1}
                assert hook.requests == []

    run(main)


# -- routes are checked ------------------------------------------------------------------------
def test_routes_are_checked_with_the_field_at_fault(db_url: str) -> None:
    app = AsyncApp(db_url)
    hook = WebhookDestination("hook", "http://127.0.0.1:9/x")
    other_x = WebhookDestination("x", "http://h/3")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"type": "order paid", "to": hook}, "type"),
        ({"type": "order.*", "to": []}, "to"),
        ({"type": "order.*", "to": [hook, "handler"]}, "to[1]"),
        ({"type": "order.*", "to": [hook, 3]}, "to[1]"),
        ({"type": "order.*", "to": ["no spaces allowed"]}, "to[0]"),
        ({"type": "order.*", "to": [WebhookDestination("hook", "http://127.0.0.1:9/y")]}, "to[0]"),
        ({"type": "order.*", "to": [WebhookDestination("x", "http://h/1"), other_x]}, "to[1]"),
        ({"type": "order.*", "to": [WebhookDestination("handler", "http://h/2")]}, "to[0]"),
    ]
    app.route("order.*", to=hook)
    for kwargs, field in cases:
        with pytest.raises(InvalidInput) as caught:
            app.route(kwargs["type"], to=kwargs["to"])
        assert caught.value.field == field, kwargs
    assert [d.name for d in app.destinations] == ["hook"]  # a refused route added nothing
    app.route("audit.*", to=["hook", "later"])
    with pytest.raises(InvalidInput) as unknown:
        app.worker()
    assert unknown.value.field == "routes[1].to[1]"
    app.add_destination(WebhookDestination("later", "http://127.0.0.1:9/z"))
    worker = app.worker()
    assert worker.dispatch.claim_filter.patterns == ("order.*", "audit.*")


# -- several nodes -------------------------------------------------------------------------------
def test_nodes_with_different_subscriptions_share_the_work(url: str) -> None:
    """A handler node and a route node: each claims only what it subscribes to; an event both
    want fans out, each delivery going to the node that serves it; an event only the route node
    wants goes there as it is. Neither dead-letters the other's events."""

    async def main() -> None:
        fast = {"heartbeat": 0.2, "lease": 1.0, "rescue_interval": 0.1}
        handlers = AsyncApp(url, **fast)
        router = AsyncApp(url, **fast)
        handled: list[Event] = []

        @handlers.handler("order.paid")
        async def paid(event: Event) -> None:
            handled.append(event)

        @handlers.handler("user.created")
        async def created(event: Event) -> None:
            handled.append(event)

        async with Receiver() as hook:
            router.route("order.*", to=WebhookDestination("hook", hook.url))
            async with handlers, router:
                workers = [handlers.worker(), router.worker()]
                tasks = [asyncio.create_task(w.run()) for w in workers]
                try:

                    async def both_see_both() -> bool:
                        seen = [w.dispatch.everyone() for w in workers]
                        return all(len(c.types) == 2 and len(c.patterns) == 1 for c in seen)

                    await eventually(both_see_both)
                    await handlers.emit("order.paid", {}, key="paid")
                    await handlers.emit("user.created", {}, key="user")
                    await router.emit("order.shipped", {}, key="shipped")

                    async def settled() -> bool:
                        keys = ["paid@handler", "paid@hook", "user", "shipped"]
                        try:
                            return all([await status_of(handlers, k) is Status.DONE for k in keys])
                        except Exception:
                            return False

                    await eventually(settled)
                finally:
                    for w in workers:
                        w.stop()
                    await asyncio.gather(*tasks)
                assert sorted((e.key, e.destination) for e in handled) == [
                    ("paid", "handler"),
                    ("user", "handler"),
                ]
                assert sorted(json.loads(r.body)["key"] for r in hook.requests) == [
                    "paid",
                    "shipped",
                ]
                by_node = {w.node_id: w.stats for w in workers}
                assert by_node[workers[0].node_id].outcomes["done"] == 2
                assert by_node[workers[1].node_id].outcomes["done"] == 2
                assert (await handlers.timers.counts())[Status.DEAD] == 0

    run(main)


def test_an_event_no_one_subscribes_to_is_dead_lettered_after_the_grace(url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock, rescue_interval=0.05, no_subscriber_grace=30)
        app.handler("order.paid")(lambda event: None)
        async with app:
            swept_at = sweeps_of(app.store)
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            try:
                await app.emit("order.paid", {}, key="paid")
                await app.emit("nobody.listens", {}, key="lonely")

                async def paid_done() -> bool:
                    return await status_of(app, "paid") is Status.DONE

                await eventually(paid_done)
                clock.advance(29)
                within_grace = clock.now()
                await until(  # a sweep within the grace has judged the lonely event
                    lambda: any(at >= within_grace for at in swept_at),
                    60,
                    "a sweep at the advanced time",
                )
                assert await status_of(app, "lonely") is Status.SCHEDULED
                clock.advance(2)

                async def lonely_dead() -> bool:
                    return await status_of(app, "lonely") is Status.DEAD

                await eventually(lonely_dead)
            finally:
                worker.stop()
                await task
            lonely = await app.get("lonely")
            assert lonely.last_error == "no subscriber for type nobody.listens"
            assert lonely.completed_at == clock.now()
            assert await app.timers.attempts("lonely") == []
            assert [t.key for t in (await app.timers.dead()).items] == ["lonely"]

    run(main)


def test_delivery_keys_may_be_longer_than_a_callers_key(db_url: str) -> None:
    async def main() -> None:
        app = AsyncApp(db_url, clock=FrozenClock(START))
        app.handler("t")(lambda event: None)
        async with Receiver() as hook:
            app.route("t", to=WebhookDestination("h" * 63, hook.url))
            async with app:
                key = "k" * 255
                await app.emit("t", None, key=key)
                await app.tick()
                row = await app.get(f"{key}@{'h' * 63}")
                assert row.status is Status.DONE
                assert json.loads(hook.requests[0].body)["key"] == key
                with pytest.raises(InvalidInput):
                    await app.get("k" * 400)

    run(main)


class FailingOnce(SqliteStore):
    """The real SQLite store, whose first fan-out fails as a lost connection would."""

    failed = False

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        if not self.failed:
            self.failed = True
            raise StoreUnavailable("the database went away")
        return await super().fan_out(fan_outs, node_id, now)


def test_a_fan_out_that_fails_is_retried_with_backoff(db_url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(db_url, clock=clock, store=FailingOnce(db_url), backoff_base=10)
        app.handler("t")(lambda event: None)
        async with Receiver() as hook:
            app.route("t", to=WebhookDestination("hook", hook.url))
            async with app:
                await app.emit("t", None, key="k")
                assert (await app.tick()).outcomes == {"retry": 1}
                event = await app.get("k")
                assert event.status is Status.RETRYING
                assert (
                    event.last_error == "fan-out failed: StoreUnavailable: the database went away"
                )
                clock.advance(60)
                assert (await app.tick()).outcomes == {"fanned_out": 1, "done": 2}
                assert [a.outcome for a in await app.timers.attempts("k")] == [
                    Outcome.RETRY,
                    Outcome.FANNED_OUT,
                ]
            await app.store.close()

    run(main)
