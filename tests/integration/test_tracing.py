"""OpenTelemetry spans, in one process: schedule → stored trace context → process → handler,
source headers → process, destinations sending ``traceparent``, and tracing off.

Real stores (both), a real HTTP receiver on 127.0.0.1, real NATS JetStream and Redis; the spans
go to the SDK's in-memory exporter of a provider each test gives its app.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    for client in ("nats", "redis"):
        pytest.importorskip(client, reason="the broker clients come with duetime[brokers]")
    pytest.importorskip("psycopg", reason="the PostgreSQL driver comes with duetime[postgres]")
    pytest.importorskip("opentelemetry.sdk", reason="the tracing tests need duetime[test]")

import nats
import psycopg
from brokers import require_nats, require_redis
from opentelemetry.trace import SpanKind, StatusCode
from redis.asyncio import Redis
from test_destinations_webhook import Receiver
from tests.signals import WorkerSignals
from tests.waiting import run
from tracing_kit import Traced, is_child, traceparent

from duetime import App, AsyncApp, Event, FrozenClock, Status
from duetime.destinations import WebhookDestination
from duetime.destinations.nats import NatsDestination
from duetime.destinations.redis_stream import RedisStreamDestination
from duetime.sources.base import Incoming, ScheduleCommand, make_mapping, store_batch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
UPSTREAM = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
"""A caller's trace context from outside (the W3C specification's example)."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'traced.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def test_the_handler_span_continues_the_trace_that_scheduled_it(url: str) -> None:
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)

        @app.handler("greet")
        async def greet(event: Event) -> None:
            with traced.tracer.start_as_current_span("inside the handler"):
                pass

        async with app:
            with traced.tracer.start_as_current_span("request"):
                created = await app.schedule("greet", {"n": 1}, delay=0, key="g-1")
            untraced = await app.schedule("greet", {"n": 2}, delay=0, key="g-2")
            stored = await app.get("g-1")
            assert (await app.tick()).outcomes == {"done": 2}

        request = traced.one("request")
        scheduled = traced.named("duetime schedule greet")
        assert len(scheduled) == 2
        schedule = next(s for s in scheduled if s.parent is not None)
        assert is_child(schedule, request)
        assert schedule.kind is SpanKind.PRODUCER
        assert schedule.attributes is not None
        assert schedule.attributes["messaging.system"] == "duetime"
        assert schedule.attributes["messaging.destination.name"] == "greet"
        assert schedule.attributes["messaging.message.id"] == "g-1"
        assert schedule.attributes["duetime.action"] == "created"
        assert created.timer.trace_context == traceparent(schedule)
        assert stored.trace_context == traceparent(schedule)
        # a schedule call outside any span opens its own, so its timer has a trace too
        other = next(s for s in scheduled if s.parent is None)
        assert untraced.timer.trace_context == traceparent(other)

        processed = traced.named("duetime process greet")
        assert len(processed) == 2
        process = next(p for p in processed if is_child(p, schedule))
        assert process.kind is SpanKind.CONSUMER
        assert process.attributes is not None
        assert process.attributes["messaging.message.id"] == "g-1"
        assert process.attributes["duetime.namespace"] == "default"
        assert process.attributes["duetime.attempt"] == 1
        assert process.attributes["duetime.lateness_ms"] == 0.0
        assert "duetime.outcome" not in process.attributes  # done: the one said by no attribute
        assert process.status.status_code is StatusCode.UNSET
        inside = [s for s in traced.named("inside the handler") if is_child(s, process)]
        assert len(inside) == 1

    run(main)


