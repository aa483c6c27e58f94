"""Each part of the app, made alone on a real store with nothing but an ``AppContext``: it opens
the store itself on first use, writes its operator actions to the audit part it is handed, and
reads the context at each call (a clock swapped in reaches every part). Both stores."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.events import Events
from duetime.app.limits import Limits
from duetime.app.namespaces import Namespaces
from duetime.app.schedules import Schedules
from duetime.app.timers import Timers
from duetime.app.tokens import Tokens
from duetime.clock import FrozenClock
from duetime.config import Settings
from duetime.errors import Conflict, NotFound
from duetime.model import Status
from duetime.model.audit import Actor, AuditEntry
from duetime.store import create_store

START = datetime(2025, 3, 3, 10, 30, tzinfo=UTC)
OPS = Actor("ops", "cli")


@pytest.fixture
def context(store_url: str, runner: asyncio.Runner) -> Iterator[AppContext]:
    """A context on a store no one has opened yet: the first part used opens it."""
    store = create_store(store_url)
    yield AppContext(store, FrozenClock(START), Settings(), "parts", actor=OPS)
    runner.run(store.close())


def _actions(entries: list[AuditEntry]) -> list[str]:
    return [entry.action for entry in entries]


async def test_timers_alone_schedule_read_and_act_audited(context: AppContext) -> None:
    audit = Audit(context)
    timers = Timers(context, audit)
    assert not context.opened
    created = await timers.schedule("invoice.due", {"n": 1}, delay="PT1H", key="inv-1")
    assert context.opened  # the part opened the store (and created the namespace) itself
    assert created.action == "created"
    assert created.timer.due_at == START + timedelta(hours=1)
    assert (await timers.get("inv-1")).payload == {"n": 1}
    assert (await timers.counts())[Status.SCHEDULED] == 1
    assert [t.key for t in (await timers.history(type="invoice.*")).items] == ["inv-1"]
    edited = await timers.edit("inv-1", {"delay": "PT2H"})
    assert edited.due_at == START + timedelta(hours=2)
    assert (await timers.cancel("inv-1")).status is Status.CANCELLED
    with pytest.raises(Conflict):
        await timers.run_now("inv-1")
    assert (await timers.delete("inv-1")).key == "inv-1"
    with pytest.raises(NotFound):
        await timers.get("inv-1")
    log = await audit.log()
    assert _actions(log.items) == ["delete", "cancel", "edit"]
    assert {entry.actor for entry in log.items} == {"cli:ops"}


async def test_a_clock_swapped_into_the_context_reaches_the_parts(context: AppContext) -> None:
    timers = Timers(context, Audit(context))
    await timers.schedule("a", delay=60, key="one")
    context.clock = FrozenClock(START + timedelta(days=1))
    later = await timers.schedule("a", delay=60, key="two")
    assert later.timer.due_at == START + timedelta(days=1, seconds=60)


async def test_events_alone_emit_through_the_timers_it_is_handed(context: AppContext) -> None:
    events = Events(context, Timers(context, Audit(context)))
    emitted = await events.emit("order.paid", {"id": 7}, key="o-7")
    assert emitted.timer.due_at == START
    again = await events.emit("order.paid", {"id": 8}, key="o-7")
    assert again.action == "kept"
    assert await events.types("order") == ["order.paid"]
    assert await events.unsubscribed() == [("order.paid", 1)]


async def test_schedules_alone_add_change_pause_and_run_next(context: AppContext) -> None:
    audit = Audit(context)
    schedules = Schedules(context, audit)
    action, schedule = await schedules.add("hourly", "report", cron="0 * * * *")
    assert action == "created"
    assert schedule.next_at == datetime(2025, 3, 3, 11, tzinfo=UTC)
    changed = await schedules.update("hourly", cron="30 * * * *")
    assert changed.next_at == datetime(2025, 3, 3, 11, 30, tzinfo=UTC)
    timer = await schedules.run_next_now("hourly")
    assert timer.key == "schedule:hourly:2025-03-03T11:30:00Z"
    assert (await schedules.pause("hourly")).active is False
    assert [s.name for s in (await schedules.list(active=False)).items] == ["hourly"]
    with pytest.raises(Conflict):
        await schedules.run_next_now("hourly")
    _, cancelled = await schedules.delete("hourly")
    with pytest.raises(NotFound):
        await schedules.get("hourly")
    assert cancelled == 0  # the occurrence run now is due already, not pending
    assert _actions((await audit.log()).items) == [
        "schedule_delete",
        "schedule_pause",
        "schedule_run_next",
        "schedule_change",
        "schedule_define",
    ]


async def test_limits_alone_set_pause_resume_and_list(context: AppContext) -> None:
    audit = Audit(context)
    limits = Limits(context, audit)
    rule = await limits.set("email.*", concurrency=2, rate="10/s")
    assert rule.concurrency == 2
    await limits.pause("sms.*")
    assert sorted(status.rule.pattern for status in await limits.list()) == ["email.*", "sms.*"]
    await limits.resume("sms.*")
    await limits.remove("email.*")
    assert (await limits.page()).items == []
    assert _actions((await audit.log()).items) == [
        "limit_remove",
        "resume",
        "pause",
        "limit_set",
    ]


async def test_tokens_and_namespaces_alone_serve_every_namespace(context: AppContext) -> None:
    audit = Audit(context)
    namespaces = Namespaces(context, audit)
    tokens = Tokens(context, audit)
    assert await namespaces.add("billing") is True
    assert await namespaces.add("billing") is False
    assert "parts" not in await namespaces.list()  # reading them does not create the app's own
    issued = await tokens.issue(["billing", "shipping"], name="robot")
    assert [info.name for info in await tokens.list()] == ["robot"]
    assert (await namespaces.page(limit=10)).items == ["billing", "shipping"]
    revoked = await tokens.revoke(issued.info.id)
    assert revoked.revoked_at is not None
    assert (await tokens.page(include_revoked=True)).items[0].id == issued.info.id
