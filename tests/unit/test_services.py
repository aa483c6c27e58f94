"""Node services: started in order, closed in reverse, a failing round never ends the loop."""

from __future__ import annotations

import asyncio
import logging

import pytest

from duetime.services.base import Periodic, Service, ServiceGroup
from duetime.services.nodes import NodeUpkeep


class Recorder(Service):
    def __init__(self, name: str, log: list[str], *, fail_close: bool = False) -> None:
        self.name = name
        self.log = log
        self.fail_close = fail_close

    async def start(self) -> None:
        self.log.append(f"start {self.name}")

    async def once(self) -> None:
        self.log.append(f"once {self.name}")

    async def run(self, stop: asyncio.Event) -> None:
        self.log.append(f"run {self.name}")
        await stop.wait()
        self.log.append(f"stopped {self.name}")

    async def close(self) -> None:
        self.log.append(f"close {self.name}")
        if self.fail_close:
            raise RuntimeError("cannot close")


class Flaky(Periodic):
    name = "flaky"
    failure = "flaky round failed"

    def __init__(self) -> None:
        super().__init__(0.001)
        self.rounds = 0
        self.enough = asyncio.Event()

    async def step(self) -> None:
        self.rounds += 1
        if self.rounds == 3:
            self.enough.set()
        if self.rounds % 2:
            raise ConnectionError("database went away")


def test_a_group_starts_in_order_and_closes_in_reverse_whatever_fails(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log: list[str] = []

    async def main() -> None:
        group = ServiceGroup([Recorder("a", log, fail_close=True), Recorder("b", log)])
        await group.start()
        await group.once()
        group.run()
        await asyncio.sleep(0)
        await group.stop()
        await group.close()

    asyncio.run(main())
    assert log[:4] == ["start a", "start b", "once a", "once b"]
    assert sorted(log[4:6]) == ["run a", "run b"]
    assert log[-2:] == ["close b", "close a"]
    assert "closing a failed" in caplog.text


def test_a_failing_round_is_logged_and_the_next_one_runs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, "duetime.services")

    async def main() -> int:
        flaky = Flaky()
        stop = asyncio.Event()
        task = asyncio.create_task(flaky.run(stop))
        await asyncio.wait_for(flaky.enough.wait(), 10)
        stop.set()
        await asyncio.wait_for(task, 10)
        return flaky.rounds

    assert asyncio.run(main()) >= 3
    assert "flaky round failed" in caplog.text


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Periodic.__init__(Flaky(), 0)


def record_waits(monkeypatch: pytest.MonkeyPatch, rounds: int) -> list[float]:
    """Periodic waits recorded instead of slept; ``rounds`` rounds, then the loop stops."""
    asked: list[float] = []

    async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
        asked.append(seconds)
        return len(asked) > rounds

    monkeypatch.setattr("duetime.services.base._stopped_within", stopped_within)
    return asked


class Outage(Periodic):
    """Fails its second round only."""

    name = "outage"
    failure = "outage round failed"

    def __init__(self, retry_after: float | None) -> None:
        super().__init__(10.0)
        self.retry_after = retry_after
        self.rounds = 0

    async def step(self) -> None:
        self.rounds += 1
        if self.rounds == 2:
            raise ConnectionError("database went away")


@pytest.mark.parametrize(("retry_after", "waits"), [(0.5, [10, 10, 0.5, 10]), (None, [10] * 4)])
def test_a_duty_may_retry_a_failed_round_sooner(
    retry_after: float | None,
    waits: list[float],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The wait before each round: the interval, but ``retry_after`` after a failed round."""
    caplog.set_level(logging.CRITICAL, "duetime.services")
    asked = record_waits(monkeypatch, rounds=3)
    asyncio.run(Outage(retry_after).run(asyncio.Event()))
    assert asked == waits


class Down(Periodic):
    """Fails its first three rounds (an outage), then works."""

    name = "down"
    failure = "down round failed"

    def __init__(self) -> None:
        super().__init__(10.0)
        self.retry_after = 0.5
        self.rounds = 0

    async def step(self) -> None:
        self.rounds += 1
        if self.rounds <= 3:
            raise ConnectionError("database went away")


def test_an_outage_is_logged_once_with_its_traceback_and_once_when_it_ends(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "duetime.services")
    asked = record_waits(monkeypatch, rounds=5)
    asyncio.run(Down().run(asyncio.Event()))
    assert asked == [10, 0.5, 0.5, 0.5, 10, 10]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.exc_info is not None for r in errors] == [True]
    assert "down: working again after 3 failed rounds" in caplog.text


class SteppedLoop(asyncio.SelectorEventLoop):
    """An event loop whose time moves only when a round says how long it took."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 100.0

    def time(self) -> float:
        return self.now


class Slow(Periodic):
    """Rounds that take the given seconds of the loop's time."""

    name = "slow"

    def __init__(self, steady: bool, took: list[float]) -> None:
        super().__init__(10.0)
        self.steady = steady
        self.took = took

    async def step(self) -> None:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SteppedLoop)
        loop.now += self.took.pop(0)


@pytest.mark.parametrize(("steady", "waits"), [(True, [10, 6, 0, 9]), (False, [10, 10, 10, 10])])
def test_a_steady_duty_counts_its_interval_from_the_start_of_a_round(
    steady: bool, waits: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A heartbeat that took 4 s of a 10 s interval comes 6 s later, one that took longer than
    the interval at once: its leases run out counted from its start, not its end."""
    asked = record_waits(monkeypatch, rounds=3)
    loop = SteppedLoop()
    try:
        loop.run_until_complete(Slow(steady, [4.0, 12.0, 1.0]).run(asyncio.Event()))
    finally:
        loop.close()
    assert asked == waits


def test_the_heartbeat_is_a_steady_duty() -> None:
    assert NodeUpkeep.steady


class FailsToStart(Recorder):
    async def start(self) -> None:
        self.log.append(f"start {self.name}")
        raise ConnectionError("database went away")


def test_a_group_that_fails_to_start_closes_what_it_started() -> None:
    """Starting is all or nothing, so that it can be tried again (e.g. after an outage)."""
    log: list[str] = []

    async def main() -> None:
        group = ServiceGroup([Recorder("a", log), FailsToStart("b", log), Recorder("c", log)])
        with pytest.raises(ConnectionError):
            await group.start()

    asyncio.run(main())
    assert log == ["start a", "start b", "close a"]
