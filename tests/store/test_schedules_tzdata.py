"""tz data changes: pending local-form timers and schedules follow a zone's new rules.

Two rule sets for America/New_York: the real one (EDT in summer, -04) and a made-up release in
which New York abolished DST (EST all year, -05), built as a TZif file with a POSIX TZ footer.
"""

from __future__ import annotations

import asyncio
import io
import shutil
import struct
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.services.materializer import Materializer
from duetime.services.tzdata import META_KEY, reresolve_if_changed
from duetime.services.tzdata_diff import ZoneTree
from duetime.store import Store
from duetime.timemath import tzmath

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)


def tzif(posix_tz: str, utoff: int, abbr: str) -> bytes:
    """A minimal TZif v2 file: no transitions, one local time type, the rules in the footer."""
    chars = abbr.encode() + b"\0"
    header = b"TZif2" + b"\0" * 15 + struct.pack(">6l", 0, 0, 0, 0, 1, len(chars))
    block = header + struct.pack(">lBB", utoff, 0, 0) + chars
    return block + block + b"\n" + posix_tz.encode() + b"\n"


@pytest.fixture
def new_release(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to install the made-up release (load_zone's cache is bypassed for New York)."""
    real = tzmath._load_zone_cached
    fake = ZoneInfo.from_file(io.BytesIO(tzif("EST5", -18000, "EST")), key="America/New_York")

    def load(name: str) -> ZoneInfo:
        return fake if name == "America/New_York" else real(name)

    def switch() -> None:
        monkeypatch.setattr(tzmath, "_load_zone_cached", load)
        monkeypatch.setattr(tzmath, "tzdata_version", lambda: "2099z")

    return switch


async def test_new_rules_move_local_timers_and_schedules(
    store: Store, new_release: Callable[[], None]
) -> None:
    clock = FrozenClock(NOW)
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    local = await app.schedule("t", local="2025-07-01T09:00", timezone="America/New_York")
    tokyo = await app.schedule("t", local="2025-07-01T09:00", timezone="Asia/Tokyo")
    plain = await app.schedule("t", at="2025-07-01T13:00:00Z")
    _, daily = await app.schedules.add("d", "t", cron="0 9 * * *", timezone="America/New_York")
    _, hourly = await app.schedules.add("h", "t", every="PT1H")
    assert local.timer.due_at == datetime(2025, 7, 1, 13, 0, tzinfo=UTC)  # 09:00 EDT
    assert daily.next_at == datetime(2025, 6, 1, 13, 0, tzinfo=UTC)
    first = await reresolve_if_changed(app.store.schedules, NOW)
    assert (first.previous, first.timers, first.schedules) == (None, 0, 0)
    assert await app.store.schedules.get_meta(META_KEY) == tzmath.tzdata_version()

    new_release()
    clock.advance(timedelta(hours=1))
    report = await reresolve_if_changed(app.store.schedules, clock.now())
    assert (report.previous, report.current) == (first.current, "2099z")
    assert (report.timers, report.schedules) == (1, 1)
    moved = await app.get(local.timer.key)
    assert (moved.due_at, moved.run_at) == (datetime(2025, 7, 1, 14, 0, tzinfo=UTC),) * 2
    assert (await app.get(tokyo.timer.key)).due_at == tokyo.timer.due_at
    assert (await app.get(plain.timer.key)).due_at == plain.timer.due_at
    assert (await app.schedules.get("d")).next_at == datetime(2025, 6, 1, 14, 0, tzinfo=UTC)
    assert (await app.schedules.get("h")).next_at == hourly.next_at
    assert await app.store.schedules.get_meta(META_KEY) == "2099z"
    again = await reresolve_if_changed(app.store.schedules, clock.now())
    assert not again.changed
    assert (again.timers, again.schedules) == (0, 0)


async def test_the_materializer_checks_on_start(
    store: Store, new_release: Callable[[], None]
) -> None:
    clock = FrozenClock(NOW)
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    await app.store.schedules.set_meta(META_KEY, "2000a", NOW)
    timer = await app.schedule("t", local="2025-07-01T09:00", timezone="America/New_York")
    new_release()
    worker = Materializer(app.store, clock, "ns")
    stop = asyncio.Event()
    stop.set()  # one start-up check, no rounds
    await worker.run(stop)
    assert worker.tzdata is not None
    assert worker.tzdata.timers == 1
    assert (await app.get(timer.timer.key)).due_at == datetime(2025, 7, 1, 14, 0, tzinfo=UTC)


# New York drops DST from 2030 (EST all year); Berlin keeps the EU rules. Compiled with zic.
NO_DST_RULES = """
Rule NYC 2007 max - Mar Sun>=8 2:00 1:00 D
Rule NYC 2007 max - Nov Sun>=1 2:00 0 S
Zone America/New_York -5:00 NYC E%sT 2030 Jan 1
    -5:00 - EST
Rule EU 1981 max - Mar lastSun 1:00u 1:00 S
Rule EU 1996 max - Oct lastSun 1:00u 0 -
Zone Europe/Berlin 1:00 EU CE%sT
"""


@pytest.fixture
def no_dst_tree(tmp_path: Path) -> Path:
    zic = shutil.which("zic") or "/usr/sbin/zic"
    if not Path(zic).exists():
        pytest.skip("zic is not installed")
    source = tmp_path / "rules.zi"
    source.write_text(NO_DST_RULES)
    tree = tmp_path / "zoneinfo"
    subprocess.run([zic, "-d", str(tree), str(source)], check=True, capture_output=True)
    return tree


async def test_applying_new_rules_records_each_move_in_the_timer_history(
    store: Store, no_dst_tree: Path
) -> None:
    clock = FrozenClock(datetime(2030, 6, 1, tzinfo=UTC))
    app = AsyncApp(store.url, "ns", clock=clock, store=store)
    ny = await app.schedule("t", local="2031-07-01T09:00", timezone="America/New_York", key="ny")
    winter = await app.schedule(
        "t", local="2031-01-15T09:00", timezone="America/New_York", key="winter"
    )
    berlin = await app.schedule("t", local="2031-07-01T09:00", timezone="Europe/Berlin", key="b")
    await app.schedules.add(
        "yearly", "t", rrule="FREQ=YEARLY", dtstart="2030-07-04T09:00", timezone="America/New_York"
    )
    await app.store.schedules.set_meta(META_KEY, "2030a", clock.now())
    assert ny.timer.due_at == datetime(2031, 7, 1, 13, 0, tzinfo=UTC)  # 09:00 EDT
    clock.advance(timedelta(hours=1))

    report = await reresolve_if_changed(
        app.store.schedules, clock.now(), version="2030z", zones=ZoneTree(no_dst_tree).zone
    )
    assert (report.timers, report.schedules) == (1, 1)
    assert (await app.get("ny")).due_at == datetime(2031, 7, 1, 14, 0, tzinfo=UTC)  # 09:00 EST
    moves = await app.timers.moves("ny")
    assert [m.to_dict() for m in moves] == [
        {
            "moved_at": "2030-06-01T01:00:00Z",
            "reason": "tz data 2030a -> 2030z",
            "local": "2031-07-01T09:00:00",
            "timezone": "America/New_York",
            "from_at": "2031-07-01T13:00:00Z",
            "to_at": "2031-07-01T14:00:00Z",
        }
    ]
    for kept in (winter, berlin):
        assert (await app.get(kept.timer.key)).due_at == kept.timer.due_at
        assert await app.timers.moves(kept.timer.key) == []
    assert (await app.schedules.get("yearly")).next_at == datetime(2030, 7, 4, 14, 0, tzinfo=UTC)
    again = await reresolve_if_changed(
        app.store.schedules, clock.now(), version="2030z", zones=ZoneTree(no_dst_tree).zone
    )
    assert not again.changed
    assert len(await app.timers.moves("ny")) == 1
