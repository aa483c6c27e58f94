"""One bad timer never harms another: a failure injected into one row at each step of the
worker's pipeline — reading the claimed row, starting the attempt, the handler, writing its
outcome, fanning it out — ends that timer alone, with its reason, and every other timer of the
same claim is done. On SQLite and PostgreSQL, through one ``tick`` (one claim)."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from test_destinations_webhook import Receiver
from tests.waiting import run

from duetime import AsyncApp, Cancel, Event, FrozenClock, Outcome, Status, Timer
from duetime.destinations import WebhookDestination
from duetime.model import FanOut
from duetime.store import Store, create_store
from duetime.store.postgres.settings import parse_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
GOOD = [f"good-{i}" for i in range(12)]
FANNED = [f"fan-{i}" for i in range(3)]


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'poison.db'}"
        return
    with pooled_pg_url() as found:
        yield found


class RefusingFanOut:
    """The real store, which refuses (as a database refuses a value) any fan-out of one event."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.refuse: int | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        if any(f.timer_id == self.refuse for f in fan_outs):
            raise ValueError("this delivery row cannot be stored")
        return await self._inner.fan_out(fan_outs, node_id, now)


class StartObserver:
    """A metrics hook with a bug that shows for one timer only, as its attempt starts."""

    def claimed(self, namespace: str, count: int, seconds: float) -> None:
        pass

    def started(self, timer: Timer, attempt: int, lateness: timedelta) -> None:
        if timer.key == "poison-start":
            raise RuntimeError("the lateness histogram has no bucket for this")

    def finished(self, timer: Timer, outcome: Outcome) -> None:
        pass

    def held_back(self, namespace: str, pattern: str) -> None:
        pass


UNREADABLE_JSONB = {
    "poison-decode": "1e5000",  # PostgreSQL writes it back as an integer of 5,001 digits
    "poison-deep": "[" * 12_000 + "]" * 12_000,  # deeper than Python's decoder recurses (3.13 too)
    "poison-digits": "9" * 5000,  # as a client with PYTHONINTMAXSTRDIGITS=0 could store
}
"""Payloads PostgreSQL's jsonb holds and Python cannot read back, each written by SQL."""


def stored_row(url: str, key: str) -> tuple[str, str]:
    """(status, last_error) read with SQL: the row is past what a Timer can be read from."""
    if url.startswith("postgresql"):
        settings = parse_url(url)
        with psycopg.connect(settings.conninfo) as pg:
            cur = pg.execute(
                f"SELECT status, last_error FROM {settings.schema}.timers WHERE key = %s", (key,)
            )
            found = cur.fetchone()
            assert found is not None
            return found[0], found[1] or ""
    with sqlite3.connect(url[len("sqlite:///") :]) as conn:
        row = conn.execute("SELECT status, last_error FROM timers WHERE key = ?", (key,)).fetchone()
    return row[0], row[1] or ""


def break_payloads(url: str) -> list[str]:
    """Make stored payloads unreadable with SQL; the keys of the rows broken."""
    if url.startswith("sqlite"):  # a row no reader can decode: its payload is no longer JSON
        with sqlite3.connect(url[len("sqlite:///") :]) as conn:
            conn.execute("UPDATE timers SET payload = '{broken' WHERE key = ?", ("poison-decode",))
        return ["poison-decode"]
    settings = parse_url(url)
    with psycopg.connect(settings.conninfo) as pg:
        for key, text in UNREADABLE_JSONB.items():
            pg.execute(
                f"UPDATE {settings.schema}.timers SET payload = %s::jsonb WHERE key = %s",
                (text, key),
            )
    return list(UNREADABLE_JSONB)


def test_a_failure_at_each_step_ends_only_its_own_timer(url: str) -> None:
    sqlite = url.startswith("sqlite")
    store = RefusingFanOut(create_store(url))

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), store=store)  # type: ignore[arg-type]
        app.observers.append(StartObserver())
        ran: list[str] = []

        @app.handler("job")
        async def job(event: Event) -> Any:
            if event.key == "poison-handler":
                raise ConnectionError("the handler's service is down")
            if event.key == "poison-record":
                return Cancel("a reason no text column takes: \x00")
            ran.append(event.key)
            return None

        @app.handler("fan")
        async def fanned(event: Event) -> None:
            ran.append(f"{event.key}@handler")

        async with Receiver() as hook:
            app.route("fan", to=WebhookDestination("hook", hook.url))
            async with app:
                keys = [*UNREADABLE_JSONB, "poison-start", "poison-handler", "poison-record"]
                for key in [*GOOD[:6], *keys, *GOOD[6:]]:
                    await app.schedule("job", {"k": key}, at=START, key=key, max_attempts=1)
                for key in [*FANNED, "poison-fan"]:
                    await app.schedule("fan", {"k": key}, at=START, key=key)
                store.refuse = (await app.get("poison-fan")).id
                broken = break_payloads(url)
                good = [*GOOD, *(k for k in UNREADABLE_JSONB if k not in broken)]

                await app.tick()

                for key in good:
                    assert (await app.get(key)).status is Status.DONE, key
                for key in FANNED:
                    assert (await app.get(key)).status is Status.DONE, key
                assert sorted(k for k in ran if k.endswith("@handler")) == sorted(
                    f"{key}@handler" for key in FANNED
                )
                assert len(hook.requests) == len(FANNED)

                for key in broken:  # each ends alone, dead with its reason
                    status, error = stored_row(url, key)
                    assert status == "dead", key
                    assert "could not be read" in error, key
                for key in UNREADABLE_JSONB:
                    keys.remove(key)
                failures = {key: await app.get(key) for key in keys}
                assert failures["poison-start"].status is Status.DEAD
                assert "could not be started" in (failures["poison-start"].last_error or "")
                assert failures["poison-handler"].status is Status.DEAD
                assert "the handler's service is down" in (
                    failures["poison-handler"].last_error or ""
                )
                record = failures["poison-record"]
                if sqlite:  # SQLite keeps the NUL: the outcome is written as it was
                    assert record.status is Status.CANCELLED
                else:
                    assert record.status is Status.DEAD
                    assert "could not be recorded" in (record.last_error or "")
                poisoned_fan = await app.get("poison-fan")
                assert poisoned_fan.status is Status.RETRYING
                assert "cannot be stored" in (poisoned_fan.last_error or "")
            await store.close()

    run(main)
