"""The API's per-namespace gate: at most ``places`` reads of one namespace at once, the rest
waiting, a wait past its bound refused as busy, other namespaces never held up."""

from __future__ import annotations

import asyncio

import pytest

from duetime.api.gates import NamespaceGates
from duetime.errors import StoreBusy


async def hold(gates: NamespaceGates, namespace: str, inside: list[str], go: asyncio.Event) -> None:
    async with gates.turn(namespace):
        inside.append(namespace)
        await go.wait()
        inside.remove(namespace)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_at_most_places_reads_of_one_namespace_run_and_the_rest_wait_in_order() -> None:
    async def scenario() -> None:
        gates = NamespaceGates(places=2, wait=60)
        inside: list[str] = []
        go = asyncio.Event()
        tasks = [asyncio.create_task(hold(gates, "noisy", inside, go)) for _ in range(5)]
        await settle()
        assert inside == ["noisy", "noisy"]
        assert gates.users("noisy") == 5
        go.set()
        await asyncio.gather(*tasks)
        assert inside == []
        assert gates.users("noisy") == 0

    asyncio.run(scenario())


def test_another_namespace_passes_while_one_namespace_is_full() -> None:
    async def scenario() -> None:
        gates = NamespaceGates(places=1, wait=60)
        inside: list[str] = []
        held = asyncio.Event()
        noisy = [asyncio.create_task(hold(gates, "noisy", inside, held)) for _ in range(3)]
        await settle()
        async with gates.turn("quiet"):
            assert inside == ["noisy"]
            assert gates.users("quiet") == 1
        assert gates.users("noisy") == 3
        held.set()
        await asyncio.gather(*noisy)

    asyncio.run(scenario())


def test_a_wait_past_its_bound_is_busy_and_leaves_the_gate_as_it_was() -> None:
    async def scenario() -> None:
        gates = NamespaceGates(places=1, wait=0.05)
        inside: list[str] = []
        held = asyncio.Event()
        first = asyncio.create_task(hold(gates, "noisy", inside, held))
        await settle()
        with pytest.raises(StoreBusy) as refused:
            async with gates.turn("noisy"):
                pytest.fail("the gate let a second read in")
        assert "'noisy' already has 1 reads under way" in str(refused.value)
        assert gates.users("noisy") == 1  # the refused one counts no more
        held.set()
        await first
        async with gates.turn("noisy"):  # the place came back
            assert gates.users("noisy") == 1

    asyncio.run(scenario())


def test_a_read_that_raises_gives_its_place_back_and_an_idle_gate_is_dropped() -> None:
    async def scenario() -> None:
        gates = NamespaceGates(places=1, wait=60)
        with pytest.raises(RuntimeError):
            async with gates.turn("noisy"):
                raise RuntimeError("the read failed")
        assert gates.users("noisy") == 0
        assert "noisy" not in gates._gates
        async with gates.turn("noisy"):
            assert gates.users("noisy") == 1

    asyncio.run(scenario())


def test_a_cancelled_waiter_leaves_no_count_behind() -> None:
    async def scenario() -> None:
        gates = NamespaceGates(places=1, wait=60)
        inside: list[str] = []
        held = asyncio.Event()
        first = asyncio.create_task(hold(gates, "noisy", inside, held))
        await settle()
        waiter = asyncio.create_task(hold(gates, "noisy", inside, held))
        await settle()
        assert gates.users("noisy") == 2
        waiter.cancel()
        await settle()
        assert gates.users("noisy") == 1
        held.set()
        await first
        assert gates.users("noisy") == 0

    asyncio.run(scenario())
