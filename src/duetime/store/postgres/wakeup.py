"""Wake-ups over LISTEN/NOTIFY: one dedicated connection hears what every node stores.

Writers call ``pg_notify('duetime_<schema>', '<earliest run_at, epoch µs>')`` inside their
transaction, so the hint is delivered only if the timer is committed. The listener is not a
pooled connection (LISTEN is per session). Notifications sent while it is disconnected are lost,
so after every reconnect listeners are told ``None`` — "re-read the next due time". Reconnects
back off exponentially (capped at :data:`MAX_BACKOFF`) so a server that is down costs no CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from datetime import datetime

from psycopg import AsyncConnection, sql

from duetime.store.codec import from_micros, to_micros

log = logging.getLogger("duetime.store.postgres.wakeup")

MIN_BACKOFF = 0.05
MAX_BACKOFF = 2.0
PROBE_EVERY = 15.0
"""Seconds between checks that the listening connection is still alive (:func:`probe`)."""
PROBE_TIMEOUT = 5.0


async def probe(conn: AsyncConnection[tuple[object, ...]]) -> None:
    """One round trip that runs no statement: a pipeline's sync alone, which the server
    answers as soon as it reads it. A query — even ``SELECT 1`` or an empty one — is a
    transaction, counted as one in ``pg_stat_database`` (an idle worker's listener probed four
    times a minute)."""
    async with conn.pipeline():
        pass


def encode_payload(earliest: datetime | None) -> str:
    """The NOTIFY payload: epoch microseconds, or '' for "unknown, re-read"."""
    return "" if earliest is None else str(to_micros(earliest))


def decode_payload(payload: str) -> datetime | None:
    try:
        return from_micros(int(payload))
    except (ValueError, OverflowError):
        return None


class Listener:
    """Holds the LISTEN connection and calls ``on_wakeup`` for every notification."""

    def __init__(
        self, conninfo: str, channel: str, on_wakeup: Callable[[datetime | None], None]
    ) -> None:
        self._conninfo = conninfo
        self._channel = channel
        self._on_wakeup = on_wakeup
        self._conn: AsyncConnection[tuple[object, ...]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.reconnects = 0
        """How many times the line was lost and found again (for logs, metrics and tests)."""

    async def start(self) -> None:
        """Connect now if the server answers (so LISTEN is active on return), then keep at it."""
        try:
            await self._connect()
        except Exception as exc:
            log.warning("wake-up listener could not connect yet (%s); will retry", exc)
        self._task = asyncio.get_running_loop().create_task(self._run(), name="duetime-listen")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._disconnect()

    async def _connect(self) -> None:
        conn = await AsyncConnection.connect(self._conninfo, autocommit=True, connect_timeout=5)
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        except BaseException:
            await conn.close()
            raise
        self._conn = conn

    async def _disconnect(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        delay = MIN_BACKOFF
        while True:
            if self._conn is None:
                try:
                    await self._connect()
                except Exception as exc:
                    log.debug("wake-up listener reconnect failed: %s", exc)
                    await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, MAX_BACKOFF)
                    continue
                self.reconnects += 1
                log.info("wake-up listener reconnected; re-reading due times")
                self._deliver(None)  # what was sent while away is lost
            started = loop.time()
            try:
                await self._listen()
            except Exception as exc:
                log.warning("wake-up listener lost its connection (%s); reconnecting", exc)
                await self._disconnect()
                if loop.time() - started > MAX_BACKOFF:
                    delay = MIN_BACKOFF  # it had been fine for a while: reconnect at once
                else:
                    await asyncio.sleep(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, MAX_BACKOFF)

    async def _listen(self) -> None:
        """Deliver notifications for a while, then probe the line (a half-open TCP is silent)."""
        conn = self._conn
        assert conn is not None
        async for notify in conn.notifies(timeout=PROBE_EVERY):
            if notify.channel == self._channel:
                self._deliver(decode_payload(notify.payload))
        await asyncio.wait_for(probe(conn), PROBE_TIMEOUT)

    def _deliver(self, earliest: datetime | None) -> None:
        try:
            self._on_wakeup(earliest)
        except Exception:
            log.exception("a wake-up listener failed")
