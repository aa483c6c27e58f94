"""The deadline chaos check: schedules with deadlines under failing handlers and a stopped worker.

Schedules fire every second with a deadline of a few seconds. Their handler fails (dead, one
attempt) for every occurrence whose second is a multiple of ``fail_every``; partway through,
every worker is stopped for longer than the deadline, then new ones start (their deadline
watch finds what passed meanwhile). Once the schedules have ended and the watch has judged
through their last occurrence, the database is read back and checked:

* every occurrence not done by its deadline has exactly one miss and exactly one
  ``schedule.missed`` event (delivered to its handler), and no occurrence done in time has one;
* every injected failure and every occurrence whose deadline fell in the outage is among them.

Real time, real workers (each its own app and connections, as a process would have); run by
``bench/chaos.py --deadlines``.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from duetime import AsyncApp
from duetime.handlers import Event
from duetime.model import TimerFilter, iso
from duetime.model.deadlines import MISSED_EVENT
from duetime.schedules import occurrence_key, recurrence_of
from duetime.timemath.recurrence import occurrences_between
from duetime.worker import Worker

NAMESPACE = "deadlines"
TYPE = "chaos.tick"
OPEN_WITHIN = 60.0
"""Seconds a worker's app may take to open (a server out of connections fails the run)."""


@dataclass(frozen=True)
class DeadlineChaos:
    schedules: int = 4
    seconds: float = 40.0
    """How long the schedules fire."""
    deadline: float = 2.0
    fail_every: int = 5
    outage_at: float = 15.0
    """Seconds after the start at which every worker stops..."""
    outage: float = 6.0
    """...for this long (more than the deadline)."""
    workers: int = 2
    watch_interval: float = 1.0


@dataclass
class DeadlineReport:
    occurrences: int = 0
    done_in_time: int = 0
    missed: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    injected_failures: int = 0
    in_outage: int = 0
    events: int = 0
    delivered: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "ok": self.ok}


def _failing(nominal: datetime, every: int) -> bool:
    return int(nominal.timestamp()) % every == 0


async def run_deadline_chaos(url: str, config: DeadlineChaos) -> DeadlineReport:
    delivered: collections.Counter[str] = collections.Counter()

    def app_with_handlers() -> AsyncApp:
        app = AsyncApp(url, NAMESPACE)

        @app.handler(TYPE)
        async def tick(event: Event) -> None:
            if _failing(event.due_at, config.fail_every):
                raise RuntimeError("injected failure")

        @app.handler(MISSED_EVENT)
        async def missed(event: Event) -> None:
            delivered[event.key] += 1

        return app

    admin = AsyncApp(url, NAMESPACE)
    await admin.open()
    start = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    end = start + timedelta(seconds=config.seconds)
    for n in range(config.schedules):
        await admin.schedules.add(
            f"s{n}",
            TYPE,
            every=1,
            start_at=start,
            end_at=end,
            max_attempts=1,
            must_succeed_within=config.deadline,
        )
    began = time.monotonic()

    async def start_workers() -> list[tuple[AsyncApp, Worker, asyncio.Task[None]]]:
        running = []
        for i in range(config.workers):
            app = app_with_handlers()
            await asyncio.wait_for(app.open(), OPEN_WITHIN)  # a full server: fail, not hang
            worker = app.worker(node_id=f"deadline-chaos-{i}-{time.monotonic_ns()}")
            _quicker_watch(worker, config.watch_interval)
            running.append((app, worker, asyncio.create_task(worker.run())))
        return running

    async def stop_workers(running: list[tuple[AsyncApp, Worker, asyncio.Task[None]]]) -> None:
        for _, worker, _ in running:
            worker.stop()
        for app, _, task in running:
            await task
            await app.close()

    running = await start_workers()
    await asyncio.sleep(max(0.0, config.outage_at - (time.monotonic() - began)))
    await stop_workers(running)
    outage_from = datetime.now(UTC)  # once stopped: what they held ahead, they finished
    await asyncio.sleep(config.outage)
    outage_until = datetime.now(UTC)
    running = await start_workers()
    try:
        await _judged_through(admin, end, within=config.seconds + 120)
        await _events_done(admin, within=60)
    finally:
        await stop_workers(running)
    report = await _check(admin, config, outage_from, outage_until, delivered)
    await admin.close()
    return report


