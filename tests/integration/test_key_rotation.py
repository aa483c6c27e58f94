"""``rotate_keys`` (``duetime keys rotate``) re-seals every stored timer and error with the
first key: stopped after a batch it resumes from the id it reached, and it runs while a worker
holds a claim and completes it, losing nothing the worker writes. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from tests.waiting import run

from duetime import AsyncApp, Event, FrozenClock, Status
from duetime.store.postgres.settings import parse_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url
from test_sealing_at_rest import raw_rows

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"
K2 = f"k2:{base64.b64encode(b'2' * 32).decode()}"
KEYS = [f"job-{i}" for i in range(6)]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'rotation.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def archived(url: str) -> int:
    """Rows of PostgreSQL's archive, read with SQL."""
    if url.startswith("sqlite"):
        return 0
    settings = parse_url(url)
    with psycopg.connect(settings.conninfo) as pg:
        row = pg.execute(f"SELECT count(*) FROM {settings.schema}.timer_history").fetchone()
    return int(row[0]) if row else 0


class Stop(Exception):
    """The rotation stopped after a batch, as an interrupted command would."""


def test_rotation_resumes_and_runs_beside_a_worker(url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START - timedelta(hours=3))
        old = AsyncApp(url, clock=clock, seal_keys=K1)

        @old.handler("fail")
        async def fail(event: Event) -> None:
            raise ValueError(f"no mailbox {event.payload['email']}")

        @old.handler("done")
        async def done(event: Event) -> None:
            pass

        async with old:
            await old.schedule("done", {"email": "archived@example.com"}, at=clock.now(), key="d")
            await old.schedules.add("daily", "report", {"email": "cron@example.com"}, every="P1D")
            await old.tick()
            clock.advance(2 * 3600)
            await old.maintain()  # PostgreSQL: "d" moves to the archive, still sealed with k1
            assert archived(url) == (0 if url.startswith("sqlite") else 1)
            clock.set(START)
            for key in KEYS:
                await old.schedule("job", {"email": f"{key}@example.com"}, at=START, key=key)
            await old.schedule("fail", {"email": "fail@example.com"}, at=START, key="fail")
            await old.tick()  # "fail" runs once, its error sealed with k1
        assert "dts1:k1:" in raw_rows(url)

        app = AsyncApp(url, clock=FrozenClock(START), seal_keys=f"{K2},{K1}")
        entered, release = asyncio.Event(), asyncio.Event()
        ran: dict[str, object] = {}

        @app.handler("job")
        async def job(event: Event) -> None:
            ran[event.key] = event.payload
            if event.key == KEYS[0]:
                entered.set()
                await release.wait()

        async with app:
            tick = asyncio.create_task(app.tick())
            await entered.wait()  # the worker holds its claim, one handler still running
            reached: list[int] = []

            def stop_after_one(changed: int, last: int) -> None:
                reached.append(last)
                raise Stop

            with pytest.raises(Stop):
                await app.keys.rotate(batch=3, progress=stop_after_one)
            resumed = await app.keys.rotate(after=reached[0], batch=3)
            assert resumed >= 1
            release.set()
            await tick
            assert await app.keys.rotate() == 0  # nothing left sealed with k1

        raw = raw_rows(url)
        assert "dts1:k1:" not in raw
        assert "example.com" not in raw
        assert ran == {key: {"email": f"{key}@example.com"} for key in KEYS}

        async with AsyncApp(url, clock=FrozenClock(START), seal_keys=K2) as new:
            for key in KEYS:
                assert (await new.get(key)).status is Status.DONE
            failed = await new.get("fail")
            assert failed.payload == {"email": "fail@example.com"}
            assert (await new.get("d")).payload == {"email": "archived@example.com"}
            assert (await new.schedules.get("daily")).payload == {"email": "cron@example.com"}
            (attempt,) = await new.timers.attempts("fail")
            assert "no mailbox fail@example.com" in (attempt.error or "")
            assert "fail@example.com" in (attempt.traceback or "")

    run(main)
