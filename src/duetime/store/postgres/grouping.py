"""Group commit: calls that arrive while a commit is in flight share the next transaction.

A lone caller runs at once, in its own task, exactly as without grouping. Callers that come
while a commit is running wait in a queue; when it ends, everything queued goes out together in
one transaction (the batch is whatever gathered meanwhile: there is no timer and no added
latency), then the next batch, and so on. Each caller hears back only after the commit that
holds its write, or gets the error of its own write, or of the batch's commit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

C = TypeVar("C")
R = TypeVar("R")

Alone = Callable[[C], Awaitable[R]]
Together = Callable[[Sequence[C]], Awaitable[Sequence[R | BaseException]]]
"""Runs a batch in one transaction: each call's answer or its own error, in order; raises when
the whole batch failed (every caller gets that error)."""


class CommitQueue(Generic[C, R]):
    """One commit in flight at a time; the calls that queued meanwhile go in the next one."""

    def __init__(self, alone: Alone[C, R], together: Together[C, R]) -> None:
        self._alone = alone
        self._together = together
        self._queue: list[tuple[C, asyncio.Future[R]]] = []
        self._busy = False
        self._drain: asyncio.Task[None] | None = None

    async def run(self, call: C) -> R:
        """``call``'s answer, once the transaction that wrote it has committed."""
        if not self._busy:
            self._busy = True
            try:
                return await self._alone(call)
            finally:
                self._next()
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._queue.append((call, future))
        return await future  # cancelled: dropped if its batch has not started yet

    def _next(self) -> None:
        """After a commit: start the next batch if any caller is waiting, else go idle."""
        if self._queue:
            self._drain = asyncio.get_running_loop().create_task(self._run_batches())
        else:
            self._busy = False

    async def _run_batches(self) -> None:
        try:
            while self._queue:
                queued, self._queue = self._queue, []
                waiting = [(call, future) for call, future in queued if not future.done()]
                if waiting:
                    await self._run_batch(waiting)
        finally:
            self._busy = False
            self._drain = None

    async def _run_batch(self, batch: list[tuple[C, asyncio.Future[R]]]) -> None:
        calls = [call for call, _ in batch]
        outcomes: Sequence[R | BaseException]
        try:
            if len(calls) == 1:
                outcomes = [await self._alone(calls[0])]
            else:
                outcomes = await self._together(calls)
        except Exception as exc:
            outcomes = [exc] * len(calls)
        except BaseException as exc:  # cancelled (the loop is closing): tell the callers too
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            raise
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
