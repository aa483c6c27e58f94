"""Work that follows a commit never turns its answer into "nothing was written".

On SQLite and PostgreSQL, a failure injected once the write has committed: a wake-up listener
that raises (a timer write, an outcome); the audit entry of an operator action, written in a
transaction of its own after the action (the store gone meanwhile); a batch of a bulk action
after earlier batches committed. The first two answer success (the hint, the entry, are not
the write: the entry is logged instead); the bulk action says how many it changed and that the
outcome of the rest is unknown.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import run

from duetime import AsyncApp, FrozenClock, Status
from duetime.errors import CommitOutcomeUnknown, StoreUnavailable
from duetime.model import Finish, Outcome, TimerFilter
from duetime.model.audit import Actor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LATER = START + timedelta(hours=1)


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'after.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def failing_listener(earliest: datetime | None) -> None:
    raise RuntimeError("a listener that fails")


def test_a_failing_wake_up_listener_does_not_fail_the_write_it_hears_of(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        async with AsyncApp(url, clock=clock) as app:
            app.store.add_wakeup_listener(failing_listener)
            with caplog.at_level(logging.ERROR, logger="duetime.store"):
                await app.schedule("job", {}, at=START, key="k", max_attempts=3)
                lease = START + timedelta(seconds=30)
                (claimed,) = await app.store.claim_due(app.namespace, None, START, 1, "n1", lease)
                retry = Finish(
                    claimed.timer.id,
                    1,
                    Outcome.RETRY,
                    "e",
                    run_at=LATER,
                    claim_token=claimed.timer.claim_token,
                )
                assert await app.store.finish([retry], "n1", START) == set()
            timer = await app.get("k")
            assert (timer.status, timer.run_at) == (Status.RETRYING, LATER)
        assert caplog.text.count("a wake-up listener failed after a commit") >= 2

    run(main)


def test_an_action_done_answers_success_when_its_audit_entry_cannot_be_written(
    url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        async with AsyncApp(url, clock=clock) as app:
            app.actor = Actor("ops", "cli")
            await app.schedule("job", {}, at=LATER, key="k")

            async def gone(*args: Any) -> None:
                raise StoreUnavailable("PostgreSQL is unavailable: the server went away")

            monkeypatch.setattr(app.store.audit, "record", gone)
            with caplog.at_level(logging.ERROR, logger="duetime.audit"):
                cancelled = await app.cancel("k")
            assert cancelled.status is Status.CANCELLED
            assert (await app.get("k")).status is Status.CANCELLED
            assert "the audit entry of an action that was done could not be written" in (
                caplog.text
            )
            assert "cancel by cli:ops (cli)" in caplog.text  # the actor as the log names it
            with pytest.raises(StoreUnavailable):  # the entry is the write asked for: raised
                await app.audit.record("note", {"why": "test"})

    run(main)


def test_a_bulk_action_cut_short_after_a_batch_committed_says_how_far_it_got(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        clock = FrozenClock(START)
        async with AsyncApp(url, clock=clock) as app:
            for n in range(5):
                await app.schedule("job", {}, at=LATER, key=f"k{n}")
            batch = app.store.bulk_batch
            calls = 0

            async def second_fails(*args: Any) -> tuple[int, int | None]:
                nonlocal calls
                calls += 1
                if calls == 2:
                    raise StoreUnavailable("PostgreSQL is unavailable: the server went away")
                return await batch(*args)

            monkeypatch.setattr(app.store, "bulk_batch", second_fails)
            with pytest.raises(CommitOutcomeUnknown) as cut:
                await app.timers.bulk("cancel", TimerFilter(), batch=2)
            assert cut.value.outcome_unknown
            assert "after 2 timers were changed" in cut.value.message
            statuses = [(await app.get(f"k{n}")).status for n in range(5)]
            assert statuses.count(Status.CANCELLED) == 2
            calls = 10  # the store is back: the same action again does the rest
            assert await app.timers.bulk("cancel", TimerFilter(), batch=2) == 3
            # Cut short before any batch committed: nothing was changed, and it says so.
            await app.schedule("job", {}, at=LATER, key="again")
            calls = 1
            with pytest.raises(StoreUnavailable) as before:
                await app.timers.bulk("cancel", TimerFilter(), batch=2)
            assert not before.value.outcome_unknown

    run(main)
