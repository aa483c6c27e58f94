"""A tz data upgrade that moves a schedule's next occurrence: it fires once, at the instant of
the new rules, never twice and never not at all (a worker's ticks: materialiser and delivery).

Two releases of Asia/Almaty compiled with ``zic``: +06 all year (tz data before 2024) and +05
(since 2024-03-01). A daily 09:00 occurrence is 03:00Z under one and 04:00Z under the other, so
the upgrade from the first moves it later and the one back moves it earlier. Each test installs
a tree as the tz data the whole process reads, as a new ``tzdata`` package would be.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from duetime import AsyncApp, Event, FrozenClock, schedules
from duetime.services.materializer import Materializer
from duetime.services.tzdata import META_KEY, reresolve_schedules
from duetime.store import Store
from duetime.support.tzif import read_zone
from duetime.timemath import tzmath

ZIC = shutil.which("zic") or "/usr/sbin/zic"
RELEASES = {
    "plus6": "Zone Asia/Almaty 6:00 - +06\n",
    "plus5": "Zone Asia/Almaty 5:00 - +05\n",
    "plus5-again": "Zone Asia/Almaty 5:00 - +05\n",  # a release that changes nothing here
}
NINE_AM = {
    "plus6": datetime(2027, 3, 15, 3, 0, tzinfo=UTC),
    "plus5": datetime(2027, 3, 15, 4, 0, tzinfo=UTC),
}
UPGRADES = {"later": ("plus6", "plus5"), "earlier": ("plus5", "plus6")}

Install = Callable[[str], None]


@pytest.fixture
def install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Install:
    """``install("plus5")``: from now on the process reads Almaty from that release."""
    if not Path(ZIC).exists():
        pytest.skip("zic is not installed")
    trees = {}
    for name, rules in RELEASES.items():
        source = tmp_path / f"{name}.zi"
        source.write_text(rules)
        trees[name] = tmp_path / name
        subprocess.run([ZIC, "-d", str(trees[name]), str(source)], check=True, capture_output=True)
    real = tzmath._load_zone_cached

    def switch(name: str) -> None:
        def load(zone: str) -> ZoneInfo:
            path = trees[name].joinpath(*zone.split("/"))
            return read_zone(path, zone) if path.is_file() else real(zone)

        monkeypatch.setattr(tzmath, "_load_zone_cached", load)
        monkeypatch.setattr(tzmath, "tzdata_version", lambda: name)
        # A process starts afresh with new tz data: nothing computed with the old rules stays.
        monkeypatch.setattr(schedules, "_KNOWN_RULES", {})
        monkeypatch.setattr(schedules, "_KNOWN_FIRSTS", {})

    return switch


Fired = list[tuple[str, datetime]]


def almaty_app(store: Store, clock: FrozenClock) -> tuple[AsyncApp, Fired]:
    """An app whose handler records each firing: the occurrence's key and the instant."""
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    fired: Fired = []

    @app.handler("t")
    async def record(event: Event) -> None:
        fired.append((event.key, clock.now()))

    return app, fired


async def run_until(app: AsyncApp, clock: FrozenClock, until: datetime) -> None:
    """A worker's ticks every half hour (every whole hour among them) up to ``until``."""
    while clock.now() < until:
        clock.advance(min(timedelta(minutes=30), until - clock.now()))
        await app.tick()


def key(at: datetime) -> str:
    return f"schedule:almaty:{at:%Y-%m-%dT%H:%M:%SZ}"


async def add_almaty(app: AsyncApp, release: str) -> None:
    await app.store.schedules.set_meta(META_KEY, release, app.clock.now())
    _, schedule = await app.schedules.add("almaty", "t", cron="0 9 * * *", timezone="Asia/Almaty")
    assert schedule.next_at == NINE_AM[release]


