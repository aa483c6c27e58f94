"""Redis Streams source: a consumer group whose entries become timers, XACK-ed after commit.

Each entry's body is one field (``body`` unless configured) holding the JSON message. Entries are
read with ``XREADGROUP`` in batches and go through :func:`~duetime.sources.base.store_batch`:

- valid entries are stored in one transaction, then acknowledged with one ``XACK``;
- malformed ones are copied to the dead-letter stream (``<stream>:dead`` unless configured) with
  every original field unchanged plus ``dead_reason``, ``dead_code``, ``dead_field``,
  ``source_stream`` and ``source_id`` — the ``XADD`` and the ``XACK`` run in one ``MULTI``, so a
  bad entry is dead-lettered exactly once and never lost;
- if storing fails for a reason that may pass (the store is down), nothing is acknowledged: the
  entries stay in this consumer's pending list and are read again (``XREADGROUP … 0``) after
  ``retry_delay``.

Crashed consumers: on start, and then every ``claim_idle`` seconds, ``XAUTOCLAIM`` takes over
entries that another consumer of the group read but did not acknowledge for ``claim_idle``
seconds (it died, or was partitioned away), so they are stored rather than stuck. A restarted
process that keeps its consumer name first re-reads its own pending entries.

The group is created (``MKSTREAM``) from ``start_id`` — ``0``, the whole stream, by default, so
requests written before the first start are not skipped. An entry without a key of its own gets
``redis:<stream>:<entry id>``: a redelivered entry updates its timer rather than adding another.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError, ResponseError
from redis.typing import EncodableT, FieldT

from duetime.app.facade import AsyncApp
from duetime.destinations.base import check_name, check_timeout
from duetime.destinations.config import check_redis_url
from duetime.errors import InvalidInput
from duetime.sources.base import (
    BatchOutcome,
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
from duetime.sources.checks import check_plain, check_start_id
from duetime.support.redaction import redact_url

log = logging.getLogger("duetime.sources.redis")

DEFAULT_GROUP = "duetime"
DEFAULT_FIELD = "body"
DEFAULT_BATCH = 100
DEFAULT_BLOCK = 1.0
DEFAULT_CLAIM_IDLE = 60.0
DEFAULT_RETRY_DELAY = 5.0
DEFAULT_TIMEOUT = 5.0
MAX_RECONNECT_DELAY = 30.0

Entry = tuple[bytes, dict[bytes, bytes]]


def default_consumer() -> str:
    """``<host>-<pid>``: unique per process, so two workers never share a pending list."""
    return f"{socket.gethostname()}-{os.getpid()}"


class RedisSource:
    """Consumes schedule requests from a Redis stream as one consumer of a consumer group."""

    def __init__(
        self,
        app: AsyncApp,
        url: str,
        stream: str,
        *,
        command: ScheduleCommand | None = None,
        group: str = DEFAULT_GROUP,
        consumer: str | None = None,
        dead_stream: str | None = None,
        field: str = DEFAULT_FIELD,
        batch: int = DEFAULT_BATCH,
        block: float = DEFAULT_BLOCK,
        claim_idle: float = DEFAULT_CLAIM_IDLE,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        start_id: str = "0",
        timeout: float = DEFAULT_TIMEOUT,
        name: str | None = None,
    ) -> None:
        self.app = app
        self.url = check_redis_url(url)
        self.stream = check_plain(stream, "stream", what="stream")
        self.command = command or ScheduleCommand()
        self.group = check_plain(group, "group", what="consumer group")
        self.consumer = check_plain(consumer or default_consumer(), "consumer", what="consumer")
        self.dead_stream = check_plain(
            dead_stream or f"{self.stream}:dead", "dead_stream", what="stream"
        )
        if self.dead_stream == self.stream:
            raise InvalidInput("dead_stream", "must differ from the stream it collects from")
        self.field = check_plain(field, "field", what="field")
        self.batch = check_count(batch, "batch")
        self.block = check_seconds(block, "block", maximum=60)
        self.claim_idle = check_seconds(claim_idle, "claim_idle", maximum=86400)
        self.retry_delay = check_seconds(retry_delay, "retry_delay")
        self.start_id = check_start_id(start_id)
        self.timeout = check_timeout(timeout)
        self.name = check_name(name or f"redis-{self.group}")
        self.stats = SourceStats()
        self.claimed = 0
        """Entries taken over from other consumers with XAUTOCLAIM."""
        self._client: Redis | None = None
        self._own_pending = True
        self._next_claim = 0.0

    def __repr__(self) -> str:
        return (
            f"RedisSource({self.name!r}, {redact_url(self.url)!r}, {self.stream!r}, "
            f"group={self.group!r}, consumer={self.consumer!r})"
        )

    # -- running ----------------------------------------------------------------------------
    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; Redis outages are logged and retried."""
        delay = 0.5
        self._own_pending = True
        self._next_claim = 0.0
        try:
            while not stop.is_set():
                try:
                    await self._ensure_group()
                    log.info(
                        "source %s: consuming stream %s as %s/%s",
                        self.name,
                        self.stream,
                        self.group,
                        self.consumer,
                    )
                    delay = 0.5
                    await self._consume(stop)
                except asyncio.CancelledError:
                    raise
                except (RedisError, OSError, TimeoutError) as exc:
                    log.warning("source %s: %s; retrying in %.1fs", self.name, describe(exc), delay)
                    self._own_pending = True
                    await sleep_until_stopped(stop, delay)
                    delay = min(delay * 2, MAX_RECONNECT_DELAY)
        finally:
            await self.close()

    async def close(self) -> None:
        """Close the connection pool; :meth:`run` opens a new one if called again."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _redis(self) -> Redis:
        if self._client is None:
            self._client = Redis.from_url(
                self.url,
                socket_timeout=self.block + self.timeout,
                socket_connect_timeout=self.timeout,
            )
        return self._client

    async def _ensure_group(self) -> None:
        try:
            await self._redis().xgroup_create(
                self.stream, self.group, id=self.start_id, mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _consume(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            if self._own_pending:
                # Ours from before a restart or a failed store: oldest first, until none are left.
                entries = await self._read("0", block=None)
                if not entries:
                    self._own_pending = False
                    continue
            elif time.monotonic() >= self._next_claim:
                await self._claim_abandoned(stop)
                self._next_claim = time.monotonic() + self.claim_idle
                continue
            else:
                entries = await self._read(">", block=self.block)
                if not entries:
                    continue
            if not await self.handle(entries):
                self._own_pending = True
                await sleep_until_stopped(stop, self.retry_delay)

    async def _read(self, start: str, *, block: float | None) -> list[Entry]:
        try:
            reply: Any = await self._redis().xreadgroup(
                self.group,
                self.consumer,
                {self.stream: start},
                count=self.batch,
                block=None if block is None else max(1, int(block * 1000)),
            )
        except ResponseError as exc:
            if "NOGROUP" in str(exc):  # the stream or group was deleted (or Redis lost it)
                await self._ensure_group()
                return []
            raise
        if not reply:
            return []
        _, entries = reply[0]
        return list(entries)

    async def _claim_abandoned(self, stop: asyncio.Event) -> None:
        """XAUTOCLAIM entries idle longer than ``claim_idle`` and store them as our own."""
        cursor: Any = "0-0"
        idle_ms = max(1, int(self.claim_idle * 1000))
        while not stop.is_set():
            reply: Any = await self._redis().xautoclaim(
                self.stream,
                self.group,
                self.consumer,
                min_idle_time=idle_ms,
                start_id=cursor,
                count=self.batch,
            )
            cursor, entries = reply[0], list(reply[1])
            deleted = list(reply[2]) if len(reply) > 2 else []
            if deleted:
                log.warning(
                    "source %s: %d abandoned entries were deleted from %s before being stored",
                    self.name,
                    len(deleted),
                    self.stream,
                )
            if entries:
                self.claimed += len(entries)
                log.info(
                    "source %s: claimed %d entries idle for over %.1fs from other consumers",
                    self.name,
                    len(entries),
                    self.claim_idle,
                )
                if not await self.handle(entries):
                    self._own_pending = True  # they are ours now: retried from our pending list
                    return
            if cursor in (b"0-0", "0-0"):
                return

    # -- one batch --------------------------------------------------------------------------
    async def handle(self, entries: Sequence[Entry]) -> bool:
        """Store, dead-letter and XACK one batch; False when storing failed (left pending)."""
        items: list[Incoming[Entry]] = []
        without_body: list[tuple[Incoming[Entry], Rejection]] = []
        gone: list[bytes] = []
        body_field = self.field.encode()
        for entry in entries:
            entry_id, fields = entry
            if not fields:  # deleted from the stream while pending: nothing left to store
                gone.append(entry_id)
                continue
            item = Incoming(
                entry, fields.get(body_field, b""), self._key(entry_id.decode()), fields
            )
            if body_field in fields:
                items.append(item)
            else:
                missing = Rejection("invalid_input", self.field, "the entry has no such field")
                without_body.append((item, missing))
        client = self._redis()
        if gone:
            await client.xack(self.stream, self.group, *gone)
        outcome: BatchOutcome[Entry] = await store_batch(
            self.app, self.command, items, source=self.name
        )
        outcome.rejected.extend(without_body)
        position = {entry[0]: index for index, entry in enumerate(entries)}
        outcome.rejected.sort(key=lambda rejected: position[rejected[0].handle[0]])  # stream order
        record(self.stats, outcome, self.name, len(items) + len(without_body))
        if outcome.stored:
            await client.xack(self.stream, self.group, *(entry[0] for entry, _ in outcome.stored))
        for item, rejection in outcome.rejected:
            await self._dead_letter(item.handle, rejection)
        return not outcome.deferred

    async def _dead_letter(self, entry: Entry, rejection: Rejection) -> None:
        """XADD the original fields plus the reason to the dead stream and XACK, atomically."""
        entry_id, original = entry
        fields: dict[FieldT, EncodableT] = dict(original.items())
        fields.update(
            {
                "dead_reason": rejection.reason,
                "dead_code": rejection.code,
                "dead_field": rejection.field or "",
                "source_stream": self.stream,
                "source_id": entry_id,
            }
        )
        async with self._redis().pipeline(transaction=True) as pipe:
            pipe.xadd(self.dead_stream, fields)
            pipe.xack(self.stream, self.group, entry_id)
            await pipe.execute()
        self.stats.dead_lettered += 1
        log.warning(
            "source %s: dead-lettered entry %s (%s) to %s: %s",
            self.name,
            entry_id.decode(errors="replace"),
            rejection.code,
            self.dead_stream,
            rejection.reason,
        )

    def _key(self, entry_id: str) -> str:
        return message_key("redis", f"{self.stream}:{entry_id}")
