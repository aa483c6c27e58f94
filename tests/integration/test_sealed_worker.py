"""Sealing at rest through the app, on SQLite and PostgreSQL: a worker whose key ring lacks a
timer's key ends that timer dead naming the key and goes on; payload search and partitions are
refused on a sealed namespace; what cannot be read is never written back; the outbox, schedules
and webhook deliveries are sealed like any timer."""

from __future__ import annotations

import base64
import sqlite3
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.waiting import run

from duetime import App, AsyncApp, Event, FrozenClock, Status
from duetime.destinations import WebhookDestination
from duetime.errors import InvalidInput
from duetime.store.postgres.settings import parse_url
from duetime.support.sealing import SealedNamespace, SealKeyMissing
from duetime.timer_filters import timer_filter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url
from test_destinations_webhook import Receiver, Reply
from test_sealing_at_rest import raw_rows

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"
K2 = f"k2:{base64.b64encode(b'2' * 32).decode()}"


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sealed.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def test_a_missing_key_ends_its_timer_dead_naming_the_key_and_the_worker_goes_on(
    url: str,
) -> None:
    async def main() -> None:
        async with AsyncApp(url, clock=FrozenClock(START), seal_keys=K1) as old:
            await old.schedule("job", {"email": "a@example.com"}, at=START, key="old")
        app = AsyncApp(url, clock=FrozenClock(START), seal_keys=K2)
        ran: list[object] = []

        @app.handler("job")
        async def job(event: Event) -> None:
            ran.append(event.payload)

        async with app:
            await app.schedule("job", {"email": "b@example.com"}, at=START, key="new")
            await app.tick()
            assert ran == [{"email": "b@example.com"}]
            assert (await app.get("new")).status is Status.DONE
            old_timer = await app.get("old")
            assert old_timer.status is Status.DEAD
            assert "'k1'" in (old_timer.last_error or "")
            assert old_timer.payload == {"$sealed": "k1"}
            await app.schedule("job", {"email": "c@example.com"}, at=START, key="later")
            await app.tick()  # the worker is alive and still runs what it can open
            assert ran[-1] == {"email": "c@example.com"}

    run(main)


def test_payload_search_and_partitions_are_refused_on_a_sealed_namespace(url: str) -> None:
    async def main() -> None:
        sealed = AsyncApp(url, "crm", clock=FrozenClock(START), seal_keys=K1, seal_namespaces="crm")
        plain = AsyncApp(namespace="other", clock=FrozenClock(START), store=sealed.store)
        async with sealed, plain:
            with pytest.raises(SealedNamespace, match="'crm'") as caught:
                await sealed.timers.history(payload="email=a@example.com")
            assert caught.value.field == "payload"
            with pytest.raises(SealedNamespace) as caught:
                await sealed.limits.set("job", concurrency=1, partition_by="payload.user")
            assert caught.value.field == "partition_by"
            found = timer_filter(payload="email=a@example.com", now=START)
            with pytest.raises(SealedNamespace):
                await sealed.timers.bulk("cancel", found)
            await sealed.limits.set("job", concurrency=1, partition_by="subject")
            assert (await sealed.timers.history(type="job")).items == []
            # the same store, a namespace it does not seal: searched as before
            assert (await plain.timers.history(payload="email=a@example.com")).items == []
            await plain.limits.set("job", concurrency=1, partition_by="payload.user")

    run(main)


def test_an_edit_never_writes_the_sealed_stand_in_back(url: str) -> None:
    async def main() -> None:
        async with AsyncApp(url, clock=FrozenClock(START), seal_keys=K1) as old:
            await old.schedule("job", {"email": "a@example.com"}, at=START, key="a")
        async with AsyncApp(url, clock=FrozenClock(START), seal_keys=K2) as app:
            shown = (await app.get("a")).payload
            assert shown == {"$sealed": "k1"}
            with pytest.raises(SealKeyMissing, match="'k1'"):
                await app.timers.edit("a", {"delay": "PT1H"})
            with pytest.raises(SealKeyMissing, match="'k1'"):  # the form sent back as shown
                await app.timers.edit("a", {"delay": "PT1H", "payload": shown})
            await app.timers.edit("a", {"payload": {"email": "new@example.com"}})
        async with AsyncApp(url, clock=FrozenClock(START), seal_keys=f"{K2},{K1}") as both:
            assert (await both.get("a")).payload == {"email": "new@example.com"}

    run(main)


