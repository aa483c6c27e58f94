"""Outcomes of finished attempts, written back in batches: the worker's completer.

Each write is one transaction taking every outcome waiting when it starts, fenced by (timer id,
attempt, owner, claim token) in the store, and carrying the instant each attempt's handler began
(the executor tells it: :meth:`Completer.started`). A write the store cannot take while it
answers (not an outage) is split in halves until the one outcome it refuses is found: that
one is recorded dead with the store's reason, the others as they were. A write that failed
because the store is down keeps its outcomes and retries them; a write already sent is never
abandoned half-way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import operator
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime

from duetime.model import Finish, HeldRow, Outcome, Timer
from duetime.model.fast_records import make_done, set_fired_at
from duetime.worker import attempts
from duetime.worker.refusals import write_apart
from duetime.worker.shared import Shared
from duetime.worker.slots import Slots

log = logging.getLogger("duetime.worker")

WRITES_IN_FLIGHT = 2
"""Writes of outcomes a worker keeps under way at once (one transaction each).

An outcome write is the slowest step of a busy worker (it rewrites each row and waits for a
durable commit), and with one at a time the worker's outcomes queue behind it while the server
has a core to spare; with two, one write's commit overlaps the next one's work. Each write
takes every outcome waiting when it starts, so under light load there is still one a moment.
A second write starts beside one under way only once half a ``batch_size`` of outcomes wait:
a stream of small writes would cost the server more per outcome than it saves in waiting (when
the cores are busy anyway, it cost a tenth more CPU a job)."""
_DONE = Outcome.DONE
RETRY_PAUSE = 0.5
"""Seconds before outcomes whose write failed are tried again."""


class Completer:
    """Queues outcomes (:meth:`record`) and writes them in :data:`WRITES_IN_FLIGHT` lanes: the
    end of the line, where every attempt's outcome arrives (on the event loop)."""

    def __init__(self, shared: Shared, slots: Slots, batch_size: int) -> None:
        """``slots`` hears of every outcome waiting and written (past ``batch_size`` waiting,
        each holds a slot; a write that ends frees them)."""
        self.shared = shared
        self.batch_size = batch_size
        self._slots = slots
        self._owner = shared.owner
        self.outcomes: Counter[str] = Counter()
        """Outcomes recorded so far, by kind (this part's own count)."""
        self.lost = 0
        """Outcomes dropped because another node had taken their attempt over."""
        self._finishes: list[Finish] = []
        # When each running attempt's handler began, by (timer id, claim token): the outcome
        # records it (see started). Keyed by the claim too: the same timer may be held twice
        # by this node, under a claim the database forgot and under the one that replaced it.
        self._starts: dict[tuple[int, int | None], datetime] = {}
        self._writes: dict[asyncio.Future[set[int]], list[Finish]] = {}  # under way: outcomes
        self._waiting = asyncio.Event()
        self._write_turns = asyncio.Semaphore(WRITES_IN_FLIGHT)
        self._lanes: list[asyncio.Task[None]] = []

    # -- what the worker asks ---------------------------------------------------------------
    def started(self, timer: Timer, at: datetime) -> None:
        """The handler of ``timer``'s claimed attempt begins at ``at``: its outcome records it
        as the attempt's start, and as the timer's ``fired_at`` when no attempt before had a
        known start. The claimed ``timer`` gets that ``fired_at`` now, so the handler's event
        says when it truly fired, as the stored timer will."""
        self._owner.check("Completer.started")
        self._starts[timer.id, timer.claim_token] = at
        if timer.fired_at is None:
            set_fired_at(timer, at)

    def start_of(self, timer: Timer) -> datetime | None:
        """When the handler of ``timer``'s claimed attempt began (None: not yet)."""
        return self._starts.get((timer.id, timer.claim_token))

    def forget(self, timer: Timer) -> None:
        """The attempt's outcome is written elsewhere (a transactional handler's, with its
        writes): its start is no longer needed here."""
        self._owner.check("Completer.forget")
        self._starts.pop((timer.id, timer.claim_token), None)

    def record(self, timer: Timer, finish: Finish) -> None:
        """Queue an attempt's outcome for the next batched write, stamped with its claim's
        token (only that claim's attempt takes it) and the instant its handler began."""
        token = timer.claim_token
        started = self._starts.pop((timer.id, token), None)
        done = finish.outcome is _DONE and finish.error is None and finish.run_at is None
        if done and finish.traceback is None:
            # nearly every attempt: made through its slots (no frozen dataclass __init__)
            finish = make_done(finish.timer_id, finish.attempt, token, started)
        elif token is not None or started is not None:
            finish = Finish(
                finish.timer_id,
                finish.attempt,
                finish.outcome,
                finish.error,
                finish.run_at,
                finish.traceback,
                token,
                started,
            )
        self._queue(timer, finish)

    def _queue(self, timer: Timer, finish: Finish) -> None:
        self._owner.check("Completer.record")
        shared = self.shared
        self.outcomes[finish.outcome.value] += 1
        for observer in shared.observers:
            observer.finished(timer, finish.outcome)
        self._finishes.append(finish)
        self._slots.awaiting()
        self._waiting.set()

    def held(self) -> Iterator[HeldRow]:
        """The timers whose outcome is not yet written (their leases are still ours), each with
        its claim's token."""
        yield from ((f.timer_id, f.claim_token) for f in self._finishes)
        yield from ((f.timer_id, f.claim_token) for batch in self._writes.values() for f in batch)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self._lanes = [
            asyncio.create_task(self._lane(), name=f"duetime-flush-{lane}")
            for lane in range(WRITES_IN_FLIGHT)
        ]

    async def stop(self) -> None:
        """Stop the lanes (a write under way completes first), then write what is left."""
        for task in self._lanes:
            task.cancel()
        for task in self._lanes:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._lanes = []
        await self.flush()

    async def flush(self) -> None:
        """Write every finished attempt so far, and wait for the writes already under way."""
        while True:
            await self._write_waiting()
            if not self._writes:
                return
            await asyncio.wait(list(self._writes))  # a failed one puts its outcomes back

    # -- writing ----------------------------------------------------------------------------
    async def _lane(self) -> None:
        """One of :data:`WRITES_IN_FLIGHT` lanes writing outcomes as they come."""
        overlap_from = max(1, self.batch_size // 2)
        while True:
            await self._waiting.wait()
            if not self._worth_writing(overlap_from):
                self._waiting.clear()  # the write under way takes them when it ends
                continue
            await self._write_waiting(overlap_from)

    async def _write(self, batch: list[Finish]) -> set[int]:
        """Write ``batch``; one outcome the store refuses does not keep the others unwritten
        (see :mod:`~duetime.worker.refusals`): it is recorded dead with the store's reason."""
        return await write_apart(batch, self._finish, self._refused, operator.or_)

    async def _finish(self, batch: Sequence[Finish]) -> set[int]:
        shared = self.shared
        return await shared.store.finish(batch, shared.node_id, shared.clock.now())

    async def _refused(self, finish: Finish, exc: Exception) -> set[int]:
        log.error(
            "the store refused the outcome of timer id %d",
            finish.timer_id,
            exc_info=exc,
            extra={"attempt": finish.attempt, "node": self.shared.node_id},
        )
        return await self._finish([attempts.unrecordable(finish, exc)])

    def _worth_writing(self, overlap_from: int) -> bool:
        """Outcomes wait, and enough of them if another write is under way."""
        return len(self._finishes) >= (overlap_from if self._writes else 1)

    async def _write_waiting(self, overlap_from: int = 1) -> None:
        """Write the outcomes waiting, in one transaction a batch; keep them if it fails. While
        another write is under way, only ``overlap_from`` or more (that write takes the rest).

        A write already sent is never abandoned half-way: cancelling the caller waits for it
        (shielded), so shutting down cannot drop outcomes that were taken off the queue.
        """
        async with self._write_turns:
            while self._worth_writing(overlap_from):
                self._waiting.clear()
                batch, self._finishes = self._finishes, []
                slots = self._slots
                write = asyncio.ensure_future(self._write(batch))
                self._writes[write] = batch
                kept = False  # the batch went back to self._finishes, to be written again
                try:
                    lost: set[int] | None = await asyncio.shield(write)
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        await write
                    if not write.done() or write.exception() is not None:
                        self._finishes[:0] = batch
                        kept = True
                    raise
                except Exception:
                    log.exception("recording %d outcomes failed; will retry", len(batch))
                    self._finishes[:0] = batch
                    kept = True
                    lost = None
                finally:
                    del self._writes[write]  # written, or back in self._finishes
                    slots.written(0 if kept else len(batch))
                if lost is None:
                    self._waiting.set()
                    await asyncio.sleep(RETRY_PAUSE)
                    continue
                if lost:
                    self.lost += len(lost)
                    log.warning(
                        "%d attempts had been taken over by other nodes (lease expired); "
                        "their outcomes were not recorded",
                        len(lost),
                    )
