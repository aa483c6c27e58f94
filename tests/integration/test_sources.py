"""Broker sources against real NATS JetStream and Redis (see brokers.py): messages → timers.

Each test uses its own subject/stream/group and removes it afterwards, so runs never see each
other's messages. Sources run with short fetch/block/retry times so every test takes a second
or two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    for client in ("nats", "redis"):
        pytest.importorskip(client, reason="the broker clients come with duetime[brokers]")

import nats
import nats.js.errors
from brokers import require_nats, require_redis
from nats.js import JetStreamContext
from redis.asyncio import Redis
from tests.waiting import run as run_within
from tests.waiting import until

from duetime import AsyncApp, Status
from duetime.errors import InvalidInput, StoreUnavailable
from duetime.model import NewTimer, OnConflict, PutResult
from duetime.sources import ScheduleCommand, run_sources
from duetime.sources.nats_source import NatsSource
from duetime.sources.redis_source import RedisSource
from duetime.store import create_store
from duetime.testing import make_app

DUE = "2030-03-15T13:00:00Z"


@pytest.fixture
def nats_url() -> str:
    return require_nats()  # outside the event loop: the probe runs its own


@pytest.fixture
def redis_url() -> str:
    return require_redis()


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:10]}"


def run(main: Callable[[], Awaitable[None]]) -> None:
    run_within(main, 25)


def request(key: str | None, **extra: Any) -> bytes:
    body: dict[str, Any] = {"type": "order.reminder", "at": DUE, "payload": {"k": key}, **extra}
    if key is not None:
        body["key"] = key
    return json.dumps(body).encode()


async def eventually(check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
    await until(check, within, "the sources' effect", every=0.05)


@asynccontextmanager
async def running(*sources: Any, app: AsyncApp) -> AsyncIterator[asyncio.Event]:
    """Run ``sources`` with run_sources in the background; stop them and wait on exit."""
    stop = asyncio.Event()
    task = asyncio.create_task(run_sources(app, list(sources), stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


async def stored_keys(app: AsyncApp) -> list[str]:
    page = await app.timers.history(limit=1000)
    return sorted(t.key for t in page.items)


class FlakyStore:
    """The real store, except that ``put_timers`` fails ``failures`` times, or waits for a gate."""

    def __init__(self, inner: Any, failures: int = 0) -> None:
        self._inner = inner
        self.failures = failures
        self.puts = 0
        self.gate: asyncio.Event | None = None
        self.entered = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def put_timers(
        self, timers: Sequence[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        self.puts += 1
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise StoreUnavailable("database is restarting")
        result: list[PutResult] = await self._inner.put_timers(timers, on_conflict, now)
        return result


def flaky_app(tmp_path: Path, failures: int = 0) -> tuple[AsyncApp, FlakyStore]:
    base = make_app(tmp_path, start="2025-03-01T12:00:00Z")
    store = FlakyStore(create_store(base.settings.database_url), failures)
    app = AsyncApp(settings=base.settings, clock=base.clock, store=store)
    return app, store


# -- NATS JetStream ---------------------------------------------------------------------------
@asynccontextmanager
async def nats_env(url: str) -> AsyncIterator[tuple[str, JetStreamContext, str, str]]:
    """(url, jetstream, stream name, subject); the stream is deleted afterwards."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    stream, subject = unique("DT_SRC_"), f"{unique('dtsrc.')}.schedule"
    try:
        yield url, js, stream, subject
    finally:
        with contextlib.suppress(nats.js.errors.NotFoundError):  # it may never have existed
            await js.delete_stream(stream)
        await nc.close()


def nats_source(app: AsyncApp, url: str, subject: str, stream: str, **options: Any) -> NatsSource:
    options.setdefault("create_stream", True)
    return NatsSource(
        app,
        url,
        subject,
        stream=stream,
        fetch_timeout=0.2,
        retry_delay=0.2,
        **options,
    )


