"""How long one request's database work may take: set by the API around a request, obeyed by
the stores.

Many tenants share one server and its database connections. A request that runs long (a huge
listing, a slow disk) must not hold a connection the others need, and a request that finds
every connection taken must hear so at once (503, try again) rather than queue behind them.
The API sets a :class:`Budget` for each request in a context variable; the stores read it for
every call made on that request's behalf (and on behalf of tasks it starts). Work outside a
request — workers, services, the CLI — has no budget and is never cut short.

A database ends a statement that runs too long, but not the Python work around it (decoding
rows, matching them): a reader that spends its budget there holds its connection all the same.
So the store also sets the instant the work must end by (:func:`ending_at`), and loops over
rows go through :func:`checked`, which raises :class:`Overrun` past it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Budget:
    """``statement_timeout``: seconds one statement may run before the database ends it;
    ``connection_wait``: seconds to wait for a connection (PostgreSQL's pool, SQLite's one
    connection thread) before giving up; ``page_bytes``: about how many bytes of rows one
    listing page decodes before it ends early, with its cursor (None: its rows alone bound it)."""

    statement_timeout: float
    connection_wait: float
    page_bytes: int | None = None


_current: ContextVar[Budget | None] = ContextVar("duetime_budget", default=None)


def current() -> Budget | None:
    """The budget of the request this code runs for (None: not a request's)."""
    return _current.get()


@contextlib.contextmanager
def within(budget: Budget | None) -> Iterator[None]:
    """Run the block's database work under ``budget``."""
    token = _current.set(budget)
    try:
        yield
    finally:
        _current.reset(token)


class Overrun(Exception):
    """The request's work ran past its deadline in Python; the store answers it as busy."""


_deadline: ContextVar[float | None] = ContextVar("duetime_deadline", default=None)

CHECK_EVERY = 256
"""Items between two looks at the clock: a look costs far less than the items between."""


@contextlib.contextmanager
def ending_at(deadline: float) -> Iterator[None]:
    """Within the block, :func:`checked` loops end (:class:`Overrun`) once ``time.monotonic()``
    passes ``deadline``."""
    token = _deadline.set(deadline)
    try:
        yield
    finally:
        _deadline.reset(token)


def checked(items: Iterable[T]) -> Iterator[T]:
    """``items``, raising :class:`Overrun` once the deadline of :func:`ending_at` has passed
    (looked at every :data:`CHECK_EVERY` items); without a deadline, ``items`` unchanged."""
    deadline = _deadline.get()
    if deadline is None:
        yield from items
        return
    for n, item in enumerate(items):
        if n % CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise Overrun(f"past the deadline by {time.monotonic() - deadline:.3f} s")
        yield item
