"""Kafka source: a consumer group whose records become timers, offsets committed after commit.

Records are read in batches and go through :func:`~duetime.sources.base.store_batch`:

- valid records are stored in one transaction;
- malformed ones are produced to the dead topic (``<topic>.dead`` unless configured) with the
  original key, value and headers, plus the headers ``duetime-dead-reason``,
  ``duetime-dead-code``, ``duetime-dead-field``, ``duetime-source-topic``,
  ``duetime-source-partition`` and ``duetime-source-offset``, through an idempotent
  ``acks=all`` producer, and waited for;
- only then is each partition's offset committed, synchronously, up to the first record that is
  not done. If storing fails for a reason that may pass (the store is down) or a dead letter is
  not acknowledged, the partition is rewound (``seek``) to that record and read again after
  ``retry_delay``: nothing after it is committed, so nothing is lost.

A kill -9 between the database commit and the offset commit means the records are read again
(by this process when it restarts, or by the group's next owner of the partition) and upsert
the same timers: a record without a key of its own gets ``kafka:<topic>:<partition>:<offset>``.
Dead letters may be written twice in that case (at least once, like everything else).

Rebalances: offsets are committed before the next poll, and librdkafka revokes partitions only
inside a poll, so a partition changes owner with everything read so far committed (or, if a
commit failed, re-read by the next owner). Offsets are committed with ``enable.auto.commit``
off; a new group starts at ``start`` (``earliest`` by default, so requests written before the
first start are not skipped).

The client is ``confluent-kafka`` (librdkafka); its blocking calls run on one thread of their
own, in order, so the event loop never waits on the network.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from duetime.app.facade import AsyncApp
from duetime.destinations.base import check_name, check_timeout
from duetime.destinations.kafka_options import (
    check_choice,
    check_servers,
    check_topic,
    client_config,
)
from duetime.errors import InvalidInput
from duetime.sources.base import (
    Incoming,
    Rejection,
    ScheduleCommand,
    SourceStats,
    check_count,
    check_seconds,
    describe,
    message_key,
    record,
    sleep_until_stopped,
    store_batch,
)
from duetime.sources.checks import check_plain
from duetime.sources.kafka_group import GroupWait

log = logging.getLogger("duetime.sources.kafka")

DEFAULT_GROUP = "duetime"
DEFAULT_BATCH = 100
DEFAULT_POLL_TIMEOUT = 1.0
DEFAULT_RETRY_DELAY = 5.0
DEFAULT_TIMEOUT = 10.0
MAX_RECONNECT_DELAY = 30.0
STARTS = ("earliest", "latest")
check_start = check_choice(STARTS)

T = TypeVar("T")


class KafkaSource:
    """Consumes schedule requests from a Kafka topic as a member of a consumer group."""

    def __init__(
        self,
        app: AsyncApp,
        bootstrap_servers: str | Sequence[str],
        topic: str,
        *,
        command: ScheduleCommand | None = None,
        group: str = DEFAULT_GROUP,
        dead_topic: str | None = None,
        batch: int = DEFAULT_BATCH,
        poll_timeout: float = DEFAULT_POLL_TIMEOUT,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        start: str = "earliest",
        timeout: float = DEFAULT_TIMEOUT,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        **security: Any,
    ) -> None:
        self.app = app
        self.servers = check_servers(
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )
        self.topic = check_topic(topic)
        self.command = command or ScheduleCommand()
        self.group = check_plain(group, "group", what="consumer group")
        self.dead_topic = check_topic(dead_topic or f"{self.topic}.dead", "dead_topic")
        if self.dead_topic == self.topic:
            raise InvalidInput("dead_topic", "must differ from the topic it collects from")
        self.batch = check_count(batch, "batch")
        self.poll_timeout = check_seconds(poll_timeout, "poll_timeout", maximum=60)
        self.retry_delay = check_seconds(retry_delay, "retry_delay")
        self.start = check_start(start, "start")
        self.timeout = check_timeout(timeout)
        self.name = check_name(name or f"kafka-{self.group}")
        self.consumer_config: dict[str, Any] = {
            **client_config(self.servers, security, env, role="consumer"),
            "group.id": self.group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": self.start,
            "client.id": f"duetime-{self.name}",
        }
        self.producer_config: dict[str, Any] = {
            **client_config(self.servers, security, env, role="producer"),
            "enable.idempotence": True,
            "acks": "all",
            "message.timeout.ms": int(self.timeout * 1000),
            "client.id": f"duetime-{self.name}-dead",
        }
        self.stats = SourceStats()
        self.rewinds = 0
        """Times a partition was rewound to re-read records that could not be finished."""
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"duetime-kafka-{self.name}")
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None
        self._group = GroupWait(log, self.name, self.group, self.topic)

    def __repr__(self) -> str:
        return f"KafkaSource({self.name!r}, {self.servers!r}, {self.topic!r}, group={self.group!r})"

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Run a blocking client call on the source's own thread (calls stay in order)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: fn(*args, **kwargs))

    # -- running ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; broker outages are logged and retried."""
        delay = 0.5
        try:
            while not stop.is_set():
                try:
                    consumer = await self._open()
                    delay = 0.5
                    await self._consume(consumer, stop)
                except asyncio.CancelledError:
                    raise
                except KafkaException as exc:
                    log.warning("source %s: %s; retrying in %.1fs", self.name, describe(exc), delay)
                    await self.close()
                    await sleep_until_stopped(stop, delay)
                    delay = min(delay * 2, MAX_RECONNECT_DELAY)
        finally:
            await self.close()

    async def _open(self) -> Consumer:
        if self._consumer is None:
            config = {**self.consumer_config, "error_cb": self._on_error}
            consumer: Consumer = await self._call(Consumer, config)
            await self._call(
                consumer.subscribe,
                [self.topic],
                on_assign=self._group.on_assign,
                on_revoke=self._group.on_revoke,
            )
            self._group.subscribed()
            self._consumer = consumer
        return self._consumer

    def _on_error(self, error: KafkaError) -> None:
        log.warning("source %s: %s", self.name, error.str())

    async def close(self) -> None:
        """Leave the group (its partitions go to the others at once) and close the clients."""
        consumer, self._consumer = self._consumer, None
        producer, self._producer = self._producer, None
        if consumer is not None:
            try:
                await self._call(consumer.close)
            except (KafkaException, RuntimeError) as exc:
                log.warning("source %s: closing the consumer: %s", self.name, describe(exc))
        if producer is not None:
            await self._call(producer.flush, self.timeout)

    async def _consume(self, consumer: Consumer, stop: asyncio.Event) -> None:
        while not stop.is_set():
            polled: list[Message] = await self._call(self._read, consumer)
            self._group.still_waiting()
            records: list[Message] = []
            for message in polled:
                error = message.error()
                if error is None:
                    records.append(message)
                elif error.fatal():
                    raise KafkaException(error)
                elif error.code() != KafkaError._PARTITION_EOF:
                    log.warning("source %s: %s", self.name, error.str())
            if records and not await self.handle(consumer, records):
                await sleep_until_stopped(stop, self.retry_delay)

    def _read(self, consumer: Consumer) -> list[Message]:
        """Wait up to ``poll_timeout`` for one record, then take what has already arrived.

        ``consume(batch, timeout)`` alone would hold a lone record until ``batch`` arrived or
        the timeout ran out (a second by default) before storing it; librdkafka prefetches, so
        under load the batch still fills from what is buffered.
        """
        first: Message | None = consumer.poll(self.poll_timeout)
        if first is None:
            return []
        if self.batch == 1:
            return [first]
        rest: list[Message] = consumer.consume(self.batch - 1, 0)
        return [first, *rest]

    # -- one batch --------------------------------------------------------------------------
    async def handle(self, consumer: Consumer, records: Sequence[Message]) -> bool:
        """Store, dead-letter, then commit one batch; False when some records must be re-read."""
        traced = self.app.tracing is not None  # headers are read only to be traced
        items = [
            Incoming(
                message,
                message.value() or b"",
                self._key(message),
                message.headers() if traced else None,
            )
            for message in records
        ]
        outcome = await store_batch(self.app, self.command, items, source=self.name)
        record(self.stats, outcome, self.name, len(items))
        unfinished: list[Message] = list(outcome.deferred)
        if outcome.rejected:
            unfinished.extend(await self._dead_letter(outcome.rejected))
        await self._commit(consumer, records, unfinished)
        return not unfinished

    async def _commit(
        self, consumer: Consumer, records: Sequence[Message], unfinished: Sequence[Message]
    ) -> None:
        """Commit each partition up to its first unfinished record, and rewind to that one."""
        first_open: dict[int, int] = {}
        for message in unfinished:
            partition, offset = position(message)
            first_open[partition] = min(offset, first_open.get(partition, offset))
        ends: dict[int, int] = defaultdict(int)
        for message in records:
            partition, offset = position(message)
            ends[partition] = max(ends[partition], offset + 1)
        offsets = [
            TopicPartition(self.topic, partition, first_open.get(partition, end))
            for partition, end in sorted(ends.items())
        ]
        try:
            await self._call(consumer.commit, offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            # Typically a rebalance took the partition away: its next owner re-reads from the
            # last committed offset, and the timers are upserted again.
            log.warning("source %s: committing offsets failed: %s", self.name, describe(exc))
        for partition, offset in first_open.items():
            self.rewinds += 1
            try:
                await self._call(consumer.seek, TopicPartition(self.topic, partition, offset))
            except KafkaException as exc:  # no longer ours: the next owner resumes there
                log.info("source %s: rewind of %d skipped: %s", self.name, partition, exc)

    async def _dead_letter(
        self, rejected: Sequence[tuple[Incoming[Message], Rejection]]
    ) -> list[Message]:
        """Produce each rejected record to the dead topic; the ones not acknowledged."""
        producer = self._dead_producer()
        loop = asyncio.get_running_loop()
        waits: list[tuple[Message, Rejection, asyncio.Future[KafkaError | None]]] = []
        for item, rejection in rejected:
            message = item.handle
            done: asyncio.Future[KafkaError | None] = loop.create_future()

            def on_delivery(
                error: KafkaError | None, _: Message, done: asyncio.Future[Any] = done
            ) -> None:
                loop.call_soon_threadsafe(_resolve, done, error)

            headers: list[Any] = list(message.headers() or [])
            headers += [
                ("duetime-dead-reason", rejection.reason.encode("utf-8")),
                ("duetime-dead-code", rejection.code.encode("utf-8")),
                ("duetime-dead-field", (rejection.field or "").encode("utf-8")),
                ("duetime-source-topic", self.topic.encode("utf-8")),
                ("duetime-source-partition", str(message.partition()).encode("ascii")),
                ("duetime-source-offset", str(message.offset()).encode("ascii")),
            ]
            try:
                producer.produce(
                    self.dead_topic,
                    message.value(),
                    message.key(),
                    headers=headers,
                    on_delivery=on_delivery,
                )
            except (BufferError, KafkaException) as exc:
                _resolve(done, KafkaError(KafkaError._FAIL, describe(exc)))
            waits.append((message, rejection, done))
        await self._call(producer.flush, self.timeout)
        failed: list[Message] = []
        for message, rejection, done in waits:
            error = done.result() if done.done() else None
            if not done.done() or error is not None:
                failed.append(message)
                self.stats.dead_letter_failures += 1
                log.warning(
                    "source %s: dead letter for %s[%d]@%d not acknowledged (%s); will re-read",
                    self.name,
                    self.topic,
                    message.partition(),
                    message.offset(),
                    "timeout" if error is None else error.str(),
                )
                continue
            self.stats.dead_lettered += 1
            log.warning(
                "source %s: dead-lettered %s[%d]@%d (%s) to %s: %s",
                self.name,
                self.topic,
                message.partition(),
                message.offset(),
                rejection.code,
                self.dead_topic,
                rejection.reason,
            )
        return failed

    def _dead_producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer({**self.producer_config, "error_cb": self._on_error})
        return self._producer

    def _key(self, message: Message) -> str:
        partition, offset = position(message)
        return message_key("kafka", f"{self.topic}:{partition}:{offset}")


def position(message: Message) -> tuple[int, int]:
    """(partition, offset) of a consumed record (always both: only errors lack them)."""
    partition, offset = message.partition(), message.offset()
    assert partition is not None
    assert offset is not None
    return partition, offset


def _resolve(done: asyncio.Future[KafkaError | None], error: KafkaError | None) -> None:
    if not done.done():
        done.set_result(error)
