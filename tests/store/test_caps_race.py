"""Caps hold when creations race: many processes, one place left, at most one of them takes it.

Each creator is an app of its own (its own store, its own connections), all started at once
while the collection is one below its cap. On PostgreSQL their transactions really interleave;
the count and the insert must be one atomic step, or several counts see the last place free
and more than the cap is stored. SQLite takes its write lock before a write transaction reads
anything, so the same test there checks that the count is inside that transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from duetime import AsyncApp
from duetime.config import Settings
from duetime.errors import CapReached

RACERS = 8
"""Creators started at once, each for a new item, while one place is left."""


@asynccontextmanager
async def racers(url: str, **caps: int) -> AsyncIterator[list[AsyncApp]]:
    """``RACERS`` opened apps on the database, each with its own store and pool."""
    async with AsyncExitStack() as stack:
        apps = []
        for _ in range(RACERS):
            settings = Settings(database_url=url, namespace="default", **caps)
            apps.append(await stack.enter_async_context(AsyncApp(settings=settings)))
        yield apps


async def race(calls: list[Callable[[], Awaitable[Any]]]) -> tuple[int, list[str]]:
    """Run every call at once; how many succeeded, and the fields of those CapReached."""
    results = await asyncio.gather(*(call() for call in calls), return_exceptions=True)
    refused = [r.field for r in results if isinstance(r, CapReached)]
    others = [r for r in results if isinstance(r, BaseException) and not isinstance(r, CapReached)]
    assert not others, others
    return len(results) - len(refused), refused


async def test_racing_namespaces_stop_at_the_cap(store_url: str) -> None:
    async with racers(store_url, max_namespaces=3) as apps:
        assert await apps[0].namespaces.add("first")  # with 'default': one place left
        made, refused = await race(
            [lambda app=app, i=i: app.namespaces.add(f"n{i}") for i, app in enumerate(apps)]
        )
        assert (made, set(refused)) == (1, {"name"})
        assert len(await apps[0].namespaces.list()) == 3


async def test_racing_tokens_stop_at_the_cap(store_url: str) -> None:
    async with racers(store_url, max_tokens=3) as apps:
        await apps[0].tokens.issue(["default"])
        await apps[0].tokens.issue(["*"])
        made, refused = await race([lambda app=app: app.tokens.issue(["default"]) for app in apps])
        assert (made, set(refused)) == (1, {"token"})
        assert len(await apps[0].tokens.list()) == 3


async def test_racing_token_namespaces_stop_at_the_cap(store_url: str) -> None:
    async with racers(store_url, max_namespaces=2, max_tokens=100) as apps:
        made, refused = await race(
            [lambda app=app, i=i: app.tokens.issue([f"t{i}"]) for i, app in enumerate(apps)]
        )
        assert (made, set(refused)) == (1, {"namespace"})
        assert len(await apps[0].namespaces.list()) == 2


async def test_racing_schedules_stop_at_the_cap(store_url: str) -> None:
    async with racers(store_url, max_schedules=2) as apps:
        await apps[0].schedules.add("first", "tick", every="PT1H")
        made, refused = await race(
            [
                lambda app=app, i=i: app.schedules.add(f"s{i}", "tick", every="PT1H")
                for i, app in enumerate(apps)
            ]
        )
        assert (made, set(refused)) == (1, {"name"})
        assert len((await apps[0].schedules.list(limit=100)).items) == 2


async def test_racing_limits_and_pauses_stop_at_the_cap(store_url: str) -> None:
    async with racers(store_url, max_limits=2) as apps:
        await apps[0].limits.set("first.*", concurrency=1)
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda app=app, i=i: (
                app.limits.set(f"l{i}.*", concurrency=1) if i % 2 else app.limits.pause(f"p{i}.*")
            )
            for i, app in enumerate(apps)
        ]
        made, refused = await race(calls)
        assert (made, set(refused)) == (1, {"pattern"})
        assert len(await apps[0].limits.list()) == 2
