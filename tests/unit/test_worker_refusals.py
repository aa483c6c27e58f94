"""Finding the one row of a batch the store refuses: the halving both batched writes share."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Sequence

import pytest

from duetime.errors import StoreUnavailable
from duetime.worker.refusals import write_apart


class Refused(Exception):
    pass


class FakeStore:
    """Writes a batch unless it holds a refused row, or the store is down."""

    def __init__(self, refused: frozenset[int] = frozenset(), down: bool = False) -> None:
        self.refused = refused
        self.down = down
        self.batches: list[list[int]] = []
        self.alone: list[tuple[int, str]] = []

    async def write(self, rows: Sequence[int]) -> set[int]:
        self.batches.append(list(rows))
        if self.down:
            raise StoreUnavailable("down")
        bad = self.refused.intersection(rows)
        if bad:
            raise Refused(f"row {min(bad)}")
        return {row for row in rows if row % 10 == 0}  # say: rows taken over meanwhile

    async def on_refused(self, row: int, error: Exception) -> set[int]:
        self.alone.append((row, str(error)))
        return {-row}


def written(store: FakeStore, rows: list[int]) -> set[int]:
    return asyncio.run(write_apart(rows, store.write, store.on_refused, operator.or_))


def test_a_batch_the_store_takes_is_written_once() -> None:
    store = FakeStore()
    assert written(store, [1, 2, 10]) == {10}
    assert store.batches == [[1, 2, 10]]
    assert store.alone == []


def test_the_refused_row_is_found_by_halves_and_the_others_written() -> None:
    store = FakeStore(refused=frozenset({6}))
    rows = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert written(store, rows) == {10, -6}
    assert store.alone == [(6, "row 6")]
    assert store.batches == [
        rows,
        [1, 2, 3, 4, 5],  # first half first
        [6, 7, 8, 9, 10],
        [6, 7],
        [6],
        [7],
        [8, 9, 10],
    ]
    written_rows = sorted(row for batch in store.batches[1:] if 6 not in batch for row in batch)
    assert written_rows == [1, 2, 3, 4, 5, 7, 8, 9, 10]  # each other row written exactly once


def test_every_refused_row_is_dealt_with_alone() -> None:
    store = FakeStore(refused=frozenset({1, 4}))
    assert written(store, [1, 2, 3, 4]) == {-1, -4}
    assert store.alone == [(1, "row 1"), (4, "row 4")]


def test_a_single_refused_row_is_dealt_with_at_once() -> None:
    store = FakeStore(refused=frozenset({3}))
    assert written(store, [3]) == {-3}
    assert store.batches == [[3]]


def test_an_outage_is_no_refusal_every_row_waits() -> None:
    store = FakeStore(refused=frozenset({2}), down=True)
    with pytest.raises(StoreUnavailable):
        written(store, [1, 2, 3, 4])
    assert store.batches == [[1, 2, 3, 4]]  # not split
    assert store.alone == []


def test_results_of_the_halves_are_merged_first_half_first() -> None:
    order: list[str] = []

    async def write(rows: Sequence[str]) -> list[str]:
        if len(rows) > 1:
            raise Refused("split me")
        return list(rows)

    async def refused(row: str, error: Exception) -> list[str]:
        raise AssertionError("no row is refused alone")

    def merge(first: list[str], second: list[str]) -> list[str]:
        order.append(f"{first}+{second}")
        return first + second

    result = asyncio.run(write_apart(["a", "b", "c"], write, refused, merge))
    assert result == ["a", "b", "c"]
    assert order == ["['b']+['c']", "['a']+['b', 'c']"]