async def consumer_settled(js: JetStreamContext, stream: str, durable: str = "duetime") -> bool:
    try:
        info = await js.consumer_info(stream, durable)
    except nats.js.errors.NotFoundError:  # the source has not created it yet
        return False
    return bool(info.num_ack_pending == 0 and info.num_pending == 0)


async def dead_letters(js: JetStreamContext, stream: str, subject: str) -> list[Any]:
    sub = await js.pull_subscribe(subject, durable=unique("inspect"), stream=stream)
    try:
        return list(await sub.fetch(100, timeout=1))
    except nats.errors.TimeoutError:
        return []


def test_nats_messages_become_timers_acked_after_commit(tmp_path: Path, nats_url: str) -> None:
    async def main() -> None:
        async with nats_env(nats_url) as (url, js, stream, subject), make_app(tmp_path) as app:
            source = nats_source(app, url, subject, stream, batch=10)
            async with running(source, app=app):
                await eventually(lambda: _stream_exists(js, stream))
                await js.publish(subject, request("a"))
                await js.publish(subject, request("b"))
                await js.publish(subject, request(None), headers={"Nats-Msg-Id": "m-1"})
                await eventually(lambda: _count(app, 3))
                await eventually(lambda: consumer_settled(js, stream))
            assert await stored_keys(app) == ["a", "b", "nats:m-1"]
            timer = await app.get("a")
            assert timer.status is Status.SCHEDULED
            assert timer.due_at.isoformat() == "2030-03-15T13:00:00+00:00"
            assert source.stats.total_stored() == 3
            assert source.stats.dead_lettered == 0

    run(main)


def test_nats_malformed_messages_are_dead_lettered_with_reason(
    tmp_path: Path, nats_url: str
) -> None:
    async def main() -> None:
        async with nats_env(nats_url) as (url, js, stream, subject), make_app(tmp_path) as app:
            source = nats_source(app, url, subject, stream, batch=10)
            bad = {
                b"not json at all": "body",
                json.dumps({"type": "x", "at": "2030-03-15T13:00:00"}).encode(): "at",
                json.dumps(
                    {"type": "x", "local": "2030-03-15T09:00", "timezone": "Mars/Olympus"}
                ).encode(): "timezone",
                json.dumps({"at": DUE}).encode(): "type",
                b"\xff\xfe": "body",
            }
            async with running(source, app=app):
                await eventually(lambda: _stream_exists(js, stream))
                await js.publish(subject, request("good-1"))
                for data in bad:
                    await js.publish(subject, data, headers={"X-Trace": "t-1"})
                await js.publish(subject, request("good-2"))
                await eventually(lambda: _count(app, 2))
                await eventually(lambda: consumer_settled(js, stream))
                # still consuming after the bad ones
                await js.publish(subject, request("good-3"))
                await eventually(lambda: _count(app, 3))
            letters = await dead_letters(js, stream, f"{subject}.dead")
            assert [m.data for m in letters] == list(bad)
            fields = [m.headers["Duetime-Dead-Field"] for m in letters]
            assert fields == list(bad.values())
            for letter in letters:
                assert letter.headers["Duetime-Dead-Reason"].startswith(
                    letter.headers["Duetime-Dead-Field"] + ":"
                )
                assert letter.headers["Duetime-Source-Subject"] == subject
                assert letter.headers["X-Trace"] == "t-1"  # the original headers travel along
            codes = {
                m.headers["Duetime-Dead-Field"]: m.headers["Duetime-Dead-Code"] for m in letters
            }
            assert codes["timezone"] == "unknown_timezone"
            assert "no UTC offset" in letters[1].headers["Duetime-Dead-Reason"]
            assert source.stats.dead_lettered == 5
            assert await stored_keys(app) == ["good-1", "good-2", "good-3"]

    run(main)


