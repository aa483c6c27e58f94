"""Reading a batch in chunks, and again after a retry (duetime.store.streams)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from duetime.store.streams import Replayable, chunked


def counting(n: int, reads: list[int]) -> Iterator[int]:
    for i in range(n):
        reads.append(i)
        yield i


def test_chunked_reads_only_as_far_as_it_is_asked() -> None:
    reads: list[int] = []
    chunks = chunked(counting(7, reads), 3)
    assert next(chunks) == [0, 1, 2]
    assert reads == [0, 1, 2]
    assert list(chunks) == [[3, 4, 5], [6]]
    assert list(chunked([], 3)) == []


def test_a_replay_reads_the_source_once() -> None:
    reads: list[int] = []
    items = Replayable(counting(5, reads))
    first = iter(items)
    assert [next(first), next(first)] == [0, 1]  # a pass that stopped early (a rollback)
    assert list(items) == [0, 1, 2, 3, 4]  # the retry: remembered, then the rest
    assert list(items) == [0, 1, 2, 3, 4]
    assert reads == [0, 1, 2, 3, 4]


def test_a_source_that_raised_is_not_read_again() -> None:
    def failing() -> Iterator[int]:
        yield 1
        raise ValueError("bad item")

    items = Replayable(failing())
    with pytest.raises(ValueError, match="bad item"):
        list(items)
    assert list(items) == [1]  # a generator that raised is finished: nothing more to read
