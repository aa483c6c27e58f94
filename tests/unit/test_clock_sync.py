"""The database's clock as a process knows it, and whether a waiting row's lease still holds:
both pure, on injected clocks."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from duetime.clock import MAX_DRIFT, DatabaseClock, is_real
from duetime.worker.leases import Leases

SERVER = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Machine:
    """This machine: an elapsed clock that only moves forward, and a wall clock that is off."""

    def __init__(self, skew: timedelta) -> None:
        self.elapsed = 100.0
        self.skew = skew
        self.trips = [0.010, 0.002, 0.006]  # round trips of successive reads
        self.behind = timedelta(0)  # another server's clock (after a failover)

    def wall(self) -> datetime:
        return SERVER + timedelta(seconds=self.elapsed - 100.0) + self.skew

    async def read(self) -> datetime:
        """The server's clock, read in the middle of a round trip."""
        trip = self.trips.pop(0) if self.trips else 0.004
        self.elapsed += trip / 2
        server = SERVER + timedelta(seconds=self.elapsed - 100.0) - self.behind
        self.elapsed += trip / 2
        return server


def test_now_follows_the_server_whatever_the_wall_clock_says() -> None:
    machine = Machine(skew=timedelta(seconds=120))
    clock = DatabaseClock(machine.read, elapsed=lambda: machine.elapsed, wall=machine.wall)
    assert clock.now() == machine.wall()  # not synced yet: the wall clock
    reading = asyncio.run(clock.sync())
    assert reading is not None
    assert reading.uncertainty == timedelta(seconds=0.002)  # the tightest of three reads
    assert abs(reading.offset + timedelta(seconds=120)) < timedelta(milliseconds=3)
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0)
    assert true_now - timedelta(seconds=0.002) <= clock.now() <= true_now  # never ahead
    machine.skew = timedelta(hours=-5)  # the wall clock is stepped: nothing moves
    machine.elapsed += 30
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0)
    aged = timedelta(seconds=30 * MAX_DRIFT)  # what this machine's clock may have gained
    assert true_now - timedelta(seconds=0.002) - aged <= clock.now() <= true_now


def test_a_sync_at_a_busy_moment_keeps_the_tighter_reading() -> None:
    machine = Machine(skew=timedelta(0))
    clock = DatabaseClock(machine.read, elapsed=lambda: machine.elapsed, wall=machine.wall)
    asyncio.run(clock.sync())  # tight: best round trip 2 ms
    machine.elapsed += 10
    machine.trips = [0.080] * 5  # every read slow now
    reading = asyncio.run(clock.sync())
    assert reading is not None
    assert reading.uncertainty == timedelta(seconds=0.080)
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0)
    assert true_now - clock.now() < timedelta(seconds=0.003)  # not 40 ms behind
    assert clock.now() <= true_now
    machine.elapsed += 61  # too old to trust over a fresh reading: the fresh one wins
    machine.trips = [0.080] * 5
    asyncio.run(clock.sync())
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0)
    assert timedelta(seconds=0.03) < true_now - clock.now() <= timedelta(seconds=0.08)


def test_a_database_on_this_machines_clock_means_the_wall_clock() -> None:
    machine = Machine(skew=timedelta(seconds=3))

    async def local() -> datetime | None:
        return None

    clock = DatabaseClock(local, elapsed=lambda: machine.elapsed, wall=machine.wall)
    assert asyncio.run(clock.sync()) is None
    assert clock.offset is None
    machine.skew = timedelta(seconds=-60)  # stepped: SQLite's clock is the wall clock
    assert clock.now() == machine.wall()
    assert is_real(clock)


def test_a_waiting_row_starts_only_with_a_tenth_of_its_lease_left() -> None:
    leases = Leases(timedelta(seconds=30))
    taken = leases.held(SERVER + timedelta(seconds=30))
    assert leases.usable(taken, SERVER + timedelta(seconds=26))
    assert not leases.usable(taken, SERVER + timedelta(seconds=27))
    # A heartbeat that listed the row renews it; one it began before the row was taken does not.
    mark = leases.mark()
    later = leases.held(SERVER + timedelta(seconds=30))
    leases.renewed(mark, SERVER + timedelta(seconds=50))
    assert leases.usable(taken, SERVER + timedelta(seconds=40))
    assert not leases.usable(later, SERVER + timedelta(seconds=40))
    leases.renewed(mark - 1, SERVER + timedelta(seconds=90))  # an older heartbeat: ignored
    assert not leases.usable(taken, SERVER + timedelta(seconds=48))


def test_a_server_whose_clock_is_behind_replaces_the_kept_reading_at_once() -> None:
    """After a failover the database's clock is another machine's: a kept reading of the old
    one (ahead) must not hold "now" ahead of the new authority for a minute."""
    machine = Machine(skew=timedelta(0))
    clock = DatabaseClock(machine.read, elapsed=lambda: machine.elapsed, wall=machine.wall)
    asyncio.run(clock.sync())  # the old primary
    machine.elapsed += 5
    machine.behind = timedelta(seconds=0.5)  # the new primary
    machine.trips = [0.080] * 5  # looser reads than the kept one, which would otherwise stay
    asyncio.run(clock.sync())
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0) - machine.behind
    assert true_now - timedelta(seconds=0.080) <= clock.now() <= true_now


def test_a_slow_read_of_the_same_server_does_not_replace_the_kept_reading() -> None:
    machine = Machine(skew=timedelta(0))
    clock = DatabaseClock(machine.read, elapsed=lambda: machine.elapsed, wall=machine.wall)
    asyncio.run(clock.sync())
    kept = clock.now()
    machine.trips = [0.080] * 5
    asyncio.run(clock.sync())
    assert clock.now() - kept >= timedelta(seconds=0.4 - 0.003)  # 5 reads of 80 ms passed


def test_now_never_goes_back_when_a_looser_reading_replaces_an_old_one() -> None:
    """A reading over a minute old gives way to a fresh, looser one, a lower bound than the old
    one aged to that moment. An instant read meanwhile (a claim's, during a heartbeat's sync)
    must not come after one read later (the attempt's start)."""
    machine = Machine(skew=timedelta(0))
    clock = DatabaseClock(machine.read, elapsed=lambda: machine.elapsed, wall=machine.wall)
    asyncio.run(clock.sync())  # tight
    machine.elapsed += 61
    during: list[datetime] = []

    async def slow_read() -> datetime:
        machine.elapsed += 0.040
        server = SERVER + timedelta(seconds=machine.elapsed - 100.0)
        machine.elapsed += 0.030
        during.append(clock.now())  # another task reads the clock while this read is away
        machine.elapsed += 0.010
        return server

    asyncio.run(clock.sync(1, slow_read))
    after = clock.now()
    assert after >= during[0]
    true_now = SERVER + timedelta(seconds=machine.elapsed - 100.0)
    assert after <= true_now
