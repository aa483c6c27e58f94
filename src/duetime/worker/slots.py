"""The worker's slots, and who holds them: the one account the other parts report into.

A slot is taken by a running handler (the executor reports it), by a row being fanned out (the
fan-out reports it) and, past ``batch_size`` of them, by an outcome waiting for its write (the
completer reports it). ``concurrency`` bounds the handlers running at once. Their outcomes are
written in batches while more handlers run; once ``batch_size`` outcomes wait for their write,
every further one takes a slot until it is written. So a worker has at most ``concurrency +
batch_size`` timers started and not recorded — the most that run again if it dies — and a slow
store slows the handlers down instead of piling outcomes up in memory.

Whenever a slot may have come free the account sets two events, one for each part that waits
for one: :attr:`Slots.freed` for the starter (rows waiting for a slot start) and
:attr:`Slots.capacity` for the producer (the next claim may take more). Nobody calls back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from duetime.dispatch import Target
from duetime.model import Claimed, HeldRow
from duetime.worker.leases import Held
from duetime.worker.owner import LoopOwner


@dataclass(frozen=True, slots=True)
class Ready:
    """A claimed timer waiting for a free slot: where it goes, the instant it was claimed ahead
    of (None: start it at once), and its lease."""

    claimed: Claimed
    target: Target
    start_at: datetime | None
    held: Held


class Slots:
    """How many slots are taken, and by whom; :attr:`freed` and :attr:`capacity` are set
    whenever one may come free."""

    def __init__(self, concurrency: int, batch_size: int, owner: LoopOwner | None = None) -> None:
        self.concurrency = concurrency
        self.batch_size = batch_size
        self.capacity = asyncio.Event()
        """Set when a slot may have come free: the producer's to wait on and clear."""
        self.freed = asyncio.Event()
        """Set when a slot may have come free: the starter's to wait on and clear."""
        self._owner = owner or LoopOwner()
        # The rows running (a handler's attempt, or a fan-out's batch), by timer id: the task
        # that runs each, and the token of the claim it runs under (None: a fan-out's row).
        self._running: dict[int, asyncio.Task[None]] = {}
        self._tokens: dict[int, int | None] = {}
        self._unwritten = 0  # outcomes waiting for their write, or in a write under way

    def _free_up(self) -> None:
        self.freed.set()
        self.capacity.set()

    # -- what the parts report --------------------------------------------------------------
    def running(self, timer_id: int, token: int | None, task: asyncio.Task[None]) -> None:
        """A handler's attempt of ``timer_id`` (claimed under ``token``) runs in ``task``."""
        self._owner.check("Slots.running")
        self._tokens[timer_id] = token
        self._running[timer_id] = task

    def ended(self, timer_id: int) -> None:
        """The attempt of ``timer_id`` ended: its slot is free (its outcome may take one)."""
        self._owner.check("Slots.ended")
        self._running.pop(timer_id, None)
        self._tokens.pop(timer_id, None)
        self._free_up()

    def fanning(self, timer_ids: Iterable[int], task: asyncio.Task[None]) -> None:
        """The rows ``timer_ids`` are handed on to their destinations by ``task``."""
        self._owner.check("Slots.fanning")
        running = self._running
        for timer_id in timer_ids:
            running[timer_id] = task

    def fanned(self, timer_ids: Iterable[int]) -> None:
        """A fan-out's batch is written (or failed): its rows' slots are free."""
        self._owner.check("Slots.fanned")
        running = self._running
        for timer_id in timer_ids:
            running.pop(timer_id, None)
        self._free_up()

    def awaiting(self) -> None:
        """One more outcome waits for its write."""
        self._owner.check("Slots.awaiting")
        self._unwritten += 1

    def written(self, count: int) -> None:
        """``count`` outcomes were written (or dropped as taken over): they hold no slot now.
        Zero when a write ended without taking any (they wait for the next one)."""
        self._owner.check("Slots.written")
        self._unwritten -= count
        self._free_up()

    # -- what the worker asks ---------------------------------------------------------------
    def free(self) -> int:
        """Slots for handlers to start in (see the module's text)."""
        unwritten = self._unwritten - self.batch_size
        return self.concurrency - len(self._running) - max(0, unwritten)

    @property
    def in_flight(self) -> int:
        """Rows running: handlers' attempts and rows being fanned out."""
        return len(self._running)

    @property
    def unwritten(self) -> int:
        """Outcomes not yet written: waiting, or in a write under way."""
        return self._unwritten

    @property
    def busy(self) -> bool:
        """Whether anything holds a slot, so that one will come free."""
        return bool(self._running) or self._unwritten > 0

    def held(self) -> Iterator[HeldRow]:
        """The rows running, each with the token of the claim that took it."""
        tokens = self._tokens
        return ((timer_id, tokens.get(timer_id)) for timer_id in list(self._running))

    async def drain(self, grace: float | None) -> None:
        """Wait for the rows running; after ``grace`` seconds cancel them (they retry)."""
        if not self._running:
            return
        tasks = list(self._running.values())
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
