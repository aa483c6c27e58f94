"""PostgreSQL: a claim whose rows cannot be read after it committed gives them back at once,
instead of leaving them under a lease nobody renews (they would end dead as lost)."""

from __future__ import annotations

from typing import Any

import pytest
from storekit import NOW, StoreFactory, new_timer

from duetime.model import Status
from duetime.store.postgres import working as postgres_working
from duetime.store.postgres.store import PostgresStore


async def test_a_claim_that_cannot_be_read_gives_its_rows_back(
    pg_url: str, open_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(pg_url)
    assert isinstance(store, PostgresStore)
    await store.put_timers([new_timer(f"k{i}", NOW, type="t") for i in range(3)], "error", NOW)
    real = postgres_working.claimed_rows

    def unreadable(known: Any, sealing: Any) -> Any:
        make = real(known, sealing)

        def factory(cursor: Any) -> Any:
            make(cursor)
            raise RuntimeError("this result cannot be read")

        return factory

    monkeypatch.setattr(postgres_working, "claimed_rows", unreadable)
    with pytest.raises(RuntimeError, match="cannot be read"):
        await store.claim_due("ns", None, NOW, 10, "n1", NOW.replace(year=NOW.year + 1))
    for i in range(3):
        timer = await store.get_timer("ns", f"k{i}")
        assert timer is not None
        assert (timer.status, timer.attempts, timer.lease_owner) == (Status.SCHEDULED, 0, None)
        assert timer.fired_at is None

    monkeypatch.setattr(postgres_working, "claimed_rows", real)
    claimed = await store.claim_due("ns", None, NOW, 10, "n1", NOW.replace(year=NOW.year + 1))
    assert sorted(c.timer.key for c in claimed) == ["k0", "k1", "k2"]
    assert all(c.attempt == 1 for c in claimed)
