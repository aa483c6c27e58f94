"""PostgreSQL going away and coming back: calls fail cleanly, then work again on their own.

A server restart is simulated without disturbing anyone else on the server: either by
terminating this test's own backends, or by routing the store through a TCP proxy that is shut
(every connection dropped, new ones refused) and reopened on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from storekit import NOW, PG_URL, StoreFactory, new_timer, wait_until, with_params
from tests.waiting import until

from duetime import AsyncApp, Event
from duetime.app.runner import work
from duetime.errors import StoreUnavailable
from duetime.model import TimerFilter
from duetime.services import startup
from duetime.store import Store
from duetime.store.postgres.store import PostgresStore
from duetime.timemath.backoff import Backoff


class Proxy:
    """A TCP relay to PostgreSQL that can be shut and reopened on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Refuse new connections and cut the open ones, as a crashed server would."""
        if self._server is not None:
            self._server.close()
            self._server = None
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self._writers -= {writer, up_writer}


def _target() -> tuple[str, int]:
    params = psycopg.conninfo.conninfo_to_dict(PG_URL)
    return str(params.get("host") or "127.0.0.1"), int(params.get("port") or 5432)


async def _eventually_works(store: Store, within: float = 60.0) -> int:
    """Call the store until a call succeeds; every failure must be StoreUnavailable."""
    failures = 0

    async def works() -> bool:
        nonlocal failures
        try:
            await store.count_by_status("ns")
        except StoreUnavailable:
            failures += 1
            return False
        return True

    await until(works, within, "a store call to succeed", every=0.1)
    return failures


async def test_terminated_connections_are_replaced(pg_url: str, open_store: StoreFactory) -> None:
    app = f"dt_{uuid.uuid4().hex[:12]}"
    store = await open_store(with_params(pg_url, application_name=app))
    other = await open_store(pg_url)
    heard: list[datetime | None] = []
    store.add_wakeup_listener(heard.append)
    await store.put_timers([new_timer("a")], "error", NOW)
    assert isinstance(store, PostgresStore)
    listener = store._listener
    assert listener is not None

    with psycopg.connect(PG_URL, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            [app],
        ).fetchall()
    assert len(killed) >= 2  # the pool's connection(s) and the listener

    assert await _eventually_works(store) <= 2
    await store.put_timers([new_timer("b")], "error", NOW)
    assert {t.key for t in (await store.list_timers("ns", TimerFilter(), None, 10)).items} == {
        "a",
        "b",
    }

    # The listener noticed, reconnected, said "re-read" and hears other nodes again.
    await wait_until(lambda: listener.reconnects >= 1 and None in heard, within=10)
    later = NOW.replace(year=2030)
    await other.put_timers([new_timer("c", later)], "error", NOW)
    await wait_until(lambda: later in heard)


async def test_outage_fails_fast_costs_no_cpu_and_recovers(
    open_store: StoreFactory, pg_url: str
) -> None:
    proxy = Proxy(*_target())
    await proxy.start()
    schema = pg_url.rsplit("schema=", 1)[1]
    via_proxy = f"postgresql://postgres@127.0.0.1:{proxy.port}/{PG_URL.rsplit('/', 1)[1]}"
    url = with_params(via_proxy.split("?")[0], schema=schema, pool_timeout="1", pool_max="3")
    store = await open_store(url)
    direct = await open_store(pg_url)
    heard: list[datetime | None] = []
    store.add_wakeup_listener(heard.append)
    await store.put_timers([new_timer("a")], "error", NOW)

    await proxy.stop()
    started = asyncio.get_running_loop().time()
    with pytest.raises(StoreUnavailable):
        await store.get_timer("ns", "a")
    assert asyncio.get_running_loop().time() - started < 3.0

    cpu = time.process_time()
    await asyncio.sleep(3.0)  # timed: the listener and the pool keep trying, gently
    assert time.process_time() - cpu < 0.5

    with pytest.raises(StoreUnavailable):
        await store.put_timers([new_timer("b")], "error", NOW)

    await proxy.start()
    await _eventually_works(store)
    await store.put_timers([new_timer("b")], "error", NOW)
    await wait_until(lambda: None in heard, within=10)  # reconnected: re-read the next due time
    later = NOW.replace(year=2031)
    await direct.put_timers([new_timer("c", later)], "error", NOW)
    await wait_until(lambda: later in heard)
    await proxy.stop()


async def test_a_server_that_refuses_writes_is_left_for_the_next_connection(
    open_store: StoreFactory, pg_url: str
) -> None:
    """A primary demoted to a standby behind a name that moved answers writes with "read-only
    transaction": that is an outage of the primary, and the connection goes, so the next call
    is made on a fresh one (where the URL leads now)."""
    store = await open_store(with_params(pg_url, pool_min="1", pool_max="1"))
    assert isinstance(store, PostgresStore)

    async def demote(conn: psycopg.AsyncConnection[object]) -> int:
        await conn.execute("SET default_transaction_read_only = on")
        return conn.info.backend_pid

    demoted = await store._db.read(demote)
    with pytest.raises(StoreUnavailable, match="read-only"):
        await store.put_timers([new_timer("a")], "error", NOW)

    await store.put_timers([new_timer("a")], "error", NOW)  # a fresh connection: it writes

    async def pid(conn: psycopg.AsyncConnection[object]) -> int:
        return conn.info.backend_pid

    assert await store._db.read(pid) != demoted


async def test_a_worker_started_while_the_server_is_down_waits_for_it(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Connections refused at start (a server restarting): the worker says what it waits for,
    keeps trying, and fires what is due once the server answers."""
    monkeypatch.setattr(
        startup, "START_BACKOFF", Backoff(timedelta(milliseconds=50), timedelta(seconds=0.2))
    )
    proxy = Proxy(*_target())
    await proxy.start()
    await proxy.stop()  # its port now refuses connections
    schema = pg_url.rsplit("schema=", 1)[1]
    via_proxy = f"postgresql://postgres@127.0.0.1:{proxy.port}/{PG_URL.rsplit('/', 1)[1]}"
    url = with_params(via_proxy.split("?")[0], schema=schema, pool_timeout="1", pool_max="3")
    async with AsyncApp(pg_url) as producer:
        await producer.schedule("ping", {}, delay=0, key="due")

    app = AsyncApp(url)
    fired = asyncio.Event()

    @app.handler("ping")
    async def ping(event: Event) -> None:
        fired.set()

    def waits() -> int:
        return sum("database unavailable at start" in r.getMessage() for r in caplog.records)

    stop = asyncio.Event()
    with caplog.at_level(logging.WARNING, logger="duetime.services"):
        running = asyncio.create_task(work(app, stop))
        try:
            await until(lambda: waits() >= 2 or running.done(), 30, "two tries at start")
            assert not running.done(), "the worker ended by itself"
            await proxy.start()
            await until(lambda: fired.is_set() or running.done(), 30, "the timer to fire")
            assert not running.done(), "the worker ended by itself"
        finally:
            stop.set()
            await running
            await proxy.stop()
