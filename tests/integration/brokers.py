"""Real brokers for the destination tests: found via env, skipped when absent, failed under CI.

``DUETIME_TEST_NATS`` (default ``nats://127.0.0.1:4222``, needs JetStream),
``DUETIME_TEST_REDIS`` (default ``redis://127.0.0.1:6379/0``) and ``DUETIME_TEST_RABBITMQ``
(default ``amqp://guest:guest@127.0.0.1:5672/``). When a broker cannot be reached the test is
skipped with the reason — unless ``CI`` is set, where a missing broker is a failure, so a broken
CI service never passes silently. Each broker is probed once per session.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from collections.abc import Coroutine
from typing import Any, NoReturn
from urllib.parse import urlsplit

import pytest

NATS_URL = os.environ.get("DUETIME_TEST_NATS", "nats://127.0.0.1:4222")
REDIS_URL = os.environ.get("DUETIME_TEST_REDIS", "redis://127.0.0.1:6379/0")
RABBITMQ_URL = os.environ.get("DUETIME_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672/")
PROBE_TIMEOUT = 3.0


def _unavailable(what: str, url: str, reason: str) -> NoReturn:
    message = f"{what} is not reachable at {url} ({reason}); set DUETIME_TEST_* to point at one"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require_nats() -> str:
    """The NATS URL, once a JetStream-enabled server answered; else skip (fail under CI)."""
    error = _probe_nats()
    if error:
        _unavailable("NATS JetStream", NATS_URL, error)
    return NATS_URL


def require_redis() -> str:
    error = _probe_redis()
    if error:
        _unavailable("Redis", REDIS_URL, error)
    return REDIS_URL


def require_rabbitmq() -> str:
    error = _probe_rabbitmq()
    if error:
        _unavailable("RabbitMQ", RABBITMQ_URL, error)
    return RABBITMQ_URL


@functools.cache
def _probe_nats() -> str | None:
    try:
        import nats
    except ImportError as exc:
        return f"nats-py is not installed: {exc}"

    async def probe() -> None:
        nc = await nats.connect(
            NATS_URL,
            connect_timeout=int(PROBE_TIMEOUT),
            max_reconnect_attempts=1,  # nats-py tries a server until it exceeds this: fail fast
            reconnect_time_wait=0,
        )
        try:
            await nc.jetstream().account_info()
        finally:
            await nc.close()

    return _run_probe(probe())


@functools.cache
def _probe_redis() -> str | None:
    try:
        from redis.asyncio import Redis
    except ImportError as exc:
        return f"redis is not installed: {exc}"

    async def probe() -> None:
        client = Redis.from_url(REDIS_URL, socket_connect_timeout=PROBE_TIMEOUT)
        try:
            await client.ping()
        finally:
            await client.aclose()

    return _run_probe(probe())


@functools.cache
def _probe_rabbitmq() -> str | None:
    try:
        import aio_pika
    except ImportError as exc:
        return f"aio-pika is not installed: {exc}"

    async def probe() -> None:
        connection = await aio_pika.connect(RABBITMQ_URL, timeout=PROBE_TIMEOUT)
        await connection.close()

    return _run_probe(probe())


def _run_probe(probe: Coroutine[Any, Any, None]) -> str | None:
    async def bounded() -> None:
        await asyncio.wait_for(probe, PROBE_TIMEOUT * 2)

    try:
        asyncio.run(bounded())
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def closed_port() -> int:
    """A local TCP port nothing listens on (bound then released), to play an unreachable host."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def with_port(url: str, port: int) -> str:
    """``url`` with its port replaced, credentials and path kept."""
    parts = urlsplit(url)
    userinfo, _, _ = parts.netloc.rpartition("@")
    host = parts.hostname or "127.0.0.1"
    netloc = f"{userinfo}@{host}:{port}" if userinfo else f"{host}:{port}"
    return parts._replace(netloc=netloc).geturl()