def test_the_outbox_and_a_kept_key_seal_and_open_as_any_write(url: str) -> None:
    """A timer stored inside the caller's own transaction is sealed like any other; a write
    that keeps a stored timer answers it opened."""
    with App(url, clock=FrozenClock(START), seal_keys=K1) as app:
        if url.startswith("sqlite"):
            conn: Any = sqlite3.connect(url[len("sqlite:///") :])
            conn.execute("BEGIN IMMEDIATE")
        else:
            conn = psycopg.connect(parse_url(url).conninfo)
        try:
            app.schedule(
                "job", {"email": "outbox@example.com"}, at=START, key="o", transaction=conn
            )
            conn.commit()
        finally:
            conn.close()
        kept = app.schedule(
            "job", {"email": "other@example.com"}, at=START, key="o", on_conflict="keep"
        )
        assert kept.action == "kept"
        assert kept.timer.payload == {"email": "outbox@example.com"}
    raw = raw_rows(url)
    assert "dts1:k1:" in raw
    assert "outbox@example.com" not in raw


def test_a_schedules_payload_is_sealed_and_its_timers_run_with_it(url: str) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        app = AsyncApp(url, clock=clock, seal_keys=K1)
        ran: list[object] = []

        @app.handler("ping")
        async def ping(event: Event) -> None:
            ran.append(event.payload)

        async with app:
            await app.schedules.add("hourly", "ping", {"email": "cron@example.com"}, every="PT1H")
            for _ in range(2):
                await app.tick()
                clock.advance(3600)
            assert ran
            assert all(p == {"email": "cron@example.com"} for p in ran)
            assert (await app.schedules.get("hourly")).payload == {"email": "cron@example.com"}
            await app.schedules.pause("hourly")  # a stored schedule written back stays sealed
        raw = raw_rows(url)
        assert "dts1:k1:" in raw
        assert "cron@example.com" not in raw
        async with AsyncApp(url, clock=clock) as keyless:
            assert (await keyless.schedules.get("hourly")).payload == {"$sealed": "k1"}
            # a change rewrites the schedule: never with the stand-in over its payload
            with pytest.raises(SealKeyMissing, match="'k1'"):
                await keyless.schedules.resume("hourly")
            with pytest.raises(SealKeyMissing, match="'k1'"):
                await keyless.schedules.update("hourly", every="PT2H")
            with pytest.raises(InvalidInput, match="sealed payload"):  # nor as a payload of its own
                await keyless.schedule("job", {"$sealed": "k1"}, key="forged", delay=60)
        async with AsyncApp(url, clock=clock, seal_keys=K1) as again:
            assert (await again.schedules.get("hourly")).payload == {"email": "cron@example.com"}

    run(main)


def test_a_webhook_delivery_gets_the_payload_and_its_stored_answer_is_sealed(url: str) -> None:
    """An event fanned out to a webhook: the delivery row copies the sealed payload, the body
    sent is the plain payload, and the receiver's refusal quoting it is stored sealed."""

    async def main() -> None:
        app = AsyncApp(url, clock=FrozenClock(START), seal_keys=K1)
        answer = Reply(status=500, body=b"mailbox alice@example.com is full")
        async with Receiver(answer) as hook, app:
            app.route("signup", to=WebhookDestination("hook", hook.url))
            await app.schedule("signup", {"email": "alice@example.com"}, at=START, key="s")
            await app.tick()  # the fan-out
            await app.tick()  # the delivery
            (request,) = hook.requests
            assert b"alice@example.com" in request.body
            raw = raw_rows(url)
            assert "alice@example.com" not in raw
            (delivery,) = (await app.timers.history(type="signup", status="retrying")).items
            assert "is full" in (delivery.last_error or "")
            assert delivery.payload == {"email": "alice@example.com"}

    run(main)
