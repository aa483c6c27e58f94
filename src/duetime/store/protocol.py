"""The Store protocol: the one seam between duetime's logic and a database.

Every backend (SQLite, PostgreSQL) implements it with SQL kept in its own ``queries.sql``; the
worker, app and services talk only to this protocol. Write paths are named after the state
transitions they make (``claim_due``, ``finish``, ``cancel``, ``rescue``), and every write that
concerns a claimed attempt is fenced by ``(timer id, attempt number, owner node)`` so a node that
lost its lease cannot overwrite the attempt that replaced it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, runtime_checkable

from duetime.errors import InvalidInput
from duetime.history import EventFilter, LoggedEvent, MaintenanceReport, RetentionPolicy
from duetime.model import (
    Attempt,
    Claimed,
    ClaimFilter,
    FanOut,
    Finish,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Schedule,
    Status,
    Timer,
    TimerFilter,
)
from duetime.schedules import Materialized, NewSchedule, ScheduleAdvance, ScheduleFilter

TransactionEffect = Callable[[Any], Any]
"""A transactional handler's writes: called with the backend's connection inside the transaction
that also completes the timer (SQLite: a ``sqlite3.Connection``, must not return an awaitable;
PostgreSQL: a psycopg ``AsyncConnection``, may return one)."""

WakeupListener = Callable[[datetime | None], None]
"""Called with the earliest ``run_at`` just stored (None = unknown: re-read the next due time)."""


class Store(Protocol):
    """Durable storage of timers, attempts and nodes."""

    url: str

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

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        """Hear about timers stored by this process or any other using the same database."""
        ...

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        """Stop calling ``listener`` (a no-op when it is not added): each worker adds one."""
        ...

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None: ...

    async def namespace_exists(self, namespace: str) -> bool: ...

    async def list_namespaces(self) -> list[str]: ...

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Insert or upsert by ``(namespace, key)`` in one transaction, results in input order.

        ``timers`` may be lazy (the app's stream validates each request as it is read) and is
        read once; an exception it raises rolls the whole batch back.

        ``update`` changes a key only while it is still pending; a fired one is kept as it is.
        ``keep`` never changes an existing key. ``error`` raises AlreadyExists (nothing stored).
        """
        ...

    async def get_timer(self, namespace: str, key: str) -> Timer | None: ...

    async def list_timers(
        self, namespace: str, filter: TimerFilter, cursor: str | None, limit: int
    ) -> Page[Timer]:
        """Newest first (by id), cursor-paginated."""
        ...

    async def list_attempts(self, timer_id: int) -> list[Attempt]: ...

    async def count_by_status(self, namespace: str) -> dict[Status, int]: ...

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel a pending timer; NotFound for an unknown key, Conflict once it has fired."""
        ...

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        """Give a dead timer a fresh set of attempts, due now; Conflict unless it is dead."""
        ...

    # -- working ----------------------------------------------------------------------------
    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        """The earliest ``run_at`` of pending work ``types`` takes (None when there is none)."""
        ...

    async def claim_due(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
    ) -> list[Claimed]:
        """Mark up to ``limit`` due timers running under a lease, oldest ``run_at`` first.

        ``types`` filters what is taken: None everything; a list of types their events and
        ``handler`` deliveries (:meth:`ClaimFilter.of_types`); a :class:`ClaimFilter` what a
        node's subscriptions take (:func:`duetime.routes.claims` is the rule). The pending
        index stays the access path. One statement; each claim also opens an attempt row.
        """
        ...

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        """Hand claimed events on, in one transaction; return the timer ids no longer ours.

        Each event whose attempt is still ``node_id``'s (fenced as in :meth:`finish`) is marked
        done, its attempt closed as ``fanned_out``, and one delivery row inserted per
        destination: key :func:`duetime.routes.delivery_key`, the event's type, payload,
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

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        """End the leases of a node known to be gone (e.g. its process no longer exists)."""
        ...

    # -- nodes ------------------------------------------------------------------------------
    async def register_node(self, node: Node) -> None: ...

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[int],
        clock_offset: timedelta | None = None,
    ) -> int:
        """Refresh the node's heartbeat and extend its leases on ``held`` (the timer ids it knows
        it is working on); returns leases extended. A lease the node does not list is not renewed,
        so work whose claim answer never reached it is rescued when the lease runs out.
        ``clock_offset``: the node's latest measure of its clock against the database's."""
        ...

    async def deregister_node(self, node_id: str) -> None: ...

    async def list_nodes(self) -> list[Node]: ...


SchedulePlan = Callable[[Sequence[Schedule]], Sequence[ScheduleAdvance]]
"""Pure: due schedules → how to advance each (run inside the materialising transaction)."""


