"""The app's shape: parts reached as attributes, a blocking twin for every part's method, the
old spellings kept working with a warning naming the new one, and no object of the facade over
the size a reader can hold (a class counted with every base of the package it is made of)."""

from __future__ import annotations

import asyncio
import inspect
from datetime import UTC, datetime
from pathlib import Path

import pytest

from duetime import App, AsyncApp
from duetime.app import blocking
from duetime.app.audit import Audit
from duetime.app.events import Events
from duetime.app.keys import Keys
from duetime.app.limits import Limits
from duetime.app.namespaces import Namespaces
from duetime.app.schedules import Schedules
from duetime.app.sql_access import Sql
from duetime.app.timers import Timers
from duetime.app.tokens import Tokens
from duetime.clock import FrozenClock

ROOT = Path(__file__).resolve().parents[2]
PARTS = {
    "timers": (Timers, blocking.BlockingTimers),
    "events": (Events, blocking.BlockingEvents),
    "schedules": (Schedules, blocking.BlockingSchedules),
    "limits": (Limits, blocking.BlockingLimits),
    "tokens": (Tokens, blocking.BlockingTokens),
    "audit": (Audit, blocking.BlockingAudit),
    "namespaces": (Namespaces, blocking.BlockingNamespaces),
    "sql": (Sql, blocking.BlockingSql),
    "keys": (Keys, blocking.BlockingKeys),
}
START = datetime(2025, 3, 3, 10, 30, tzinfo=UTC)


SERVICES = {"materializer", "deadline_watch"}
"""Methods that build a service (it has its own ``tick``/``run``): no blocking twin to wrap."""


def _public(cls: type) -> set[str]:
    return {
        name
        for name, value in inspect.getmembers(cls)
        if not name.startswith("_") and callable(value) and name not in SERVICES
    }


@pytest.mark.parametrize("name", sorted(PARTS))
def test_every_method_of_a_part_has_its_blocking_twin(name: str) -> None:
    part, twin = PARTS[name]
    assert _public(part) == _public(twin) - {"core"}
    for method in _public(part):
        assert getattr(twin, method).__doc__ == getattr(part, method).__doc__, method


def _moved(cls: type) -> dict[str, str]:
    return {
        name: value.moved_to
        for name, value in vars(cls).items()
        if getattr(value, "moved_to", None) is not None
    }


@pytest.mark.parametrize("cls", [AsyncApp, App])
def test_each_old_spelling_names_a_method_of_a_part(cls: type) -> None:
    moved = _moved(cls)
    assert len(moved) >= 30
    for old, new in moved.items():
        part, method = new.split(".")
        assert callable(getattr(PARTS[part][0], method)), (old, new)
        assert inspect.signature(getattr(cls, old)) == inspect.signature(
            getattr(PARTS[part][0], method)
        )


def test_the_facade_keeps_the_four_verbs_and_its_wiring_undeprecated() -> None:
    kept = {
        name
        for name in dir(AsyncApp)
        if not name.startswith("_") and callable(getattr(AsyncApp, name))
    } - set(_moved(AsyncApp))
    assert {"schedule", "cancel", "get", "emit"} <= kept
    assert kept <= {
        "schedule", "cancel", "get", "emit", "open", "close", "handler", "route",
        "add_destination", "check_routes", "worker", "run_worker", "tick", "maintain",
        "migrate", "nodes", "producer_id",
    }  # fmt: skip


def test_old_spellings_work_and_warn_with_the_new_one(tmp_path: Path) -> None:
    async def main() -> None:
        app = AsyncApp(f"sqlite:///{tmp_path / 'a.db'}", clock=FrozenClock(START))
        async with app:
            await app.schedule("report", key="r", delay=60)
            with pytest.warns(DeprecationWarning, match=r"app\.history\(\) .* app\.timers"):
                page = await app.history()
            assert [timer.key for timer in page.items] == ["r"]
            with pytest.warns(DeprecationWarning, match=r"app\.set_limit\(\).*limits\.set\(\)"):
                await app.set_limit("report", concurrency=1)
            with pytest.warns(DeprecationWarning, match=r"app\.limits\(\).*limits\.list\(\)"):
                assert [s.rule.pattern for s in await app.limits()] == ["report"]
            with pytest.warns(DeprecationWarning, match=r"app\.events\(\).*events\.log\(\)"):
                assert (await app.events()).items == []
            with pytest.warns(DeprecationWarning, match=r"namespaces\.list\(\)"):
                assert "default" in await app.namespaces()

    asyncio.run(main())


def test_the_blocking_app_reaches_the_same_parts(tmp_path: Path) -> None:
    with App(f"sqlite:///{tmp_path / 'b.db'}", clock=FrozenClock(START)) as app:
        app.schedule("report", key="r", delay=60)
        assert app.timers.get("r").type == "report"
        app.schedules.add("hourly", "report", cron="0 * * * *")
        with pytest.warns(DeprecationWarning, match=r"app\.get_schedule\(\).*schedules\.get"):
            assert app.get_schedule("hourly").name == "hourly"
        with pytest.warns(DeprecationWarning, match=r"limits\.list\(\)"):
            assert app.limits() == []
