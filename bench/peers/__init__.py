"""The systems bench/pg_bench.py compares, each behind the same small interface.

Every system gets its own database (dropped and created again for each scenario), enqueues
through its own batch API, and works with its own normal worker running a no-op handler. The
handler calls ``record(due)`` when the bench wants lateness (``due`` is the epoch seconds the
job was due, read from its payload) and counts the job in a shared counter the parent watches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import ClassVar

Record = Callable[[float | None], None]
"""Called by the handler as it starts, with the payload's due time (None: due at enqueue)."""

JOB_TYPE = "bench.noop"
"""duetime's event type, pgqueuer's entrypoint, procrastinate's task name."""

ENQUEUE_BATCH = 1000


class System:
    """One system under test. Subclasses fill in the SQL and the three coroutines."""

    name: ClassVar[str]
    label: ClassVar[str]
    remaining_sql: ClassVar[str]
    """count(*) of the jobs not yet finished (scheduled, running, retrying …)."""
    uses_postgres: ClassVar[bool] = True
    """False for a system on another store (Celery on Redis): no database of its own."""

    def __init__(self, base: str) -> None:
        self.base = base.rstrip("/")
        """``postgresql://user@host:port`` with no database."""

    def conninfo(self, db: str) -> str:
        return f"{self.base}/{db}"

    def describe(self) -> str:
        """Version and configuration, for the report header."""
        return self.label

    async def install(self, db: str) -> None:
        """Create the system's tables in the (new, empty) database ``db``."""
        raise NotImplementedError

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        """Store one job per item (due at that epoch second, or now for None), in batches."""
        raise NotImplementedError

    async def run_worker(
        self,
        db: str,
        *,
        concurrency: int,
        batch_size: int,
        record: Record,
        ready: Callable[[], None],
        go: asyncio.Event,
        stop: asyncio.Event,
    ) -> None:
        """Connect, call ``ready()``, wait for ``go``, work until ``stop``, shut down cleanly."""
        raise NotImplementedError

    def recorded_elsewhere(self) -> list[float]:
        """Lateness (ms) recorded by a worker process the system runs on its own (Celery's
        ``celery worker``), read after ``run_worker`` returned; [] when ``record`` saw it all."""
        return []


def payload_due(due: float | None) -> dict[str, float | None]:
    return {"due": due}


def chunks(
    items: Sequence[float | None], size: int = ENQUEUE_BATCH
) -> list[Sequence[float | None]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def load(name: str) -> type[System]:
    """The System class for a name (imports only that peer's package)."""
    if name == "duetime":
        from peers.duetime_peer import Duetime

        return Duetime
    if name == "duetime_metrics":
        from peers.duetime_peer import DuetimeMetrics

        return DuetimeMetrics
    if name == "duetime_tracing":
        from peers.duetime_peer import DuetimeTracing

        return DuetimeTracing
    if name == "duetime_sampled":
        from peers.duetime_peer import DuetimeSampled

        return DuetimeSampled
    if name == "duetime_sealed":
        from peers.duetime_peer import DuetimeSealed

        return DuetimeSealed
    if name == "pgqueuer":
        from peers.pgqueuer_peer import PgQueuerSystem

        return PgQueuerSystem
    if name == "procrastinate":
        from peers.procrastinate_peer import Procrastinate

        return Procrastinate
    if name == "oban":
        from peers.oban_peer import ObanSystem

        return ObanSystem
    if name == "celery":
        from peers.celery_peer import Celery

        return Celery
    if name == "raw":
        from peers.raw_peer import RawSql

        return RawSql
    raise ValueError(f"unknown system {name!r}")


SYSTEMS = (
    "duetime",
    "duetime_metrics",
    "duetime_tracing",
    "duetime_sampled",
    "duetime_sealed",
    "pgqueuer",
    "procrastinate",
    "oban",
    "raw",
    "celery",
)
PEERS = ("pgqueuer", "procrastinate", "oban", "celery")
VARIANTS = ("duetime_metrics", "duetime_tracing", "duetime_sampled", "duetime_sealed")
"""duetime with its observability on (``--metrics``, ``--tracing``) or its payloads sealed at
rest (``--sealed``): run only when asked."""
PACKAGES = {"pgqueuer": "pgqueuer", "procrastinate": "procrastinate", "oban": "oban"}
"""The package a peer needs (oban needs Python 3.12+): without it, not run by default."""
ONLY_ASKED = ("celery", *VARIANTS)
"""Run only when named in ``--only`` (or, for the variants, asked by a flag): Celery needs Redis,
and is compared for lateness only."""
STORE_SCENARIOS = {"celery": ("lateness", "idle"), "raw": ("mass", "immediate", "enqueue")}
"""The scenarios a system takes part in, when not all of them."""


def default_systems() -> list[str]:
    """The systems a run compares when ``--only`` is not given: those whose package is here."""
    from importlib.util import find_spec

    return [
        s
        for s in SYSTEMS
        if s not in ONLY_ASKED and (s not in PACKAGES or find_spec(PACKAGES[s]) is not None)
    ]
