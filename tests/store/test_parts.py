"""A store's parts: what each backend keeps is read off its attributes, and a missing part is
an error that names it (never a method that only raises, nor a guess from the class or URL)."""

from __future__ import annotations

from typing import Any

import pytest
from storekit import NOW, new_timer

from duetime import AsyncApp, FrozenClock, InvalidInput
from duetime.model.history import EventFilter
from duetime.store import Store
from duetime.store.parts import (
    HistoryStore,
    OutboxStore,
    ScheduleStore,
    TokenStore,
    TransactionStore,
    require,
)

PARTS = {
    "schedules": ScheduleStore,
    "history": HistoryStore,
    "tokens": TokenStore,
    "transactions": TransactionStore,
    "outbox": OutboxStore,
}


async def test_both_backends_keep_every_part(store: Store) -> None:
    present = {name for name in PARTS if getattr(store, name) is not None}
    assert present == set(PARTS)
    for name in present:
        part = getattr(store, name)
        methods = [m for m in vars(PARTS[name]) if not m.startswith("_")]
        assert methods
        assert all(callable(getattr(part, m, None)) for m in methods), name


async def test_the_parts_share_the_stores_database(store: Store) -> None:
    """Each part reads and writes the store's own database, through its connections."""
    await store.put_timers([new_timer("k", type="t")], "error", NOW)
    info = await store.tokens.add_token("ops", "h" * 64, ["ns"], False, NOW)
    assert await store.tokens.find_token("h" * 64) == info
    assert await store.schedules.get_meta("absent") is None
    assert (await store.history.list_events("ns", EventFilter(), None, 10)).items == []


class WithoutOutbox:
    """A store as a third-party backend might be: every part but the outbox."""

    outbox = None

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


async def test_a_missing_part_is_refused_naming_it_and_the_field(store: Store) -> None:
    assert store.outbox is not None
    assert require(store.outbox, "outbox", store, field="f", doing="x") is store.outbox
    bare: Any = WithoutOutbox(store)
    app = AsyncApp(store.url, "ns", store=bare, clock=FrozenClock(NOW))
    with pytest.raises(InvalidInput) as refused:
        await app.schedule("t", delay=5, key="k", transaction=object())
    assert refused.value.field == "transaction"
    scheme = store.url.split(":", 1)[0]
    assert refused.value.message == (
        "transaction: scheduling inside your own transaction needs store.outbox, which"
        f" WithoutOutbox ({scheme}) does not have"
    )
    assert await store.get_timer("ns", "k") is None


def test_require_names_the_part_the_store_and_what_needed_it() -> None:
    class Bare:
        url = "memory://nowhere"

    with pytest.raises(InvalidInput) as refused:
        require(None, "history", Bare(), field="database_url", doing="the event log")
    assert refused.value.field == "database_url"
    assert refused.value.message == (
        "database_url: the event log needs store.history, which Bare (memory) does not have"
    )
    assert require("a part", "history", Bare(), field="database_url", doing="x") == "a part"