@pytest.mark.parametrize("move", UPGRADES)
async def test_a_stored_next_occurrence_fires_once_at_its_new_instant(
    store: Store, install: Install, move: str
) -> None:
    old, new = UPGRADES[move]
    install(old)
    clock = FrozenClock(datetime(2027, 3, 14, 12, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await add_almaty(app, old)

    install(new)
    await run_until(app, clock, datetime(2027, 3, 15, 6, 0, tzinfo=UTC))
    assert fired == [(key(NINE_AM[new]), NINE_AM[new])]
    assert (await app.schedules.get("almaty")).next_at == NINE_AM[new] + timedelta(days=1)


@pytest.mark.parametrize("move", UPGRADES)
async def test_an_occurrence_made_ahead_fires_once_at_its_new_instant(
    store: Store, install: Install, move: str
) -> None:
    """The materialiser made the occurrence's timer hours ahead under the old rules; the
    upgrade comes before it is due: it is made again at the new instant and fires there."""
    old, new = UPGRADES[move]
    install(old)
    clock = FrozenClock(datetime(2027, 3, 15, 1, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await add_almaty(app, old)
    ahead = Materializer(app.store, clock, "ns", lookahead=timedelta(hours=4))
    assert await ahead.run_once() == 1

    install(new)
    await run_until(app, clock, datetime(2027, 3, 15, 6, 0, tzinfo=UTC))
    assert fired == [(key(NINE_AM[new]), NINE_AM[new])]
    assert (await app.get(key(NINE_AM[old]))).status == "cancelled"
    assert (await app.schedules.get("almaty")).next_at == NINE_AM[new] + timedelta(days=1)


@pytest.mark.parametrize("move", UPGRADES)
async def test_an_occurrence_fired_before_the_upgrade_does_not_fire_again(
    store: Store, install: Install, move: str
) -> None:
    """09:00 fired under the old rules; the worker restarts with the new ones between the two
    instants of that 09:00: it does not come round again, and the next day's fires."""
    old, new = UPGRADES[move]
    install(old)
    clock = FrozenClock(datetime(2027, 3, 15, 2, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await add_almaty(app, old)
    between = datetime(2027, 3, 15, 3, 30, tzinfo=UTC)
    await run_until(app, clock, between if move == "later" else NINE_AM[old])
    assert fired == [(key(NINE_AM[old]), NINE_AM[old])]

    install(new)
    next_day = NINE_AM[new] + timedelta(days=1)
    await run_until(app, clock, next_day)
    assert fired == [(key(NINE_AM[old]), NINE_AM[old]), (key(next_day), next_day)]


async def test_a_rule_changed_since_its_last_occurrence_loses_no_occurrence(
    store: Store, install: Install
) -> None:
    """09:00 fired, then the rule became 10:00: the 09:00 made last is no occurrence of the
    rule now, and a release that changes nothing for the zone keeps today's 10:00."""
    install("plus5")
    clock = FrozenClock(datetime(2027, 3, 15, 2, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await add_almaty(app, "plus5")
    await run_until(app, clock, NINE_AM["plus5"])
    clock.advance(timedelta(minutes=10))
    await app.schedules.update("almaty", cron="0 10 * * *")

    install("plus5-again")
    ten = NINE_AM["plus5"] + timedelta(hours=1)
    await run_until(app, clock, ten)
    assert fired == [(key(NINE_AM["plus5"]), NINE_AM["plus5"]), (key(ten), ten)]


@pytest.mark.parametrize("move", UPGRADES)
async def test_two_workers_re_resolving_the_same_upgrade_make_it_once(
    store: Store, install: Install, move: str
) -> None:
    """Two workers start with the new release at once: both re-resolve before either records
    it. The second finds the occurrence made ahead already withdrawn and made again, and
    leaves it so."""
    old, new = UPGRADES[move]
    install(old)
    clock = FrozenClock(datetime(2027, 3, 15, 1, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await add_almaty(app, old)
    ahead = Materializer(app.store, clock, "ns", lookahead=timedelta(hours=4))
    assert await ahead.run_once() == 1

    install(new)
    assert await reresolve_schedules(app.store.schedules, clock.now(), timers=app.store) == 1
    assert await reresolve_schedules(app.store.schedules, clock.now(), timers=app.store) == 0
    await run_until(app, clock, datetime(2027, 3, 15, 6, 0, tzinfo=UTC))
    assert fired == [(key(NINE_AM[new]), NINE_AM[new])]


@pytest.mark.parametrize("made_ahead", [False, True])
async def test_an_occurrence_moved_into_the_past_fires_at_once(
    store: Store, install: Install, made_ahead: bool
) -> None:
    """Under +05 09:00 is 04:00Z; the worker restarts at 03:30Z with +06, under which it was
    03:00Z. Not missed while workers were down: it fires at once, even with catch_up "none"."""
    install("plus5")
    clock = FrozenClock(datetime(2027, 3, 15, 2, 0, tzinfo=UTC))
    app, fired = almaty_app(store, clock)
    await app.store.schedules.set_meta(META_KEY, "plus5", clock.now())
    await app.schedules.add(
        "almaty", "t", cron="0 9 * * *", timezone="Asia/Almaty", catch_up="none"
    )
    if made_ahead:
        ahead = Materializer(app.store, clock, "ns", lookahead=timedelta(hours=3))
        assert await ahead.run_once() == 1

    install("plus6")
    clock.advance(timedelta(minutes=90))
    upgraded = clock.now()
    await app.tick()
    next_day = NINE_AM["plus6"] + timedelta(days=1)
    await run_until(app, clock, next_day)
    assert fired == [(key(upgraded), upgraded), (key(next_day), next_day)]
