"""Three worker processes, real time: every occurrence of an RFC 5545 schedule fires exactly once
(SQLite and PostgreSQL).

A SECONDLY rule with COUNT keeps the run to a few seconds: the schedule is added once the
workers are up (its wake-up hint reaches their materialisers), its occurrences starting a second
or two later, and the generous catch-up grace lets one that a slow machine made late still fire
(once) rather than be caught up by policy. One EXDATE is left out.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from test_schedules_workers import Fleet, database_url, fired  # noqa: F401 - the fixture
from tests.waiting import wait_until

from duetime import App

pytestmark = pytest.mark.slow  # worker processes waiting for real occurrences

ZONE = "Europe/Berlin"
COUNT = 5
SKIPPED = 2
"""The occurrence (0-based) named by the EXDATE: in the middle, so that occurrences before and
after it fire, each once, and the series still ends at COUNT (four firings, about four
seconds: each one is a chance for two of the three workers to fire it twice)."""


@pytest.mark.timeout(120)
def test_three_workers_fire_each_rrule_occurrence_once(database_url: str, tmp_path: Path) -> None:  # noqa: F811
    fleet = Fleet(database_url, tmp_path, 0.0)
    out = tmp_path / "fired.txt"
    with App(database_url, "ns", clock=fleet) as app:  # the schema, before the workers open it
        workers = fleet.start(out)
        fleet.go(workers)  # on the real clock: the rule is set from now, once they are ready
        first = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
        wall = first.astimezone(ZoneInfo(ZONE)).replace(tzinfo=None)
        app.schedules.add(
            "cal",
            "t.all",
            rrule=f"FREQ=SECONDLY;COUNT={COUNT}",
            dtstart=wall.isoformat(),
            timezone=ZONE,
            exdates=[(wall + timedelta(seconds=SKIPPED)).isoformat()],
            catch_up="all",
            catch_up_grace=timedelta(minutes=1),
        )
    expected = {
        "schedule:cal:" + (first + timedelta(seconds=k)).isoformat().replace("+00:00", "Z")
        for k in range(COUNT)
        if k != SKIPPED
    }

    def difference() -> str:
        made = set(fired(out))
        return f"missing {sorted(expected - made)}, unexpected {sorted(made - expected)}"

    wait_until(lambda: set(fired(out)) == expected, 60, "every occurrence", 0.2, difference)
    Fleet.stop(workers)  # lets running handlers finish: a second firing would be written

    everything = fired(out)
    assert set(everything) == expected
    assert all(n == 1 for n in everything.values()), everything.most_common(3)
    with App(database_url, "ns", clock=fleet) as app:
        assert app.schedules.get("cal").next_at is None  # COUNT reached
        made = app.timers.history(type="t.all", limit=100).items
        assert sorted(t.key for t in made) == sorted(expected)
        assert all(t.status.value == "done" and t.attempts == 1 for t in made)