def test_a_failing_handler_records_its_exception_and_an_error_status(url: str) -> None:
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)

        @app.handler("fragile")
        def fragile(event: Event) -> None:  # a sync handler: run in a thread, still inside
            with traced.tracer.start_as_current_span("inside the thread"):
                raise ValueError("no such customer")

        async with app:
            await app.emit("fragile", key="f-1")
            assert (await app.tick()).outcomes == {"retry": 1}

        process = traced.one("duetime process fragile")
        assert is_child(process, traced.one("duetime schedule fragile"))
        assert is_child(traced.one("inside the thread"), process)
        assert process.status.status_code is StatusCode.ERROR
        assert process.status.description == "ValueError: no such customer"
        assert process.attributes is not None
        assert process.attributes["duetime.outcome"] == "retry"
        (exception,) = [e for e in process.events if e.name == "exception"]
        assert exception.attributes is not None
        assert exception.attributes["exception.type"] == "ValueError"

    run(main)


def test_an_async_handlers_failure_is_on_its_own_span_not_the_workers(url: str) -> None:
    """An async handler runs as its own task, in its attempt's context; a worker run inside a
    span of the program's keeps that span clean."""
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)

        @app.handler("flaky")
        async def flaky(event: Event) -> None:
            with traced.tracer.start_as_current_span("inside"):
                raise KeyError("gone")

        @app.handler("done")
        async def done(event: Event) -> None:
            pass

        async with app:
            await app.emit("flaky", key="f-1", max_attempts=1)
            await app.emit("done", key="d-1")
            with traced.tracer.start_as_current_span("the program"):
                assert (await app.tick()).outcomes == {"dead": 1, "done": 1}

        process = traced.one("duetime process flaky")
        assert is_child(process, traced.one("duetime schedule flaky"))
        assert is_child(traced.one("inside"), process)
        assert process.status.status_code is StatusCode.ERROR
        assert process.status.description == "gave up after 1 attempts: KeyError: 'gone'"
        assert process.attributes is not None
        assert process.attributes["duetime.outcome"] == "dead"
        assert [e.name for e in process.events] == ["exception"]
        assert is_child(traced.one("duetime process done"), traced.one("duetime schedule done"))
        assert traced.one("the program").events == ()

    run(main)


def test_a_batch_is_one_span_whose_context_every_timer_stores(url: str) -> None:
    traced = Traced()

    async def main() -> None:
        from duetime import TimerRequest

        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)
        async with app:
            results = await app.timers.schedule_many(
                [TimerRequest("a", delay=60, key="b-1"), TimerRequest("b", delay=60, key="b-2")]
            )
            batch = traced.one("duetime schedule")
            assert batch.attributes is not None
            assert batch.attributes["messaging.batch.message_count"] == 2
            assert {r.timer.trace_context for r in results} == {traceparent(batch)}
            assert (await app.get("b-2")).trace_context == traceparent(batch)

    run(main)


def test_a_source_messages_traceparent_becomes_the_handlers_parent(url: str) -> None:
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)

        @app.handler("remind")
        async def remind(event: Event) -> None:
            pass

        command = ScheduleCommand(make_mapping("timer"))
        body = json.dumps({"type": "remind", "delay": 0}).encode()
        items = [
            Incoming("nats", body, "from-nats", {"Traceparent": UPSTREAM, "tracestate": "k=v"}),
            Incoming("kafka", body, "from-kafka", [("traceparent", UPSTREAM.encode())]),
            Incoming("redis", body, "from-redis", {b"traceparent": b"00-not-a-trace"}),
        ]
        async with app:
            outcome = await store_batch(app, command, items, source="test")
            assert [handle for handle, _ in outcome.stored] == ["nats", "kafka", "redis"]
            assert (await app.get("from-nats")).trace_context == f"{UPSTREAM} k=v"
            assert (await app.get("from-kafka")).trace_context == UPSTREAM
            assert (await app.get("from-redis")).trace_context is None  # not a valid one
            assert (await app.tick()).outcomes == {"done": 3}

        by_key = {
            s.attributes["messaging.message.id"]: s
            for s in traced.named("duetime process remind")
            if s.attributes is not None
        }
        for key in ("from-nats", "from-kafka"):
            parent = by_key[key].parent
            assert parent is not None
            assert parent.is_remote
            assert f"{parent.trace_id:032x}" == "4bf92f3577b34da6a3ce929d0e0e4736"
            assert f"{parent.span_id:016x}" == "00f067aa0ba902b7"
        assert by_key["from-redis"].parent is None

    run(main)


