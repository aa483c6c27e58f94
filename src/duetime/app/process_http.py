"""A worker process's own HTTP endpoint: ``/metrics`` for Prometheus, ``/healthz`` and
``/readyz`` for an orchestrator (``duetime worker --metrics-port``, ``DUETIME_METRICS_PORT``).

Plain asyncio, no web framework: a worker should not pull in a server stack to be observed.
``/healthz`` answers while the event loop turns and the worker runs (liveness: restart me if
not); ``/readyz`` while the database answers too (readiness). The gauges read from the
database (timers by status, the oldest overdue one) are read at most every ``refresh`` seconds,
however often scrapes come.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from duetime.observability.metrics import CONTENT_TYPE, Metrics, read_snapshot
from duetime.services.base import Service

if TYPE_CHECKING:
    from duetime.app.facade import AsyncApp

log = logging.getLogger("duetime.observability.metrics")

READY_TIMEOUT = 2.0
"""Seconds the database has to answer ``/readyz``."""
REQUEST_TIMEOUT = 5.0
"""Seconds a client has to send its request line and headers."""


class MetricsServer(Service):
    """Serves one process's metrics and health on ``host:port`` while the node runs."""

    name = "metrics"

    def __init__(
        self,
        app: AsyncApp,
        metrics: Metrics,
        host: str,
        port: int,
        *,
        alive: Callable[[], bool] = lambda: True,
        refresh: float = 5.0,
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.host = host
        self.port = port
        self.alive = alive
        self.refresh = refresh
        self._server: asyncio.Server | None = None
        self._read_at = -refresh

    @property
    def bound_port(self) -> int:
        """The port listened on (the one the system chose, for port 0)."""
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        log.info("metrics and health on http://%s:%d/metrics", self.host, self.bound_port)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                request = await reader.readline()
                while (await reader.readline()).strip():
                    pass  # headers: nothing here needs them
            method, _, rest = request.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            status, content_type, body = await self._answer(method, path)
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeError):
            pass
        except Exception:
            log.exception("answering a metrics request failed")
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, method: str, path: str) -> tuple[str, str, bytes]:
        if method not in ("GET", "HEAD"):
            return _json("405 Method Not Allowed", {"error": "only GET"})
        if path == "/metrics":
            await self._read_database()
            return "200 OK", CONTENT_TYPE, self.metrics.render()
        if path == "/healthz":
            if not self.alive():
                return _json("503 Service Unavailable", {"status": "worker stopped"})
            return _json("200 OK", {"status": "ok"})
        if path == "/readyz":
            try:
                async with asyncio.timeout(READY_TIMEOUT):
                    await self.app.store.db_now()
            except Exception as exc:
                return _json("503 Service Unavailable", {"status": f"database: {exc}"})
            return _json("200 OK", {"status": "ok"})
        return _json("404 Not Found", {"error": "try /metrics, /healthz or /readyz"})

    async def _read_database(self) -> None:
        """Refresh the database gauges, at most every ``refresh`` seconds; a failure keeps the
        last figures (the scrape still answers)."""
        now = asyncio.get_running_loop().time()
        if now - self._read_at < self.refresh:
            return
        self._read_at = now
        try:
            snapshot = await read_snapshot(self.app.store, self.app.clock, self.app.namespace)
            watched = await self.app.store.deadlines.successes()
        except Exception as exc:
            log.warning("metrics: reading the database failed: %s", exc)
            return
        self.metrics.set_snapshot({self.app.namespace: snapshot})
        self.metrics.schedule_watch.update(watched, self.app.clock.now())


def _json(status: str, document: dict[str, str]) -> tuple[str, str, bytes]:
    return status, "application/json", json.dumps(document).encode()
