"""The testing kit users test their own handlers with: frozen clock, run_due, assertions.

These run on real SQLite files in tmp_path, the way users' tests will.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import pytest

from duetime import App, AsyncApp, Cancel, Dead, Event, FrozenClock, Outcome, Snooze, Status
from duetime.testing import (
    ANY_STATUS,
    AsyncHarness,
    Harness,
    harness,
    make_app,
    make_sync_app,
)

T = TypeVar("T")
START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def with_harness(
    tmp_path: Path,
    body: Callable[[AsyncApp, AsyncHarness], Awaitable[None]],
    register: Callable[[AsyncApp], None] | None = None,
) -> None:
    async def main() -> None:
        app = make_app(tmp_path, start=START)
        if register is not None:
            register(app)
        async with AsyncHarness(app) as h:
            await body(app, h)

    run(main())


def greeter(seen: list[str]) -> Callable[[AsyncApp], None]:
    def register(app: AsyncApp) -> None:
        @app.handler("greet")
        async def greet(event: Event) -> None:
            seen.append(event.key)

    return register


# -- building -------------------------------------------------------------------------------
def test_make_app_uses_a_file_in_the_directory_and_a_frozen_clock(tmp_path: Path) -> None:
    app = make_app(tmp_path, namespace="tenant-a", start="2025-03-15T13:00:00Z")
    assert app.settings.database_url == f"sqlite:///{tmp_path.resolve() / 'duetime.db'}"
    assert app.namespace == "tenant-a"
    assert isinstance(app.clock, FrozenClock)
    assert app.clock.now() == datetime(2025, 3, 15, 13, 0, tzinfo=UTC)


def test_make_app_ignores_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUETIME_DATABASE_URL", "sqlite:////should/not/be/used.db")
    monkeypatch.setenv("DUETIME_NAMESPACE", "production")
    app = make_app(tmp_path, lease=60, heartbeat=5)
    assert str(tmp_path.resolve()) in app.settings.database_url
    assert app.namespace == "default"
    assert app.settings.lease == timedelta(seconds=60)


def test_make_app_refuses_a_naive_start(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no UTC offset"):
        make_app(tmp_path, start=datetime(2025, 3, 15, 9, 0))


def test_harness_picks_the_harness_for_the_app(tmp_path: Path) -> None:
    assert isinstance(harness(make_app(tmp_path / "a")), AsyncHarness)
    assert isinstance(harness(make_sync_app(tmp_path / "b")), Harness)


def test_harness_swaps_in_a_frozen_clock_and_puts_the_old_one_back(tmp_path: Path) -> None:
    app = AsyncApp(f"sqlite:///{tmp_path / 'own.db'}")
    original = app.clock

    async def main() -> None:
        async with AsyncHarness(app, start=START) as h:
            assert app.clock is h.clock
            assert h.now == START

    run(main())
    assert app.clock is original


def test_harness_keeps_a_frozen_clock_the_app_already_has(tmp_path: Path) -> None:
    app = make_app(tmp_path, start=START)
    clock = app.clock
    h = AsyncHarness(app)
    assert h.clock is clock
    assert h.now == START


# -- moving time ----------------------------------------------------------------------------
def test_advance_takes_timedeltas_seconds_and_iso_durations(tmp_path: Path) -> None:
    h = AsyncHarness(make_app(tmp_path, start=START))
    assert h.advance(timedelta(minutes=5)) == START + timedelta(minutes=5)
    assert h.advance(30) == START + timedelta(minutes=5, seconds=30)
    assert h.advance("P1D") == START + timedelta(days=1, minutes=5, seconds=30)
    with pytest.raises(ValueError, match="forward only"):
        h.advance(-1)


def test_travel_to_an_instant_or_a_wall_clock_time_in_a_zone(tmp_path: Path) -> None:
    h = AsyncHarness(make_app(tmp_path, start=START))
    assert h.travel_to("2025-03-15T13:00:00Z") == datetime(2025, 3, 15, 13, tzinfo=UTC)
    # 09:00 in New York after DST began is 13:00Z; a time in the gap reads as after it.
    at_nine = h.travel_to("2025-03-15T09:00", timezone="America/New_York")
    assert at_nine == datetime(2025, 3, 15, 13, tzinfo=UTC)
    in_gap = h.travel_to("2025-03-09T02:30", timezone="America/New_York")
    assert in_gap == datetime(2025, 3, 9, 7, 30, tzinfo=UTC)
    with pytest.raises(ValueError, match="no UTC offset"):
        h.travel_to(datetime(2025, 3, 15, 9, 0))


# -- firing ---------------------------------------------------------------------------------
def test_run_due_fires_only_what_is_due_at_the_pinned_instant(tmp_path: Path) -> None:
    seen: list[str] = []

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("greet", delay="PT1H", key="soon")
        await app.schedule("greet", delay="PT2H", key="later")
        assert await h.run_due() == []
        h.advance(timedelta(hours=1))
        fired = await h.run_due()
        assert [(f.key, f.outcome, f.attempt, f.ok) for f in fired] == [
            ("soon", Outcome.DONE, 1, True)
        ]
        assert fired[0].timer.status is Status.DONE
        assert seen == ["soon"]
        await h.assert_scheduled("greet", key="later")

    with_harness(tmp_path, body, greeter(seen))


def test_run_due_reports_failures_and_can_fail_the_test(tmp_path: Path) -> None:
    def register(app: AsyncApp) -> None:
        @app.handler("flaky")
        def flaky(event: Event) -> None:
            raise RuntimeError(f"provider down for {event.key}")

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("flaky", delay=0, key="f1")
        (fired,) = await h.run_due()
        assert fired.outcome is Outcome.RETRY
        assert fired.error == "RuntimeError: provider down for f1"
        assert fired.timer.status is Status.RETRYING
        retry = await h.assert_scheduled(key="f1", status="retrying")
        h.travel_to(retry.run_at)
        with pytest.raises(AssertionError, match="provider down for f1"):
            await h.run_due(fail_on_error=True)

    with_harness(tmp_path, body, register)


def test_run_due_records_explicit_outcomes(tmp_path: Path) -> None:
    def register(app: AsyncApp) -> None:
        @app.handler("decide")
        async def decide(event: Event) -> Any:
            choice = event.payload["then"]
            if choice == "snooze":
                return Snooze(timedelta(minutes=10))
            if choice == "cancel":
                raise Cancel("user unsubscribed")
            raise Dead("malformed payload")

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        for choice in ("snooze", "cancel", "dead"):
            await app.schedule("decide", {"then": choice}, delay=0, key=choice)
        fired = {f.key: f for f in await h.run_due()}
        assert fired["snooze"].outcome is Outcome.SNOOZED
        assert fired["cancel"].timer.status is Status.CANCELLED
        assert fired["dead"].timer.status is Status.DEAD
        assert fired["dead"].error == "malformed payload"
        snoozed = await h.assert_scheduled(key="snooze")
        assert snoozed.run_at == h.now + timedelta(minutes=10)

    with_harness(tmp_path, body, register)


def test_run_due_fires_work_that_handlers_make_due_now(tmp_path: Path) -> None:
    seen: list[str] = []

    def register(app: AsyncApp) -> None:
        @app.handler("order.paid")
        async def paid(event: Event) -> None:
            await app.emit("receipt.send", {"order": event.payload["order"]}, key="receipt-1")

        greeter(seen)(app)

        @app.handler("receipt.send")
        async def receipt(event: Event) -> None:
            seen.append(event.key)

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("order.paid", {"order": 7}, delay=0, key="paid-1")
        fired = await h.run_due()
        assert [f.key for f in fired] == ["paid-1", "receipt-1"]
        assert seen == ["receipt-1"]

    with_harness(tmp_path, body, register)


def test_run_due_stops_a_handler_that_keeps_itself_due(tmp_path: Path) -> None:
    def register(app: AsyncApp) -> None:
        @app.handler("spin")
        async def spin(event: Event) -> Snooze:
            return Snooze(0)

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("spin", delay=0, key="spinner")
        with pytest.raises(AssertionError, match="still due after 3 rounds"):
            await h.run_due(max_rounds=3)
        with pytest.raises(ValueError, match="max_rounds"):
            await h.run_due(max_rounds=0)

    with_harness(tmp_path, body, register)


def test_run_due_expires_a_timer_found_too_late(tmp_path: Path) -> None:
    seen: list[str] = []

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("greet", delay=60, key="stale", expires_after="PT5M")
        h.advance(timedelta(minutes=10))
        (fired,) = await h.run_due()
        assert fired.outcome is Outcome.EXPIRED
        assert fired.timer.status is Status.EXPIRED
        assert "late" in (fired.error or "")
        assert seen == []

    with_harness(tmp_path, body, greeter(seen))


def test_a_dead_timer_replayed_fires_again(tmp_path: Path) -> None:
    calls: list[int] = []

    def register(app: AsyncApp) -> None:
        @app.handler("flaky")
        async def flaky(event: Event) -> None:
            calls.append(event.attempt)
            if len(calls) <= 2:
                raise RuntimeError("still down")

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("flaky", delay=0, key="k", max_attempts=2)
        await h.run_due()
        h.travel_to((await app.get("k")).run_at)
        (last,) = await h.run_due()
        assert last.outcome is Outcome.DEAD
        assert last.error == "gave up after 2 attempts: RuntimeError: still down"
        await h.assert_scheduled(key="k", status="dead")
        await app.timers.replay("k")
        (replayed,) = await h.run_due(fail_on_error=True)
        assert replayed.ok
        assert replayed.timer.status is Status.DONE
        assert len(calls) == 3

    with_harness(tmp_path, body, register)


# -- asserting ------------------------------------------------------------------------------
def test_assert_scheduled_matches_fields_and_a_payload_subset(tmp_path: Path) -> None:
    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        payload = {"user": {"id": "u1", "name": "Ada"}, "channel": "email"}
        await app.schedule(
            "birthday.greeting",
            payload,
            local="2025-03-15T09:00",
            timezone="America/New_York",
            key="birthday:u1:2025",
            subject="u1",
        )
        timer = await h.assert_scheduled(
            "birthday.greeting",
            key="birthday:u1:2025",
            subject="u1",
            payload={"user": {"id": "u1"}},
            due_at="2025-03-15T13:00:00Z",
        )
        assert timer.payload == payload
        new_york = ZoneInfo("America/New_York")
        await h.assert_scheduled(due_at=datetime(2025, 3, 15, 9, 0, tzinfo=new_york))
        await h.assert_not_scheduled(payload={"user": {"id": "u2"}})
        await h.assert_not_scheduled(payload={"channel": "sms"})
        await h.assert_not_scheduled(key="birthday:u1:2025", status="done")

    with_harness(tmp_path, body)


def test_assert_scheduled_failure_lists_what_was_scheduled(tmp_path: Path) -> None:
    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("greet", {"n": 1}, at="2025-03-02T09:00:00Z", key="a", subject="u1")
        await app.schedule("greet", {"n": 2}, at="2025-03-03T09:00:00Z", key="b", subject="u2")
        with pytest.raises(AssertionError) as failure:
            await h.assert_scheduled("greet", subject="u1", payload={"n": 2})
        message = str(failure.value)
        assert "no timer matched type='greet', subject='u1', payload={'n': 2}" in message
        assert "timers in namespace 'default' (2):" in message
        assert "key='a' status=scheduled due_at=2025-03-02T09:00:00Z" in message
        assert "<- differs in payload" in message
        assert "<- differs in subject" in message

    with_harness(tmp_path, body)


def test_assert_not_scheduled_failure_lists_the_matches(tmp_path: Path) -> None:
    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("greet", delay=60, key="a", subject="u1")
        await h.assert_not_scheduled("greet", subject="u2")
        with pytest.raises(AssertionError, match=r"expected no timer matching .*found 1:\n.*'a'"):
            await h.assert_not_scheduled("greet", subject="u1")

    with_harness(tmp_path, body)


def test_scheduled_lists_earliest_first_and_filters_by_status(tmp_path: Path) -> None:
    seen: list[str] = []

    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        await app.schedule("greet", delay=300, key="third")
        await app.schedule("greet", delay=100, key="first")
        await app.schedule("greet", delay=200, key="second")
        await app.schedule("other", delay=0, key="no-handler")
        assert [t.key for t in await h.scheduled("greet")] == ["first", "second", "third"]
        h.advance(150)
        await h.run_due()
        assert [t.key for t in await h.scheduled("greet")] == ["second", "third"]
        assert [t.key for t in await h.scheduled(status="done")] == ["first"]
        everything = await h.scheduled(status=ANY_STATUS)
        assert {t.key for t in everything} == {"first", "second", "third", "no-handler"}
        # A type without a handler is not claimed: it stays scheduled, visibly.
        await h.assert_scheduled("other", key="no-handler", status=Status.SCHEDULED)

    with_harness(tmp_path, body, greeter(seen))


def test_an_unknown_status_is_a_clear_error(tmp_path: Path) -> None:
    async def body(app: AsyncApp, h: AsyncHarness) -> None:
        with pytest.raises(ValueError, match="status must be one of pending, scheduled"):
            await h.scheduled(status="finished")

    with_harness(tmp_path, body)


# -- the blocking twin ----------------------------------------------------------------------
def test_sync_harness_drives_a_blocking_app(tmp_path: Path) -> None:
    app: App = make_sync_app(tmp_path, start="2025-11-01T12:00:00Z")
    sent: list[str] = []

    @app.handler("follow-up.due")
    def follow_up(event: Event) -> None:
        sent.append(event.payload["user"])

    with Harness(app) as h:
        app.schedule(
            "follow-up.due", {"user": "u1"}, date="2025-11-16", timezone="Asia/Tokyo", key="f1"
        )
        h.assert_scheduled("follow-up.due", key="f1", due_at="2025-11-15T15:00:00Z")
        h.travel_to("2025-11-16T00:00", timezone="Asia/Tokyo")
        (fired,) = h.run_due(fail_on_error=True)
        assert fired.ok
        assert sent == ["u1"]
        h.assert_not_scheduled(key="f1")
        assert [t.key for t in h.scheduled(status="done")] == ["f1"]
        with pytest.raises(AssertionError, match="no timer matched key='missing'"):
            h.assert_scheduled(key="missing")
