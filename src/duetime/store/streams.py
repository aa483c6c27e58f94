"""Reading a batch of timers as it is produced: in chunks, and again after a retry.

``AsyncApp.schedule_many`` hands the store a lazy stream that validates each request as it is
read, so a store can send one chunk while the next is still being validated.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Generic, TypeVar

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """``items`` in lists of ``size`` (the last one shorter), reading only as far as needed."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


class Replayable(Generic[T]):
    """An iterable read from its source once and from memory after that.

    A transaction the database rolls back (a deadlock) is run again, and must send the same
    items; the source may be a generator, which can be read only once. A pass that stopped
    early is resumed from the source by the next one.
    """

    def __init__(self, source: Iterable[T]) -> None:
        self._source = iter(source)
        self._read: list[T] = []

    def __iter__(self) -> Iterator[T]:
        yield from self._read
        for item in self._source:
            self._read.append(item)
            yield item