def _quicker_watch(worker: Worker, interval: float) -> None:
    """The deadline watch every ``interval`` (the default's few seconds would only slow the
    check down)."""
    from duetime.services.deadlines import DeadlineWatch

    for service in worker.services:
        if isinstance(service, DeadlineWatch):
            service.interval = interval


async def _judged_through(app: AsyncApp, end: datetime, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        watched = await app.store.deadlines.watched(NAMESPACE, 0, 1000)
        last = [s.watch.checked_through if s.watch else None for s in watched]
        if all(
            at is not None and at >= _last_occurrence(s, end)
            for s, at in zip(watched, last, strict=True)
        ):
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the deadline watch did not judge every occurrence in time")


def _last_occurrence(schedule: Any, end: datetime) -> datetime:
    instants = list(occurrences_between(recurrence_of(schedule), schedule.created_at, end))
    return instants[-1]


async def _events_done(app: AsyncApp, within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        page = await app.store.list_timers(NAMESPACE, TimerFilter(type=MISSED_EVENT), None, 10000)
        if all(t.status.value == "done" for t in page.items):
            return
        await asyncio.sleep(0.5)
    raise TimeoutError("the schedule.missed events were not all delivered in time")


async def _check(
    app: AsyncApp,
    config: DeadlineChaos,
    outage_from: datetime,
    outage_until: datetime,
    delivered: collections.Counter[str],
) -> DeadlineReport:
    report = DeadlineReport()
    within = timedelta(seconds=config.deadline)
    events_page = await app.store.list_timers(
        NAMESPACE, TimerFilter(type=MISSED_EVENT), None, 10000
    )
    events = collections.Counter(t.key for t in events_page.items)
    report.events = sum(events.values())
    report.delivered = sum(1 for key in events if delivered[key] >= 1)
    reasons: collections.Counter[str] = collections.Counter()
    for schedule in await app.store.deadlines.watched(NAMESPACE, 0, 1000):
        assert schedule.end_at is not None
        instants = list(
            occurrences_between(recurrence_of(schedule), schedule.created_at, schedule.end_at)
        )
        keys = [occurrence_key(schedule.name, t) for t in instants]
        facts = await app.store.deadlines.occurrences(NAMESPACE, keys)
        misses = {
            m.nominal_at: m
            for m in await app.store.deadlines.misses(NAMESPACE, schedule.id, 100_000)
        }
        for t, key in zip(instants, keys, strict=True):
            report.occurrences += 1
            fact = facts.get(key)
            in_time = (
                fact is not None
                and fact.status == "done"
                and fact.completed_at is not None
                and fact.completed_at <= t + within
            )
            event_key = f"{MISSED_EVENT}:{schedule.name}:{iso(t)}"
            injected = _failing(t, config.fail_every)
            outage = outage_from <= t and t + within <= outage_until  # no worker ran it
            report.injected_failures += injected
            report.in_outage += outage
            if in_time:
                report.done_in_time += 1
                if t in misses or events[event_key]:
                    report.problems.append(f"{key}: done in time, yet missed")
                if injected or outage:
                    report.problems.append(f"{key}: succeeded, though failed or unrun")
                continue
            miss = misses.get(t)
            if miss is None:
                report.problems.append(f"{key}: not done in time, yet no miss recorded")
                continue
            report.missed += 1
            reasons[miss.reason] += 1
            if events[event_key] != 1:
                report.problems.append(f"{key}: {events[event_key]} events, not one")
            elif delivered[event_key] < 1:
                report.problems.append(f"{key}: its event was never delivered")
            if injected and miss.reason != "dead":
                report.problems.append(f"{key}: injected failure missed as {miss.reason}")
    report.reasons = dict(reasons)
    if report.events != report.missed:
        report.problems.append(f"{report.events} events for {report.missed} misses")
    if not report.injected_failures or not report.in_outage:
        report.problems.append("the run injected no failure or had no outage: too short")
    return report
