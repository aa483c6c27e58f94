"""Finding the one row of a batch the store refuses, so it does not keep the others unwritten.

A batched write (outcomes, fan-outs) is one transaction: a single row the store refuses while it
answers (a value it cannot take) would fail every row with it, again at each retry. So a refused
batch is split in halves, each written on its own, until the refused row is alone; that row is
then dealt with by itself and the others are written as usual. A store that is down
(:class:`~duetime.errors.StoreUnavailable`) is not a refusal: every row of the batch waits for
it to come back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from duetime.errors import StoreUnavailable

T = TypeVar("T")
R = TypeVar("R")


async def write_apart(
    rows: Sequence[T],
    write: Callable[[Sequence[T]], Awaitable[R]],
    refused: Callable[[T, Exception], Awaitable[R]],
    merge: Callable[[R, R], R],
) -> R:
    """``write(rows)``; if the store refuses it, the halves written apart (first half first)
    and their results merged, down to the one row it refuses: ``refused(row, error)`` says what
    becomes of that one. ``rows`` is never empty."""
    try:
        return await write(rows)
    except StoreUnavailable:
        raise  # an outage: every row waits for the store to come back
    except Exception as exc:
        if len(rows) < 2:
            (row,) = rows
            return await refused(row, exc)
        half = len(rows) // 2
        first = await write_apart(rows[:half], write, refused, merge)
        return merge(first, await write_apart(rows[half:], write, refused, merge))
