"""``duetime tzdata diff`` against a zoneinfo tree built with ``zic`` in which New York drops
DST from 2030: exactly the timers and schedule occurrences that would move are listed."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from duetime import AsyncApp, FrozenClock
from duetime.services.tzdata import META_KEY, reresolve_if_changed
from duetime.services.tzdata_diff import ZoneTree

from .conftest import Cli

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

ZIC = shutil.which("zic") or "/usr/sbin/zic"

# New York as today until 2030, then EST all year; Berlin as today (the EU rules since 1996).
RULES = """
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
    if not Path(ZIC).exists():
        pytest.skip("zic is not installed (apt-get install tzdata's zic, or libc-bin)")
    source = tmp_path / "rules.zi"
    source.write_text(RULES)
    tree = tmp_path / "zoneinfo"
    subprocess.run([ZIC, "-d", str(tree), str(source)], check=True, capture_output=True)
    return tree


@pytest.fixture(params=["sqlite", "postgres"])
def store_cli(request: pytest.FixtureRequest, cli: Cli) -> Iterator[Cli]:
    """The CLI on a per-test SQLite file, or on a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield cli
        return
    with pooled_pg_url() as url:
        cli.env["DUETIME_DATABASE_URL"] = url
        yield cli


def test_diff_lists_exactly_what_the_new_rules_move(store_cli: Cli, no_dst_tree: Path) -> None:
    cli = store_cli
    summer_ny = cli.ok(
        "schedule",
        "t",
        "--local",
        "2031-07-01T09:00",
        "--timezone",
        "America/New_York",
        "--key",
        "summer-ny",
    )
    assert summer_ny["timer"]["due_at"] == "2031-07-01T13:00:00Z"
    cli.ok(
        "schedule",
        "t",
        "--local",
        "2031-01-15T09:00",
        "--timezone",
        "America/New_York",
        "--key",
        "winter-ny",
    )
    cli.ok(
        "schedule",
        "t",
        "--local",
        "2031-07-01T09:00",
        "--timezone",
        "Europe/Berlin",
        "--key",
        "summer-berlin",
    )
    cli.ok("schedule", "t", "--at", "2031-07-01T13:00:00Z", "--key", "instant")
    cli.ok(
        "schedules",
        "add",
        "anniversary",
        "t",
        "--rrule",
        "FREQ=YEARLY;COUNT=2",
        "--dtstart",
        "2031-06-15T09:00",
        "--timezone",
        "America/New_York",
    )
    cli.ok(
        "schedules",
        "add",
        "berlin-daily",
        "t",
        "--rrule",
        "FREQ=DAILY",
        "--dtstart",
        "2031-06-15T09:00",
        "--timezone",
        "Europe/Berlin",
    )
    cli.ok(
        "schedules",
        "add",
        "ny-morning",
        "t",
        "--cron",
        "0 9 * * *",
        "--timezone",
        "America/New_York",
    )

    report = cli.ok("tzdata", "diff", "--zoneinfo", str(no_dst_tree), "--count", "3")
    moves = [(m["kind"], m["key"], m["local"], m["now_at"], m["then_at"]) for m in report["moves"]]
    assert moves == [
        (
            "timer",
            "summer-ny",
            "2031-07-01T09:00:00",
            "2031-07-01T13:00:00Z",
            "2031-07-01T14:00:00Z",
        ),
        (
            "schedule",
            "schedule:anniversary:2031-06-15T13:00:00Z",
            "2031-06-15T09:00:00",
            "2031-06-15T13:00:00Z",
            "2031-06-15T14:00:00Z",
        ),
        (
            "schedule",
            "schedule:anniversary:2032-06-15T13:00:00Z",
            "2032-06-15T09:00:00",
            "2032-06-15T13:00:00Z",
            "2032-06-15T14:00:00Z",
        ),
    ]
    assert {m["timezone"] for m in report["moves"]} == {"America/New_York"}
    human = cli("tzdata", "diff", "--zoneinfo", str(no_dst_tree))
    assert human.code == 0, human.stderr
    assert "summer-ny" in human.stdout
    assert "winter-ny" not in human.stdout


def test_diff_refuses_a_folder_that_is_not_there(cli: Cli, tmp_path: Path) -> None:
    error = cli.fails("tzdata", "diff", "--zoneinfo", str(tmp_path / "nope"), code=2)
    assert error["field"] == "zoneinfo"


def test_applied_rules_show_each_move_in_the_timer_history(
    store_cli: Cli, no_dst_tree: Path
) -> None:
    """The re-resolution a worker runs on start, pointed at the zic tree: `duetime show` lists
    the move with the timer's attempts."""
    cli = store_cli
    cli.ok(
        "schedule",
        "t",
        "--local",
        "2031-07-01T09:00",
        "--timezone",
        "America/New_York",
        "--key",
        "summer-ny",
    )

    async def apply() -> int:
        url = cli.env["DUETIME_DATABASE_URL"]
        app = AsyncApp(url, "default", clock=FrozenClock(datetime(2030, 6, 1, tzinfo=UTC)))
        await app.open()
        try:
            await app.store.schedules.set_meta(META_KEY, "before", app.clock.now())
            report = await reresolve_if_changed(
                app.store.schedules,
                app.clock.now(),
                version="after",
                zones=ZoneTree(no_dst_tree).zone,
            )
            return report.timers
        finally:
            await app.close()

    assert asyncio.run(apply()) == 1
    shown = cli.ok("show", "summer-ny")
    assert shown["timer"]["due_at"] == "2031-07-01T14:00:00Z"
    assert shown["attempts"] == []
    assert shown["moves"] == [
        {
            "moved_at": "2030-06-01T00:00:00Z",
            "reason": "tz data before -> after",
            "local": "2031-07-01T09:00:00",
            "timezone": "America/New_York",
            "from_at": "2031-07-01T13:00:00Z",
            "to_at": "2031-07-01T14:00:00Z",
        }
    ]
    human = cli("show", "summer-ny")
    assert human.code == 0, human.stderr
    assert "tz data before -> after" in human.stdout


