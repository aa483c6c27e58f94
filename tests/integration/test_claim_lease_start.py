"""A claim's lease runs from the claim, not from before what the worker waited for first.

Before each claim a worker may read its namespace's flow control rules through the store's
shared connections, which busy handlers can all hold for a while. A lease taken before that
read would be spent while it waited: the rows would reach the worker with little of it left,
before any heartbeat could list them, and be rescued from a live worker. Here the read takes
twenty seconds of a pinned clock (the test moves it while the read is under way).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import run, until

from duetime import AsyncApp, Event, FrozenClock
from duetime.store import create_store

START = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
DUE = START + timedelta(seconds=10)
READ_TAKES = timedelta(seconds=20)
LEASE = timedelta(seconds=30)


def test_a_claims_lease_runs_from_after_the_rules_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("duetime.worker.flow.RULES_REFRESH", 0.0)  # read before each claim
    url = f"sqlite:///{tmp_path / 'lease.db'}"
    clock = FrozenClock(START)
    store = create_store(url)
    leases: list[datetime | None] = []
    ran = asyncio.Event()

    async def main() -> None:
        app = AsyncApp(url, "ns", clock=clock, store=store, lease=LEASE.total_seconds())

        @app.handler("job")
        async def job(event: Event) -> None:
            row = await app.store.get_timer("ns", event.key)
            leases.append(None if row is None else row.lease_expires_at)
            ran.set()

        async with app:
            await app.schedule("job", None, at=DUE, key="k")
            read = store.limits.list_rules
            armed = asyncio.Event()

            async def slow_read(*args: Any, **kwargs: Any) -> Any:
                if armed.is_set() and clock.now() == DUE:
                    clock.advance(READ_TAKES)  # the read takes this long, as the clock sees it
                return await read(*args, **kwargs)

            store.limits.list_rules = slow_read  # type: ignore[method-assign]
            worker = app.worker()
            running = asyncio.create_task(worker.run())
            try:
                async with asyncio.timeout(60):
                    # Started (what it reads at start is read), then the timer falls due.
                    async def started() -> bool:
                        return running.done() or bool(await store.list_nodes())

                    await until(started, 60, "the worker to register", every=0.01)
                    armed.set()
                    clock.set(DUE)
                    await ran.wait()
            finally:
                worker.stop()
                await running

    run(main)
    claimed_at = DUE + READ_TAKES  # the clock when the claim was made
    assert leases == [claimed_at + LEASE]
