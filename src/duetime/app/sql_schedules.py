"""Schedule changes made from SQL, finished by a worker with the Python API's own code.

``add_schedule(...)``, ``pause_schedule(...)``, ``resume_schedule(...)`` and
``remove_schedule(...)`` in SQL change the schedules table in the caller's transaction and
record a request; what PostgreSQL cannot do as duetime does (parse a cron or an RRULE, resolve
a zone with its tz data, find the next occurrence) is left pending on it. Once the caller
commits, its wake-up reaches :class:`ScheduleChanges`, which checks and plans each such
schedule (:mod:`duetime.app.sql_planning`) and records the outcome on the request: applied, or
failed with the reason. Requests stored by the first version of the functions (a request
without the row written) are applied through an app on the request's namespace — the full
checks, the caps, revisions and the audit log, as if a Python caller had asked. Nothing is
lost: a request that fails is kept, failed, with its reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol

from duetime.app.schedules import Schedules
from duetime.app.sql_planning import plan_change
from duetime.clock import Clock
from duetime.config import Settings
from duetime.errors import DuetimeError
from duetime.model import OnConflict
from duetime.model.audit import Actor
from duetime.model.sql_requests import ScheduleChange
from duetime.schedules import ScheduleRequest
from duetime.services.base import Service
from duetime.store import Store
from duetime.store.parts import SqlAccessStore

log = logging.getLogger("duetime.sql")

PAGE = 100
RECHECK = 30.0
"""Seconds between two looks when no wake-up came (one missed while a worker was down)."""


class ScheduleApp(Protocol):
    """What applying a change needs of an app on the change's namespace."""

    @property
    def schedules(self) -> Schedules: ...

    @property
    def store(self) -> Store: ...

    @property
    def settings(self) -> Settings: ...

    async def close(self) -> None: ...


AppFor = Callable[[str], ScheduleApp]
"""An app on a namespace, sharing the worker's store (closing it leaves the store open)."""


async def apply_change(app: ScheduleApp, change: ScheduleChange) -> str:
    """Apply one change; what it did (DuetimeError, naming the field, when it is refused)."""
    actor = Actor(change.requested_by)
    if change.action == "define":
        request = ScheduleRequest.from_dict(change.request or {})
        on_conflict: OnConflict = "update"
        if change.on_conflict in ("keep", "error"):
            on_conflict = "keep" if change.on_conflict == "keep" else "error"
        ((action, _),) = await app.schedules.add_many(
            [request], on_conflict=on_conflict, actor=actor
        )
        return action
    if change.action == "pause":
        await app.schedules.pause(change.name, actor=actor)
        return "paused"
    if change.action == "resume":
        await app.schedules.resume(change.name, actor=actor)
        return "resumed"
    _, cancelled = await app.schedules.delete(change.name, actor=actor)
    return f"removed ({cancelled} pending occurrences cancelled)"


async def apply_pending(
    access: SqlAccessStore, app_for: AppFor, now: Callable[[], datetime]
) -> int:
    """Apply every pending change, oldest first; how many were recorded (applied or failed).
    A change that fails for a reason of its own (bad input, a cap, an unknown schedule) is
    recorded failed; any other error leaves it pending for the next round."""
    recorded = 0
    apps: dict[str, ScheduleApp] = {}
    try:
        while True:
            changes: Sequence[ScheduleChange] = await access.pending_schedule_requests(PAGE)
            for change in changes:
                app = apps.get(change.namespace)
                if app is None:
                    app = apps[change.namespace] = app_for(change.namespace)
                if change.schedule_version is not None:
                    outcome, failed = await plan_change(
                        change, app.store.schedules, access, app.settings, now()
                    )
                else:
                    try:
                        outcome, failed = await apply_change(app, change), False
                    except DuetimeError as exc:
                        outcome, failed = str(exc), True
                if await access.finish_schedule_request(change.id, failed, outcome, now()):
                    recorded += 1
            if len(changes) < PAGE:
                return recorded
    finally:
        for app in apps.values():
            await app.close()


class ScheduleChanges(Service):
    """Applies the schedule changes made from SQL: at start, at each wake-up, and every
    :data:`RECHECK` seconds."""

    name = "sql-schedule-changes"

    def __init__(self, store: Store, access: SqlAccessStore, clock: Clock, app_for: AppFor):
        self.store = store
        self.access = access
        self.clock = clock
        self.app_for = app_for
        self._wake = asyncio.Event()

    async def once(self) -> None:
        await apply_pending(self.access, self.app_for, self.clock.now)

    async def run(self, stop: asyncio.Event) -> None:
        self.store.add_wakeup_listener(self._on_wakeup)
        try:
            while not stop.is_set():
                self._wake.clear()
                try:
                    await self.once()
                except Exception:
                    log.exception("applying schedule changes made from SQL failed; retrying")
                await _first(stop, self._wake, RECHECK)
        finally:
            self.store.remove_wakeup_listener(self._on_wakeup)

    def _on_wakeup(self, earliest: datetime | None) -> None:
        if earliest is None:  # the SQL functions' hint: "re-read"
            self._wake.set()


async def _first(stop: asyncio.Event, wake: asyncio.Event, seconds: float) -> None:
    waits = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
    try:
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await waiting
