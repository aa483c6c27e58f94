"""The deadline watch: finds the occurrences of schedules not done by their deadline.

Every ``interval`` it walks the namespace's schedules with ``must_succeed_within`` or
``pause_after_failures`` (a partial index holds only those), judges each occurrence whose
deadline has passed on the database's clock (the clock handed in), and writes each
schedule's verdicts fenced by where the watch left it (a page's schedules in one transaction):
a miss is a row unique by (schedule, nominal instant) written with its ``schedule.missed``
event, so two workers, a retried round or a restart never raise it twice, and one whose
deadline passed while nothing ran is found by the first round after. A schedule past
``pause_after_failures`` failed occurrences in a row is paused, with an audit entry and a
``schedule.paused`` event.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from duetime.clock import Clock
from duetime.model.deadlines import Miss
from duetime.schedules import occurrence_key
from duetime.services.base import Periodic
from duetime.services.watch_plan import candidates, plan_step
from duetime.store.protocol import Store

log = logging.getLogger("duetime.deadlines")

INTERVAL = 5.0
"""Seconds between rounds: a miss is raised at most this long after its deadline."""
PAGE = 200
"""Watched schedules read at once."""


@dataclass
class WatchRound:
    """What one round did."""

    watched: int = 0
    judged: int = 0
    """Schedules whose verdicts were written."""
    missed: int = 0
    """Misses newly recorded (each with its event)."""
    paused: int = 0
    fenced: int = 0
    """Steps another round had written first (nothing written here)."""


class DeadlineWatch(Periodic):
    """The watch of one namespace's schedule deadlines."""

    name = "deadlines"
    failure = "watching the schedules' deadlines failed"
    retry_after = 1.0

    def __init__(
        self,
        store: Store,
        clock: Clock,
        namespace: str,
        *,
        interval: float = INTERVAL,
        max_attempts: int = 20,
    ) -> None:
        super().__init__(interval)
        self.store = store
        self.clock = clock
        self.namespace = namespace
        self.max_attempts = max_attempts
        """Of the events it raises."""

    async def step(self) -> None:
        await self.tick()

    async def once(self) -> None:
        await self.tick()

    async def tick(self) -> WatchRound:
        """One round over every watched schedule of the namespace."""
        done = WatchRound()
        parts = self.store.deadlines
        after_id = 0
        while True:
            page = await parts.watched(self.namespace, after_id, PAGE)
            if not page:
                return done
            after_id = page[-1].id
            now = self.clock.now()
            due = [(s, candidates(s, now)) for s in page]
            keys = [occurrence_key(s.name, i) for s, instants in due for i in instants]
            facts = await parts.occurrences(self.namespace, keys) if keys else {}
            done.watched += len(page)
            planned = [plan_step(s, instants, facts, now, self.max_attempts) for s, instants in due]
            steps = [step for step in planned if step is not None]
            results = await parts.record(steps, now) if steps else []
            for step, recorded in zip(steps, results, strict=True):
                if recorded is None:
                    done.fenced += 1
                    continue
                done.judged += 1
                done.missed += len(recorded)
                done.paused += int(step.pause)
                _log(step.name, recorded, step.pause)
            if len(page) < PAGE:
                return done


def _log(name: str, recorded: list[Miss], paused: bool) -> None:
    """Each miss at debug level (an outage's may be thousands), the schedule's count and latest
    at warning, a pause at warning."""
    for miss in recorded:
        log.debug("schedule %s missed %s (%s)", name, miss.nominal_at.isoformat(), miss.reason)
    if recorded:
        latest = recorded[-1]
        log.warning(
            "schedule %s missed %d occurrence(s) by their deadline, the latest %s (%s)",
            name,
            len(recorded),
            latest.nominal_at.isoformat(),
            latest.reason,
        )
    if paused:
        log.warning("schedule %s paused: too many failed occurrences in a row", name)
