"""A timer a broker source stores is sealed like any other: a Redis Streams entry's payload is
not in the SQLite file's rows, and the stored timer reads back whole."""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

from test_sources import (
    _count,
    eventually,
    no_pending,
    redis_env,
    redis_source,
    redis_url,
    request,
    run,
    running,
)

from duetime import AsyncApp

__all__ = ["redis_url"]  # the fixture, found here by pytest

K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"


def test_a_redis_entry_is_stored_sealed(tmp_path: Path, redis_url: str) -> None:
    db = tmp_path / "sealed.db"

    async def main() -> None:
        app = AsyncApp(f"sqlite:///{db}", seal_keys=K1)
        async with redis_env(redis_url) as (url, client, stream), app:
            source = redis_source(app, url, stream)
            async with running(source, app=app):
                body = request("from-redis", payload={"email": "stream@example.com"})
                await client.xadd(stream, {"body": body})
                await eventually(lambda: _count(app, 1))
                await eventually(lambda: no_pending(client, stream))
            timer = await app.get("from-redis")
            assert timer.payload == {"email": "stream@example.com"}

    run(main)
    with sqlite3.connect(db) as conn:
        (payload,) = conn.execute("SELECT payload FROM timers").fetchone()
    assert payload.startswith('{"$sealed":"dts1:k1:')
    assert "stream@example.com" not in payload