def test_a_webhook_receives_the_traceparent_of_its_send_span(url: str) -> None:
    """Fanned out (the handler and the webhook), so the deliveries' rows carry the event's
    trace context too."""
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)

        @app.handler("order.paid")
        async def paid(event: Event) -> None:
            pass

        async with Receiver() as hook:
            app.route("order.paid", to=WebhookDestination("billing", hook.url))
            async with app:
                with traced.tracer.start_as_current_span("checkout"):
                    await app.emit("order.paid", {"order": 7}, key="o-7")
                stats = await app.tick()
                assert stats.outcomes == {"fanned_out": 1, "done": 2}
                event = await app.get("o-7")
                delivery = await app.get("o-7@billing")
                assert delivery.status is Status.DONE
                assert delivery.trace_context == event.trace_context is not None

            (request,) = hook.requests
        checkout = traced.one("checkout")
        send = traced.one("duetime send billing")
        assert send.kind is SpanKind.CLIENT
        processes = traced.named("duetime process order.paid")
        delivering = next(p for p in processes if p.attributes["duetime.destination"] == "billing")  # type: ignore[index]
        assert is_child(send, delivering)
        assert request.headers["traceparent"] == traceparent(send)
        context = checkout.get_span_context()
        assert context is not None
        assert request.headers["traceparent"].split("-")[1] == f"{context.trace_id:032x}"

    run(main)


def test_a_nats_message_carries_the_traceparent(tmp_path: Path) -> None:
    nats_url = require_nats()
    traced = Traced()

    async def main() -> None:
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        stream, prefix = f"DT_{uuid.uuid4().hex[:10]}", f"dt.trace.{uuid.uuid4().hex[:10]}"
        await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
        app = AsyncApp(
            f"sqlite:///{tmp_path / 'nats.db'}",
            clock=FrozenClock(START),
            tracer_provider=traced.provider,
        )
        app.add_destination(NatsDestination("bus", nats_url, f"{prefix}.{{type}}"))
        app.route("order.paid", to="bus")
        try:
            async with app:
                await app.emit("order.paid", {"order": 8}, key="o-8")
                assert (await app.tick()).outcomes == {"done": 1}
            sub = await js.pull_subscribe(f"{prefix}.>", durable=None, stream=stream)
            (message,) = await sub.fetch(1, timeout=5)
        finally:
            await js.delete_stream(stream)
            await nc.close()
        send = traced.one("duetime send bus")
        assert is_child(send, traced.one("duetime process order.paid"))
        assert message.headers is not None
        assert message.headers["traceparent"] == traceparent(send)

    run(main)


def test_a_redis_stream_entry_carries_the_traceparent_and_tracestate(tmp_path: Path) -> None:
    redis_url = require_redis()
    traced = Traced()

    async def main() -> None:
        stream = f"duetime:trace:{uuid.uuid4().hex[:10]}"
        app = AsyncApp(
            f"sqlite:///{tmp_path / 'redis.db'}",
            clock=FrozenClock(START),
            tracer_provider=traced.provider,
        )
        app.add_destination(RedisStreamDestination("audit", redis_url, stream))
        app.route("order.paid", to="audit")
        client = Redis.from_url(redis_url, decode_responses=True)
        command = ScheduleCommand(make_mapping("timer"))
        body = json.dumps({"type": "order.paid", "delay": 0}).encode()
        carried = Incoming("m", body, "o-9", {"traceparent": UPSTREAM, "tracestate": "k=v"})
        try:
            async with app:
                await store_batch(app, command, [carried], source="test")
                assert (await app.tick()).outcomes == {"done": 1}
            ((_, fields),) = await client.xrange(stream)
        finally:
            await client.delete(stream)
            await client.aclose()
        send = traced.one("duetime send audit")
        assert fields["traceparent"] == traceparent(send)
        assert fields["traceparent"].split("-")[1] == UPSTREAM.split("-")[1]
        assert fields["tracestate"] == "k=v"

    run(main)


