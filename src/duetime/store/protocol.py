"""The Store protocol: the one seam between duetime's logic and a database.

Every backend (SQLite, PostgreSQL) implements it with SQL kept in its own ``.sql`` files; the
worker, app and services talk only to this protocol. What a store keeps besides timers and
nodes — schedules, history, API tokens, shared transactions — are its parts
(:mod:`duetime.store.parts`), reached as attributes: ``store.schedules``, ``store.history``…

Write paths are named after the state transitions they make (``claim_due``, ``finish``,
``cancel``, ``rescue``), and every write that concerns a claimed attempt is fenced by ``(timer
id, attempt number, owner node)`` so a node that lost its lease cannot overwrite the attempt
that replaced it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Protocol

from duetime.model import (
    Attempt,
    BulkAction,
    Claimed,
    ClaimFilter,
    DeadType,
    FanOut,
    Finish,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.finding import TimerSort
from duetime.store.listeners import WakeupListener
from duetime.store.node_registry import ClockRead as ClockRead
from duetime.store.node_registry import ClockSampler as ClockSampler
from duetime.store.node_registry import NodeRegistry
from duetime.store.parts import (
    AuditStore,
    HistoryStore,
    LimitStore,
    OutboxStore,
    ScheduleStore,
    SqlAccessStore,
    TokenStore,
    TransactionEffect,
    TransactionStore,
)
from duetime.support.sealing import Sealing


class Store(NodeRegistry, Protocol):
    """Durable storage of timers, attempts and nodes (the nodes' side: :class:`NodeRegistry`)."""

    sealing: Sealing
    """What the store seals at rest (payloads, errors, tracebacks) and the key ring that opens
    what it reads; set by the app from its settings (see docs/security.md)."""

    url: str

    # -- parts ------------------------------------------------------------------------------
    @property
    def schedules(self) -> ScheduleStore:
        """Recurring schedules, their materialisation, and the tz-data bookkeeping."""
        ...

    @property
    def history(self) -> HistoryStore:
        """Retention of finished timers, and the event log read from them."""
        ...

    @property
    def limits(self) -> LimitStore:
        """Flow control: limits and pauses per event type, and the claim that obeys them."""
        ...

    @property
    def tokens(self) -> TokenStore:
        """The REST API's token hashes."""
        ...

    @property
    def audit(self) -> AuditStore:
        """The audit log of operator actions."""
        ...

    @property
    def transactions(self) -> TransactionStore:
        """A transactional handler's writes in the transaction that completes its timer."""
        ...

    @property
    def outbox(self) -> OutboxStore | None:
        """Timers stored inside the caller's own transaction; None where it cannot be done."""
        ...

    @property
    def sql_access(self) -> SqlAccessStore | None:
        """The roles that may use the SQL functions; None where there are none (SQLite)."""
        ...

    async def open(self, *, migrate: bool = True) -> None:
        """Connect, and bring the schema up to date unless ``migrate`` is False."""
        ...

    async def close(self) -> None: ...

    async def migrate(self) -> list[int]:
        """Apply pending schema migrations; return the versions applied now."""
        ...

    async def schema_version(self) -> int: ...

    async def db_now(self) -> datetime | None:
        """The database server's clock, which decides what is due and when leases end; None
        when the database runs on this machine's clock (SQLite)."""
        ...

    async def change_marker(self) -> str:
        """A cheap value that changes whenever a write commits to the database, from any
        process (it may change for other writes too): the dashboard's live feed polls it."""
        ...

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        """Hear about timers stored by this process or any other using the same database."""
        ...

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        """Stop calling ``listener`` (a no-op when it is not added): each worker adds one."""
        ...

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None: ...

    async def namespace_exists(self, namespace: str) -> bool: ...

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        """Namespaces by name: those after ``after``, at most ``limit`` (None: all), only
        those of ``only`` (None: every one)."""
        ...

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        """Create those of ``names`` that do not exist (the ones it returns), in one
        transaction that keeps the database within ``cap`` namespaces even while other
        creations race (see :mod:`duetime.store.room`): CapReached naming ``field`` otherwise,
        and nothing is created."""
        ...

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Insert or upsert by ``(namespace, key)`` in one transaction, results in input order.

        ``timers`` may be lazy (the app's stream validates each request as it is read) and is
        read once; an exception it raises rolls the whole batch back.

        ``update`` changes a key only while it is still pending; a fired one is kept as it is,
        and so is a pending one that the request would leave unchanged (action ``kept``).
        ``keep`` never changes an existing key. ``error`` raises AlreadyExists (nothing stored).
        """
        ...

    async def get_timer(self, namespace: str, key: str) -> Timer | None: ...

    async def list_timers(
        self,
        namespace: str,
        filter: TimerFilter,
        cursor: str | None,
        limit: int,
        sort: TimerSort = "newest",
    ) -> Page[Timer]:
        """Newest first (by id), or in the order ``sort`` names; cursor-paginated."""
        ...

    async def list_types(self, namespace: str, prefix: str, limit: int) -> list[str]:
        """Event types starting with ``prefix``, alphabetically: those of the namespace's
        schedules and of its newest timers (a bounded read, for suggestions as one types)."""
        ...

    async def list_attempts(self, timer_id: int) -> list[Attempt]: ...

    async def count_by_status(self, namespace: str) -> dict[Status, int]: ...

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        """Every namespace's timers by status and the earliest run time of its pending ones
        (None: none pending), in a number of statements that does not grow with the
        namespaces: what a metrics scrape reads."""
        ...

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel a pending timer; NotFound for an unknown key, Conflict once it has fired."""
        ...

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        """Give a dead timer a fresh set of attempts, due now; Conflict unless it is dead."""
        ...

    async def run_now(self, namespace: str, key: str, now: datetime) -> Timer:
        """Make a pending timer due now (retry now); Conflict unless scheduled or retrying."""
        ...

    async def delete(self, namespace: str, key: str, now: datetime) -> Timer:
        """Delete a finished timer (done, dead, cancelled, expired) with its attempts, and on
        PostgreSQL every archived timer of the key with their attempts too; the timer as it
        was. NotFound for an unknown key, Conflict (saying what to do) for a pending or running
        one. Its id is never given to another timer."""
        ...

    async def bulk_batch(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        after_id: int,
        now: datetime,
        limit: int,
        keys: Sequence[str] | None = None,
    ) -> tuple[int, int | None]:
        """Apply ``action`` to the next ``limit`` timers (by id, after ``after_id``) that
        ``filter`` takes and the action applies to, in one short transaction. Returns how many
        changed and the last id looked at (None once no timer is left): the caller's next
        ``after_id``. Rows that changed status meanwhile are skipped. ``keys``: only the timers
        with these keys (a selection, read through the key index), as well.

        ``delete`` takes finished timers with their attempts; on PostgreSQL archived ones too
        (the history's rows), so what a listing shows is what a delete takes."""
        ...

    async def dead_types(self, namespace: str, limit: int) -> list[DeadType]:
        """The dead letters by event type, most first (at most ``limit`` types)."""
        ...

    async def count_matching(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        now: datetime,
        keys: Sequence[str] | None = None,
    ) -> int:
        """How many timers a bulk ``action`` with ``filter`` (and ``keys``) would take at
        ``now``."""
        ...

    async def unsubscribed_types(
        self, namespace: str, subscribed: ClaimFilter, limit: int
    ) -> list[tuple[str, int]]:
        """The pending rows that ``subscribed`` (every live node's subscriptions together) does
        not take, counted by type, most first (at most ``limit`` types): what waits for a
        subscriber. The filter is the claim's, so the count agrees with what workers take."""
        ...

    # -- working ----------------------------------------------------------------------------
    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        """The earliest ``run_at`` of pending work ``types`` takes (None when there is none)."""
        ...

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        """Seal up to ``limit`` timers with ids above ``after`` (and their attempts' errors)
        with :attr:`sealing`'s first key, each row only if unchanged since read; the rows
        changed and the last id read, None once past the last (``duetime keys rotate``)."""
        ...

    async def claim_due(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
        *,
        due_by: datetime | None = None,
    ) -> list[Claimed]:
        """Mark up to ``limit`` timers due by ``due_by`` (default ``now``) running under a
        lease, oldest ``run_at`` first.

        ``now`` is the claim's instant, recorded as each attempt's ``claimed_at``; ``due_by``
        may lie ahead of it (a worker claims rows due within its look-ahead and holds them
        until their instants), and is never recorded: an attempt is claimed before it starts.
        ``types`` filters what is taken: None everything; a list of types their events and
        ``handler`` deliveries (:meth:`ClaimFilter.of_types`); a :class:`ClaimFilter` what a
        node's subscriptions take (``duetime.bus.routes.claims`` is the rule). The pending
        index stays the access path. One statement; each claim also opens an attempt row.
        """
        ...

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        """Hand claimed events on, in one transaction; return the timer ids no longer ours.

        Each event whose attempt is still ``node_id``'s (fenced as in :meth:`finish`) is marked
        done, its attempt closed as ``fanned_out``, and one delivery row inserted per
        destination: key :func:`duetime.model.deliveries.delivery_key`, the event's type, payload,
        subject, correlation id, due time, ``run_at``, ``expires_after``, ``max_attempts``,
        ``registered_at`` and producer. A delivery key that exists already is kept as it is.
        """
        ...

    async def sweep_unsubscribed(
        self, namespace: str, subscribed: ClaimFilter, before: datetime, now: datetime, limit: int
    ) -> list[int]:
        """Of the ``limit`` oldest pending rows with ``run_at`` before ``before``, dead-letter
        those ``subscribed`` (every live node's subscriptions together) does not take; the
        reason is ``no subscriber for type <T>`` (or, for a delivery, that no node serves its
        destination). Returns their ids. Bounded, so a backlog never makes it a long scan; rows
        no one takes stay oldest, so later sweeps reach them."""
        ...

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        """Apply the owner's outcomes in one transaction; return the timer ids it no longer owns."""
        ...

    async def rescue(self, now: datetime) -> list[int]:
        """Put running timers whose lease ran out back to work (or dead when out of attempts)."""
        ...

    async def rescue_and_sweep(
        self,
        now: datetime,
        namespace: str,
        subscribed: Callable[[list[Node]], ClaimFilter],
        before: datetime,
        limit: int,
    ) -> tuple[list[int], list[int], list[Node]]:
        """A worker's periodic round in one transaction: :meth:`rescue`, then read the nodes,
        then :meth:`sweep_unsubscribed` with what ``subscribed`` (a pure function, maybe run on
        another thread) makes of them. Returns (rescued, swept, the nodes): an idle worker's
        upkeep costs one transaction, not one for each."""
        ...


__all__ = [
    "AuditStore",
    "HistoryStore",
    "LimitStore",
    "OutboxStore",
    "ScheduleStore",
    "SqlAccessStore",
    "Store",
    "TokenStore",
    "TransactionEffect",
    "TransactionStore",
    "WakeupListener",
]