class ScheduleStore(Protocol):
    """Durable schedules, their materialisation into timers, and the tz-data bookkeeping.

    Every timer a schedule creates carries the schedule's id, so deleting the schedule cancels
    its pending occurrences; occurrence keys (``schedule:<name>:<instant>``) make creating one
    twice impossible.
    """

    async def put_schedules(
        self, schedules: Sequence[NewSchedule], on_conflict: OnConflict, now: datetime
    ) -> list[Schedule | None]:
        """Insert new schedules in one transaction; None where the name is already taken.

        ``error`` raises AlreadyExists instead (nothing stored); ``keep`` and ``update`` leave
        an existing schedule as it is (the caller revises it: :func:`duetime.schedules.revise`).
        """
        ...

    async def get_schedule(self, namespace: str, name: str) -> Schedule | None: ...

    async def list_schedules(
        self, namespace: str, filter: ScheduleFilter, cursor: str | None, limit: int
    ) -> Page[Schedule]:
        """By name, cursor-paginated."""
        ...

    async def save_schedule(
        self, schedule: Schedule, now: datetime, release_after: datetime | None
    ) -> Schedule | None:
        """Write a revised schedule if its row still has ``schedule.version`` (else None).

        In the same transaction, occurrences materialised ahead of time (not fired, due after
        ``release_after``) are deleted, so the materialiser creates them again as revised.
        """
        ...

    async def delete_schedule(
        self, namespace: str, name: str, now: datetime
    ) -> tuple[Schedule, int] | None:
        """Delete a schedule and cancel its pending occurrences (how many); None if unknown."""
        ...

    async def due_schedules(self, namespace: str, horizon: datetime, limit: int) -> list[Schedule]:
        """Active schedules whose next occurrence is at or before ``horizon``, earliest first."""
        ...

    async def advance_schedules(
        self, advances: Sequence[ScheduleAdvance], now: datetime
    ) -> list[int]:
        """Create the timers and move each schedule on, in one transaction; the ids advanced.

        An advance whose version no longer matches is skipped, its timers not inserted. Timers
        are inserted idempotently by key.
        """
        ...

    async def materialize(
        self, namespace: str, horizon: datetime, limit: int, plan: SchedulePlan, now: datetime
    ) -> Materialized:
        """``due_schedules`` + ``plan`` + ``advance_schedules`` in one transaction.

        The due rows are locked while planned (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so many
        workers share the work instead of racing for the same rows).
        """
        ...

    async def next_schedule_at(self, namespace: str) -> datetime | None:
        """The earliest ``next_at`` of the namespace's active schedules."""
        ...

    async def schedules_after(self, after_id: int, limit: int) -> list[Schedule]:
        """Cron schedules of every namespace by id (tz-data re-resolution walks them all)."""
        ...

    async def pending_local_timers(self, after_id: int, limit: int) -> list[Timer]:
        """Pending timers given as local wall-clock time, of every namespace, by id."""
        ...

    async def reresolve_timers(
        self, changes: Sequence[tuple[int, datetime, datetime]], now: datetime
    ) -> int:
        """Move pending local-form timers ``(id, old due_at, new due_at)``; how many moved."""
        ...

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str, now: datetime) -> None: ...


class SchedulingStore(Store, ScheduleStore, Protocol):
    """A store of timers that also keeps schedules (both built-in backends are)."""


def scheduling_store(store: Store) -> SchedulingStore:
    """``store`` as a :class:`SchedulingStore`, or TypeError naming what it lacks."""
    missing = [
        name
        for name in ScheduleStore.__dict__
        if not name.startswith("_") and callable(ScheduleStore.__dict__[name])
        if not callable(getattr(store, name, None))
    ]
    if missing:
        raise TypeError(f"{type(store).__name__} does not keep schedules (no {missing[0]})")
    return store  # type: ignore[return-value]


@runtime_checkable
class TransactionalStore(Protocol):
    """Backends that can share a transaction with user code (exactly-once effects, outbox)."""

    async def put_timers_in(
        self,
        connection: object,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """Store timers inside the caller's open transaction: they exist only if it commits."""
        ...

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
    ) -> bool:
        """Run ``effect`` and mark the attempt done in one transaction; False if not ours."""
        ...


@runtime_checkable
class HistoryStore(Protocol):
    """Backends that keep finished timers off the hot path and read them back as an event log.

    ``maintain`` is safe to run on several nodes at once: rows are taken in batches with
    ``FOR UPDATE SKIP LOCKED`` (PostgreSQL) or under the write lock (SQLite), and partitions are
    created and dropped under an advisory lock.
    """

    async def maintain(self, policy: RetentionPolicy, now: datetime) -> MaintenanceReport:
        """One round: make the history partitions, archive what finished ``archive_after`` ago,
        delete what finished ``retention`` ago (dead timers included)."""
        ...

    async def list_events(
        self, namespace: str, filter: EventFilter, cursor: str | None, limit: int
    ) -> Page[LoggedEvent]:
        """Timers that fired, newest ``fired_at`` first, with their attempts; hot and archived."""
        ...


def history_store(store: Store) -> HistoryStore:
    """``store`` as a :class:`HistoryStore`, or InvalidInput when it keeps no history."""
    if not isinstance(store, HistoryStore):
        raise InvalidInput("database_url", f"{type(store).__name__} keeps no event log")
    return store