# Almaty as tz data had it until 2024 (+06 all year); today's release has +05 since 2024-03-01.
ALMATY_PLUS6 = """
Zone Asia/Almaty 6:00 - +06
"""


@pytest.fixture
def almaty_tree(tmp_path: Path) -> Path:
    if not Path(ZIC).exists():
        pytest.skip("zic is not installed (apt-get install tzdata's zic, or libc-bin)")
    source = tmp_path / "almaty.zi"
    source.write_text(ALMATY_PLUS6)
    tree = tmp_path / "almaty"
    subprocess.run([ZIC, "-d", str(tree), str(source)], check=True, capture_output=True)
    return tree


def test_an_occurrence_moved_earlier_is_paired_by_its_local_time(
    store_cli: Cli, almaty_tree: Path
) -> None:
    """Under the other rules each 09:00 comes an hour earlier, before the next instant of
    today's rules: every row pairs the occurrence with the same 09:00, not the next week's."""
    cli = store_cli
    cli.ok(
        "schedules",
        "add",
        "almaty-weekly",
        "t",
        "--rrule",
        "FREQ=WEEKLY",
        "--dtstart",
        "2027-03-15T09:00",
        "--timezone",
        "Asia/Almaty",
    )
    report = cli.ok("tzdata", "diff", "--zoneinfo", str(almaty_tree), "--count", "3")
    moves = [(m["key"], m["local"], m["now_at"], m["then_at"]) for m in report["moves"]]
    assert moves == [
        (
            f"schedule:almaty-weekly:2027-03-{day}T04:00:00Z",
            f"2027-03-{day}T09:00:00",
            f"2027-03-{day}T04:00:00Z",
            f"2027-03-{day}T03:00:00Z",
        )
        for day in (15, 22, 29)
    ]


DAMAGES = {
    "footer cut short": lambda data: data[:-1],  # zoneinfo alone reads this for ever
    "data cut short": lambda data: data[:100],
    "empty": lambda data: b"",
    "not a zone": lambda data: b"Asia/Almaty +06\n",
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_zone_file_is_an_error_naming_it(
    store_cli: Cli, almaty_tree: Path, damage: str
) -> None:
    cli = store_cli
    zone_file = almaty_tree / "Asia" / "Almaty"
    zone_file.write_bytes(DAMAGES[damage](zone_file.read_bytes()))
    cli.ok("schedules", "add", "almaty", "t", "--cron", "0 9 * * *", "--timezone", "Asia/Almaty")
    error = cli.fails("tzdata", "diff", "--zoneinfo", str(almaty_tree), code=2)
    assert error["field"] == "zoneinfo"
    assert str(zone_file) in error["message"]
    assert "TZif" in error["message"]
    human = cli("tzdata", "diff", "--zoneinfo", str(almaty_tree))
    assert human.code == 2
    assert "Traceback" not in human.stderr
    assert str(zone_file) in human.stderr


def test_a_dense_rule_is_paired_by_local_time_too(store_cli: Cli, almaty_tree: Path) -> None:
    """A rule every second, started long ago: the other rules' same wall time is an hour
    before the window, thousands of occurrences away; each row still pairs its own."""
    cli = store_cli
    cli.ok(
        "schedules",
        "add",
        "almaty-secondly",
        "t",
        "--rrule",
        "FREQ=SECONDLY",
        "--dtstart",
        "2025-01-01T00:00",
        "--timezone",
        "Asia/Almaty",
    )
    report = cli.ok("tzdata", "diff", "--zoneinfo", str(almaty_tree), "--count", "3")
    moves = report["moves"]
    assert len(moves) == 3
    for move in moves:
        now_at = datetime.fromisoformat(move["now_at"])
        assert datetime.fromisoformat(move["then_at"]) == now_at - timedelta(hours=1)
        assert move["local"] == (now_at + timedelta(hours=5)).strftime("%Y-%m-%dT%H:%M:%S")