def test_the_blocking_app_carries_the_callers_span(tmp_path: Path) -> None:
    """``App`` runs its coroutines on a loop thread of its own: the caller's span goes along."""
    traced = Traced()
    app = App(f"sqlite:///{tmp_path / 'sync.db'}", tracer_provider=traced.provider)
    with app, traced.tracer.start_as_current_span("request"):
        created = app.schedule("greet", delay=60, key="s-1")
    schedule = traced.one("duetime schedule greet")
    assert is_child(schedule, traced.one("request"))
    assert created.timer.trace_context == traceparent(schedule)


def test_tracing_off_writes_no_context_even_inside_a_span(url: str) -> None:
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(
            url, clock=FrozenClock(START), tracer_provider=traced.provider, tracing="off"
        )
        async with app:
            with traced.tracer.start_as_current_span("request"):
                created = await app.schedule("greet", delay=0, key="quiet")
            assert created.timer.trace_context is None
            assert (await app.get("quiet")).trace_context is None
        assert [s.name for s in traced.spans] == ["request"]

    run(main)


UNTRACED = """
import asyncio, sys
from duetime import AsyncApp, Event

async def main():
    app = AsyncApp(sys.argv[1])
    seen = []

    @app.handler("greet")
    async def greet(event: Event) -> None:
        seen.append(event.key)

    async with app:
        await app.emit("greet", key="plain")
        await app.tick()
        timer = await app.get("plain")
    loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
    print(seen, timer.trace_context, loaded)

asyncio.run(main())
"""


def test_without_a_provider_nothing_is_imported_or_stored(url: str) -> None:
    """The default, ``auto``, in a program that never set up OpenTelemetry (installed here)."""
    done = subprocess.run(
        [sys.executable, "-c", UNTRACED, url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['plain'] None []"


def test_a_timer_scheduled_in_the_callers_transaction_keeps_its_trace() -> None:
    """The outbox: PostgreSQL, inside the caller's own transaction."""
    traced = Traced()

    async def main(url: str) -> None:
        app = AsyncApp(url, clock=FrozenClock(START), tracer_provider=traced.provider)
        async with app, await psycopg.AsyncConnection.connect(url.split("?")[0]) as conn:
            async with conn.transaction():
                with traced.tracer.start_as_current_span("checkout"):
                    await app.emit("order.paid", key="outboxed", transaction=conn)
            stored = await app.get("outboxed")
        schedule = traced.one("duetime schedule order.paid")
        assert is_child(schedule, traced.one("checkout"))
        assert stored.trace_context == traceparent(schedule)

    with pooled_pg_url() as url:
        run(lambda: main(url))


def test_a_row_claimed_ahead_starts_its_span_when_its_instant_comes(tmp_path: Path) -> None:
    """On the real clock a sleeping worker claims a timer a little before it is due and holds
    it: the attempt (and its span) starts at the instant, not at the claim."""
    traced = Traced()

    async def main() -> None:
        app = AsyncApp(f"sqlite:///{tmp_path / 'held.db'}", tracer_provider=traced.provider)
        signals = WorkerSignals()
        app.observers.append(signals)
        ran: list[float] = []

        @app.handler("held")
        async def held(event: Event) -> None:
            with traced.tracer.start_as_current_span("inside"):
                ran.append(1)

        async with app:
            worker = app.worker()
            task = asyncio.create_task(worker.run())
            await signals.next_idle()  # asleep, nothing due
            await app.schedule("held", delay=0.4, key="h-1")
            try:
                await signals.until(lambda: bool(ran), "the held timer to run")
            finally:
                worker.stop()
            await task
        process = traced.one("duetime process held")
        assert is_child(process, traced.one("duetime schedule held"))
        assert is_child(traced.one("inside"), process)
        assert process.attributes is not None
        assert process.attributes["duetime.lateness_ms"] >= 0  # type: ignore[operator]

    run(main)
