"""How long one request's database work may take: set by the API around a request, obeyed by
the stores.

Many tenants share one server and its database connections. A request that runs long (a huge
listing, a slow disk) must not hold a connection the others need, and a request that finds
every connection taken must hear so at once (503, try again) rather than queue behind them.
The API sets a :class:`Budget` for each request in a context variable; the stores read it for
every call made on that request's behalf (and on behalf of tasks it starts). Work outside a
request — workers, services, the CLI — has no budget and is never cut short.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Budget:
    """``statement_timeout``: seconds one statement may run before the database ends it;
    ``connection_wait``: seconds to wait for a connection (PostgreSQL's pool, SQLite's one
    connection thread) before giving up."""

    statement_timeout: float
    connection_wait: float


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
