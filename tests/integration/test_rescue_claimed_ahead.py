"""A worker starting up ends the leases of a dead process on its machine and rescues its
timers; a timer that process had claimed ahead of its instant (held in memory until then) must
not become due earlier by it: the worker that rescues it starts it at its instant, not at once.
On SQLite and PostgreSQL, with a frozen clock (no sleeping)."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp, Event, FrozenClock, Outcome, Status
from duetime.model import Node

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ahead.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", ""])
    proc.wait()
    return proc.pid


def test_a_dead_nodes_row_claimed_ahead_starts_at_its_instant(url: str, clock: FrozenClock) -> None:
    async def main() -> None:
        app = AsyncApp(url, clock=clock)
        ran: list[tuple[str, int]] = []

        @app.handler("ping")
        async def ping(event: Event) -> None:
            ran.append((event.key, event.attempt))

        async with app:
            now = clock.now()
            due = now + timedelta(seconds=2)
            await app.schedule("ping", at=due, key="ahead")
            store = app.store
            await store.register_node(Node("gone", socket.gethostname(), dead_pid(), now, now))
            # The dead node had claimed it ahead, as a worker does just before an instant.
            (claimed,) = await store.claim_due(
                app.namespace, None, now, 10, "gone", now + timedelta(seconds=30),
                due_by=due,
            )  # fmt: skip
            assert claimed.timer.key == "ahead"

            clock.advance(0.1)  # a worker starts before the instant: it ends the dead one's lease
            await app.tick()
            clock.advance(0.1)  # and rescues the row
            await app.tick()
            assert ran == []
            rescued = await app.get("ahead")
            assert (rescued.status, rescued.run_at) == (Status.RETRYING, due)
            attempts = await app.store.list_attempts(rescued.id)
            assert [(a.number, a.node_id, a.outcome) for a in attempts] == [
                (1, "gone", Outcome.LOST)
            ]

            clock.advance(1.8)  # its instant
            await app.tick()
            assert ran == [("ahead", 2)]
            assert (await app.get("ahead")).status is Status.DONE

    asyncio.run(main())