def test_nats_store_unavailable_means_no_ack_then_redelivery(tmp_path: Path, nats_url: str) -> None:
    async def main() -> None:
        app, store = flaky_app(tmp_path, failures=1)
        async with nats_env(nats_url) as (url, js, stream, subject), app:
            store.gate = asyncio.Event()
            source = nats_source(app, url, subject, stream)
            async with running(source, app=app):
                await eventually(lambda: _stream_exists(js, stream))
                await js.publish(subject, request("r-1"))
                await asyncio.wait_for(store.entered.wait(), 5)
                # storing is in progress: the message must not be acknowledged yet
                info = await js.consumer_info(stream, "duetime")
                assert info.num_ack_pending == 1
                store.gate.set()  # ...and now the store fails (StoreUnavailable)
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: consumer_settled(js, stream))
            assert store.puts == 2
            assert source.stats.deferred == 1
            assert await stored_keys(app) == ["r-1"]

    run(main)


def test_nats_redelivered_message_updates_the_same_timer(tmp_path: Path, nats_url: str) -> None:
    """A message stored but whose ack was lost comes back: its key makes that harmless."""

    async def main() -> None:
        async with nats_env(nats_url) as (url, js, stream, subject), make_app(tmp_path) as app:
            await js.add_stream(name=stream, subjects=[subject, f"{subject}.dead"])
            await js.publish(subject, request(None))  # no key, no Nats-Msg-Id
            first = nats_source(app, url, subject, stream, durable="first")
            second = nats_source(app, url, subject, stream, durable="second", name="again")
            async with running(first, second, app=app):
                await eventually(lambda: consumer_settled(js, stream, "first"))
                await eventually(lambda: consumer_settled(js, stream, "second"))
            keys = await stored_keys(app)
            assert len(keys) == 1
            assert keys[0].startswith(f"nats:{stream}:")
            assert first.stats.total_stored() + second.stats.total_stored() == 2

    run(main)


def test_nats_dead_letter_without_a_stream_keeps_the_message(tmp_path: Path, nats_url: str) -> None:
    """If the dead letter cannot be stored, the malformed message stays in its stream."""

    async def main() -> None:
        async with nats_env(nats_url) as (url, js, stream, subject), make_app(tmp_path) as app:
            await js.add_stream(name=stream, subjects=[subject])  # nothing captures .dead
            await js.publish(subject, b"{broken")
            source = nats_source(app, url, subject, stream, create_stream=False)
            async with running(source, app=app):
                await eventually(lambda: _true(source.stats.dead_letter_failures >= 1))
                info = await js.consumer_info(stream, "duetime")
                assert info.num_ack_pending + info.num_pending == 1  # not acked, not lost
                dead_stream = unique("DT_DEAD_")
                await js.add_stream(name=dead_stream, subjects=[f"{subject}.dead"])
                try:
                    await eventually(lambda: consumer_settled(js, stream))
                    letters = await dead_letters(js, dead_stream, f"{subject}.dead")
                finally:
                    await js.delete_stream(dead_stream)
            assert [m.data for m in letters] == [b"{broken"]
            assert source.stats.dead_lettered == 1

    run(main)


def test_nats_subject_of_another_stream_is_named_not_retried_as_missing(
    tmp_path: Path, nats_url: str
) -> None:
    """create_stream with a subject another stream captures says which stream, not "not found"."""

    async def main() -> None:
        async with nats_env(nats_url) as (url, js, stream, subject), make_app(tmp_path) as app:
            prefix = subject.rsplit(".", 1)[0]
            await js.add_stream(name=stream, subjects=[f"{prefix}.>"])  # captures the subject
            source = nats_source(app, url, subject, unique("DT_MINE_"))
            with pytest.raises(InvalidInput, match=f"captured by the stream '{stream}'") as caught:
                await source._subscribe()
            assert caught.value.field == "stream"
            await source._close()

    run(main)


