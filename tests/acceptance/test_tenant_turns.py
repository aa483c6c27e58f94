"""Tenant isolation, shown without a clock: while one tenant's listings are held inside the
store, that tenant's other reads wait their turn at its own gate and the other tenants'
requests are answered all the same.

The noisy tenant's listing is made to wait (on an event the test sets) inside the facade's
read, so "one tenant's reads are under way" is a state the test holds, not a race it hopes
for. How fast the quiet tenant is served beside a real noisy load is a figure, measured by
``bench/tenant_isolation.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from duetime import AsyncApp
from duetime.api import ApiSettings, create_api
from duetime.api.service import Service
from duetime.app.limits import Limits
from duetime.config import Settings

NOISY = "/v1/namespaces/noisy"
QUIET = "/v1/namespaces/quiet"
LISTINGS = 4


class HeldListings:
    """``app.limits.page`` of the noisy namespace waits for :attr:`release`; counts how many
    are inside at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.inside = 0
        self.most_inside = 0
        real = Limits.page

        async def page(limits: Limits, **options: Any) -> Any:
            if limits._context.namespace != "noisy":
                return await real(limits, **options)
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
            self.entered.set()
            try:
                await self.release.wait()
                return await real(limits, **options)
            finally:
                self.inside -= 1

        monkeypatch.setattr(Limits, "page", page)


@contextlib.asynccontextmanager
async def started(settings: Settings) -> AsyncIterator[tuple[httpx.AsyncClient, Service]]:
    """The API in this event loop (its lifespan entered), the two tenants' namespaces made."""
    async with AsyncApp(settings=settings) as app:
        for namespace in ("noisy", "quiet"):
            await app.namespaces.add(namespace)
    api = create_api(ApiSettings(core=settings))
    async with api.router.lifespan_context(api):
        transport = httpx.ASGITransport(app=api)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, api.state.duetime


async def wait_until_waiting(service: Service, namespace: str, count: int) -> None:
    """Until ``count`` of the namespace's reads are at its gate (inside or waiting): each
    request gets there within a few turns of the event loop, it waits on nothing else."""
    for _ in range(10_000):
        if service.reads.users(namespace) >= count:
            return
        await asyncio.sleep(0)
    pytest.fail(f"{service.reads.users(namespace)} of {count} reads reached {namespace}'s gate")


def test_a_tenants_listings_take_turns_while_another_tenant_is_served(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'turns.db'}")
    assert settings.reads_per_namespace == 1

    async def scenario() -> None:
        held = HeldListings(monkeypatch)
        async with started(settings) as (client, service):
            listings = [
                asyncio.create_task(client.get(f"{NOISY}/limits", params={"limit": 1000}))
                for _ in range(LISTINGS)
            ]
            await held.entered.wait()
            await wait_until_waiting(service, "noisy", LISTINGS)
            assert held.inside == 1  # one listing inside the store, three at the gate
            # The quiet tenant writes and reads while every noisy listing is held or waiting.
            created = await client.post(
                f"{QUIET}/timers", json={"key": "q1", "type": "quiet.tick", "delay": "PT1H"}
            )
            assert created.status_code == 201, created.text
            listed = await client.get(f"{QUIET}/limits")
            assert listed.status_code == 200, listed.text
            shown = await client.get(f"{QUIET}/timers/q1")
            assert shown.status_code == 200, shown.text
            assert service.reads.users("quiet") == 0  # its reads passed no one's gate but its own
            assert all(not listing.done() for listing in listings)
            held.release.set()
            answers = await asyncio.gather(*listings)
            assert [answer.status_code for answer in answers] == [200] * LISTINGS
            assert held.most_inside == 1
            assert service.reads.users("noisy") == 0

    asyncio.run(scenario())


def test_a_read_that_cannot_get_its_turn_in_time_is_busy_and_others_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'busy.db'}",
        statement_timeout=timedelta(milliseconds=200),
    )

    async def scenario() -> None:
        held = HeldListings(monkeypatch)
        async with started(settings) as (client, service):
            first = asyncio.create_task(client.get(f"{NOISY}/limits"))
            await held.entered.wait()
            # The held listing keeps the noisy tenant's one place past statement_timeout: the
            # next noisy read is answered 503 rather than queued without end.
            refused = await client.get(f"{NOISY}/limits")
            assert refused.status_code == 503, refused.text
            assert refused.json()["code"] == "store_busy"
            assert refused.headers["Retry-After"] == "1"
            assert "reads under way" in refused.json()["message"]
            quiet = await client.get(f"{QUIET}/limits")
            assert quiet.status_code == 200, quiet.text
            held.release.set()
            assert (await first).status_code == 200
            assert service.reads.users("noisy") == 0

    asyncio.run(scenario())