def test_nats_source_refuses_a_dead_subject_it_would_consume(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    with pytest.raises(Exception, match="dead_subject"):
        NatsSource(app, "nats://127.0.0.1:4222", "timers.>")
    with pytest.raises(Exception, match="would be consumed again"):
        NatsSource(app, "nats://127.0.0.1:4222", "timers.>", dead_subject="timers.dead")
    source = NatsSource(app, "nats://127.0.0.1:4222", "timers.*", dead_subject="dead.timers")
    assert source.dead_subject == "dead.timers"


# -- Redis Streams ----------------------------------------------------------------------------
@asynccontextmanager
async def redis_env(url: str) -> AsyncIterator[tuple[str, Redis, str]]:
    """(url, client, stream); the stream and its dead-letter stream are deleted afterwards."""
    client = Redis.from_url(url)
    stream = unique("dt-src-")
    try:
        yield url, client, stream
    finally:
        await client.delete(stream, f"{stream}:dead")
        await client.aclose()


def redis_source(app: AsyncApp, url: str, stream: str, **options: Any) -> RedisSource:
    options.setdefault("consumer", "worker-1")
    return RedisSource(app, url, stream, block=0.2, retry_delay=0.2, **options)


async def no_pending(client: Redis, stream: str, group: str = "duetime") -> bool:
    try:
        pending: Any = await client.xpending(stream, group)
    except Exception:
        return False
    return int(pending["pending"]) == 0 and await _group_caught_up(client, stream, group)


async def _group_caught_up(client: Redis, stream: str, group: str) -> bool:
    groups: Any = await client.xinfo_groups(stream)
    info = next(g for g in groups if g["name"] in (group, group.encode()))
    last: Any = await client.xinfo_stream(stream)
    return bool(info["last-delivered-id"] == last["last-generated-id"])


def test_redis_entries_become_timers_acked_after_commit(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        async with redis_env(redis_url) as (url, client, stream), make_app(tmp_path) as app:
            await client.xadd(stream, {"body": request("before-start")})  # group starts at 0
            source = redis_source(app, url, stream)
            async with running(source, app=app):
                await client.xadd(stream, {"body": request("a")})
                entry: Any = await client.xadd(stream, {"body": request(None)})
                await eventually(lambda: _count(app, 3))
                await eventually(lambda: no_pending(client, stream))
            keys = await stored_keys(app)
            assert keys == sorted(["a", "before-start", f"redis:{stream}:{entry.decode()}"])
            assert source.stats.total_stored() == 3

    run(main)


def test_redis_malformed_entries_are_dead_lettered_with_reason(
    tmp_path: Path, redis_url: str
) -> None:
    async def main() -> None:
        async with redis_env(redis_url) as (url, client, stream), make_app(tmp_path) as app:
            source = redis_source(app, url, stream)
            async with running(source, app=app):
                await client.xadd(stream, {"body": b"[1, 2", "trace": b"t-9"})
                await client.xadd(stream, {"other": b"{}"})
                await client.xadd(
                    stream, {"body": json.dumps({"type": "x", "at": "2030-01-01T00:00"})}
                )
                await client.xadd(stream, {"body": request("ok")})
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: no_pending(client, stream))
                await client.xadd(stream, {"body": request("ok-2")})  # still consuming
                await eventually(lambda: _count(app, 2))
            dead: Any = await client.xrange(f"{stream}:dead")
            fields = [f for _, f in dead]
            assert [f[b"dead_field"] for f in fields] == [b"body", b"body", b"at"]
            assert fields[0][b"body"] == b"[1, 2"  # the original bytes, unchanged
            assert fields[0][b"trace"] == b"t-9"  # and the other original fields
            assert fields[0][b"dead_reason"].startswith(b"body: is not JSON")
            assert fields[1][b"other"] == b"{}"
            assert b"no such field" in fields[1][b"dead_reason"]
            assert b"no UTC offset" in fields[2][b"dead_reason"]
            assert all(f[b"source_stream"] == stream.encode() for f in fields)
            assert source.stats.dead_lettered == 3

    run(main)


def test_redis_store_unavailable_leaves_entry_pending(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        app, store = flaky_app(tmp_path, failures=1)
        async with redis_env(redis_url) as (url, client, stream), app:
            store.gate = asyncio.Event()
            source = redis_source(app, url, stream)
            async with running(source, app=app):
                await client.xadd(stream, {"body": request("r-1")})
                await asyncio.wait_for(store.entered.wait(), 5)
                pending: Any = await client.xpending(stream, "duetime")
                assert pending["pending"] == 1  # read, being stored, not acknowledged
                store.gate.set()  # the store now fails: the entry must stay pending
                await eventually(lambda: _true(source.stats.deferred == 1))
                pending = await client.xpending(stream, "duetime")
                assert pending["pending"] == 1
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: no_pending(client, stream))
            assert store.puts == 2
            assert await stored_keys(app) == ["r-1"]

    run(main)


def test_redis_pending_entries_of_dead_consumer_are_claimed(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        async with redis_env(redis_url) as (url, client, stream), make_app(tmp_path) as app:
            await client.xgroup_create(stream, "duetime", id="0", mkstream=True)
            await client.xadd(stream, {"body": request("orphan-1")})
            await client.xadd(stream, {"body": request("orphan-2")})
            # A consumer reads both, then dies before storing or acknowledging them.
            read: Any = await client.xreadgroup("duetime", "crashed", {stream: ">"}, count=10)
            assert len(read[0][1]) == 2

            async def idle_past_claim_idle() -> bool:  # as the server counts it
                entries: Any = await client.xpending_range(stream, "duetime", "-", "+", 10)
                return all(entry["time_since_delivered"] >= 300 for entry in entries)

            await eventually(idle_past_claim_idle)
            source = redis_source(app, url, stream, claim_idle=0.2)
            async with running(source, app=app):
                await eventually(lambda: _count(app, 2))
                await eventually(lambda: no_pending(client, stream))
            assert source.claimed == 2
            assert await stored_keys(app) == ["orphan-1", "orphan-2"]

    run(main)


def test_redis_restarted_consumer_rereads_own_pending(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        async with redis_env(redis_url) as (url, client, stream), make_app(tmp_path) as app:
            await client.xgroup_create(stream, "duetime", id="0", mkstream=True)
            await client.xadd(stream, {"body": request("mine")})
            await client.xreadgroup("duetime", "worker-1", {stream: ">"}, count=10)
            source = redis_source(app, url, stream, claim_idle=600)  # no claiming involved
            async with running(source, app=app):
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: no_pending(client, stream))
            assert source.claimed == 0

    run(main)


def test_redis_seed004_mapping_with_an_acceptance_window(tmp_path: Path, redis_url: str) -> None:
    async def main() -> None:
        async with redis_env(redis_url) as (url, client, stream), make_app(tmp_path) as app:
            command = ScheduleCommand.named("seed004", acceptance_window="PT5M")
            source = redis_source(app, url, stream, command=command)
            event = {
                "id": "550e8400",
                "createdDate": "2025-10-31T10:00:00Z",
                "executionDate": "2025-10-31T10:03:00Z",
                "islandId": "island-123",
                "userId": "user-789",
                "status": "PENDING",
            }
            async with running(source, app=app):
                await client.xadd(stream, {"body": json.dumps(event)})
                await client.xadd(
                    stream,
                    {
                        "body": json.dumps(
                            {**event, "id": "naive", "executionDate": "2025-10-31T10:03:00"}
                        )
                    },
                )
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: no_pending(client, stream))
            timer = await app.get("notification:550e8400")
            assert timer.payload == event
            assert timer.subject == "user-789"
            assert timer.expires_after is not None
            assert timer.expires_after.total_seconds() == 300
            dead: Any = await client.xrange(f"{stream}:dead")
            assert dead[0][1][b"dead_field"] == b"executionDate"

    run(main)


# -- helpers ----------------------------------------------------------------------------------
async def _count(app: AsyncApp, n: int) -> bool:
    return len(await stored_keys(app)) >= n


async def _true(value: bool) -> bool:
    return value


async def _stream_exists(js: JetStreamContext, stream: str) -> bool:
    try:
        await js.consumer_info(stream, "duetime")
    except Exception:
        return False
    return True
