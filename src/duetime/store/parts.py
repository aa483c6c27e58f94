"""The parts of a store: what a backend keeps besides timers, each a small protocol of its own.

A :class:`~duetime.store.protocol.Store` is composed of them — ``store.schedules``,
``store.history``, ``store.tokens``, ``store.audit``, ``store.transactions`` and
``store.outbox`` — so what a
backend can do is read off its attributes, never guessed from its class or its URL. A part both
built-in backends keep is always there; one a backend lacks (a third-party store's) is None,
and :func:`require` turns that None into an error naming the missing part. The parts that say
who may reach the store and what they did are in :mod:`duetime.store.access_parts`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from duetime.errors import InvalidInput
from duetime.model import (
    ClaimFilter,
    NewTimer,
    OnConflict,
    Page,
    PutResult,
    Schedule,
    Timer,
)
from duetime.model.charts import LatenessRow, ThroughputCount
from duetime.model.flow_rules import FlowPlan, FlowRule, FlowStatus, RuledClaim
from duetime.model.history import (
    ActivityCount,
    EventFilter,
    LoggedEvent,
    MaintenanceReport,
    RetentionPolicy,
)
from duetime.model.moves import TimerMove
from duetime.model.schedules import (
    DueSchedule,
    Materialized,
    NewSchedule,
    OccurrenceState,
    ScheduleAdvance,
    ScheduleFilter,
)
from duetime.store.access_parts import AuditStore as AuditStore
from duetime.store.access_parts import SqlAccessStore as SqlAccessStore
from duetime.store.access_parts import TokenStore as TokenStore
from duetime.store.room import ScheduleRoom

P = TypeVar("P")

Chart = tuple[list[ThroughputCount], list[LatenessRow]]
"""A chart as a store reads it: counts by bucket and status, lateness by bucket."""

TransactionEffect = Callable[[Any], Any]
"""A transactional handler's writes: called with the backend's connection inside the transaction
that also completes the timer (SQLite: a ``sqlite3.Connection``, must not return an awaitable;
PostgreSQL: a psycopg ``AsyncConnection``, may return one)."""


SchedulePlan = Callable[
    [Sequence[DueSchedule], Mapping[int, OccurrenceState]], Sequence[ScheduleAdvance]
]
"""Pure: due schedules, and the occurrence states of those with an overlap policy (by schedule
id; absent: nothing unfinished) → how to advance each (run inside the materialising
transaction). A store may call it beforehand too, outside any transaction, so the work of
finding occurrences is done (and remembered by the planner) before a lock is taken."""


class ScheduleStore(Protocol):
    """Durable schedules, their materialisation into timers, and the tz-data bookkeeping.

    Every timer a schedule creates carries the schedule's id, so deleting the schedule cancels
    its pending occurrences; occurrence keys (``schedule:<name>:<instant>``) make creating one
    twice impossible.
    """

    backlog_growth: int
    """While the materialiser's batches come back full, each is twice the last, up to this
    many times its batch_size. SQLite pays a commit and a WAL checkpoint per batch, so a backlog
    (a million schedules due after an outage) goes faster in batches of thousands (10);
    PostgreSQL's one statement per batch is planned best at the configured size (1)."""

    materialize_lanes: int
    """How many materialising transactions one materialiser runs at once through a backlog.
    PostgreSQL: 2 (the client plans a batch while the server writes another, and a batch's
    commit waits while the next is written: a million due schedules in half the time);
    SQLite: 1 (one writer at a time)."""

    async def put_schedules(
        self,
        schedules: Iterable[NewSchedule],
        on_conflict: OnConflict,
        now: datetime,
        room: ScheduleRoom | None = None,
    ) -> list[Schedule | None]:
        """Insert new schedules in one transaction; None where the name is already taken.
        ``room``: the cap the new ones must fit, checked in that transaction (CapReached, and
        nothing stored, when they do not), so racing creations cannot pass it together.

        ``schedules`` may be a lazy stream that validates each as it is read (``add_schedules``):
        a store may send the first while the rest are read; one that raises stores nothing.

        ``error`` raises AlreadyExists instead (nothing stored); ``keep`` and ``update`` leave
        an existing schedule as it is (the caller revises it).
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

    async def due_schedules(
        self, namespace: str, horizon: datetime, limit: int, now: datetime | None = None
    ) -> list[Schedule]:
        """Active schedules whose next occurrence is at or before ``horizon`` (those with an
        overlap policy: at or before ``now``, if given), earliest first."""
        ...

    async def advance_schedules(
        self, advances: Sequence[ScheduleAdvance], now: datetime
    ) -> list[int]:
        """Create the timers and move each schedule on, in one transaction; the ids advanced.

        Each timer (an :class:`~duetime.model.schedules.Occurrence`: key and due instant)
        takes type, payload, subject and max_attempts from its schedule's row.

        An advance whose version no longer matches is skipped, its timers not inserted. Timers
        are inserted idempotently by key.
        """
        ...

    async def materialize(
        self,
        namespace: str,
        horizon: datetime,
        limit: int,
        plan: SchedulePlan,
        now: datetime,
        ids: range | None = None,
    ) -> Materialized:
        """``due_schedules`` + ``plan`` + ``advance_schedules`` in one transaction.

        ``ids``: only the due rows whose id lies in this range, in id order (a backlog walked
        in the table's order: see :meth:`schedule_ids`); else the earliest due first.

        Set-based: the due rows are read as :class:`DueSchedule` (rule and position, no
        payload), and the batch's advances and timers are written by one or two statements,
        not one per row; each timer copies type, payload, subject and max_attempts from its
        schedule's row.

        The due rows are locked while planned (PostgreSQL: ``FOR UPDATE SKIP LOCKED``, so many
        workers share the work instead of racing for the same rows). A schedule with an overlap
        policy is due ahead too; its occurrence state is read under that lock, so the plan's
        decision is race-free (read only when such schedules are due), and the end of an
        earlier occurrence decides what the plan left waiting (the stores' release trigger).
        """
        ...

    async def schedule_ids(self) -> range | None:
        """From the lowest id of any stored schedule to the highest (None: there are none):
        what a backlog's windows walk."""
        ...

    async def next_schedule_at(
        self, namespace: str, ahead: timedelta = timedelta(0)
    ) -> datetime | None:
        """When the materialiser next has work: ``ahead`` of the earliest ``next_at`` of the
        namespace's active schedules without an overlap policy, or the earliest of those with
        one (see :func:`~duetime.model.schedules.next_wake`)."""
        ...

    async def schedules_after(self, after_id: int, limit: int) -> list[Schedule]:
        """Cron schedules of every namespace by id (tz-data re-resolution walks them all)."""
        ...

    async def reseal(self, after: int, limit: int) -> tuple[int, int | None]:
        """Seal up to ``limit`` schedules' payloads with ids above ``after`` with the store's
        first key, each only if unchanged since read: the payloads changed and the last id
        read, None once past the last (``duetime keys rotate``)."""
        ...

    async def held_local_timers(self, limit: int) -> list[Timer]:
        """Pending local-form timers stored without their instant (run_at ``HELD_AT``: the SQL
        functions leave a wall time for duetime's own tz data to resolve), by id."""
        ...

    async def release_local_timers(
        self,
        resolved: Sequence[tuple[int, datetime]],
        failed: Sequence[tuple[int, str]],
        now: datetime,
    ) -> int:
        """Give held timers ``(id, instant)`` their instant, and end ``(id, reason)`` dead with
        that reason (their wall time or zone failed duetime's checks); how many changed."""
        ...

    async def pending_local_timers(self, after_id: int, limit: int) -> list[Timer]:
        """Pending timers given as local wall-clock time, of every namespace, by id."""
        ...

    async def reresolve_timers(
        self,
        changes: Sequence[tuple[int, datetime, datetime]],
        now: datetime,
        reason: str = "tz data",
    ) -> int:
        """Move pending local-form timers ``(id, old due_at, new due_at)``, each move recorded
        in the timer's history with ``reason``; how many moved."""
        ...

    async def list_timer_moves(self, timer_id: int) -> list[TimerMove]:
        """A timer's moves by new zone rules, oldest first."""
        ...

    async def get_meta(self, key: str) -> str | None: ...

    async def set_meta(self, key: str, value: str, now: datetime) -> None: ...


class HistoryStore(Protocol):
    """Finished timers kept off the hot path, and read back as an event log.

    ``maintain`` is safe to run on several nodes at once: rows are taken in batches with
    ``FOR UPDATE SKIP LOCKED`` (PostgreSQL) or under the write lock (SQLite), and partitions are
    created and dropped under an advisory lock.
    """

    async def maintain(self, policy: RetentionPolicy, now: datetime) -> MaintenanceReport:
        """One round: make the history partitions, archive what finished ``archive_after`` ago,
        delete what finished ``retention`` ago (dead timers included)."""
        ...

    async def reseal(self, namespace: str, after: int, limit: int) -> tuple[int, int | None]:
        """Seal up to ``limit`` archived timers of ``namespace`` with ids above ``after`` (and
        their attempts' errors) with the store's first key, as :meth:`Store.reseal` does the
        hot table's; (0, None) where the history is the hot table itself (SQLite)."""
        ...

    async def list_events(
        self, namespace: str, filter: EventFilter, cursor: str | None, limit: int
    ) -> Page[LoggedEvent]:
        """Timers that fired, newest ``fired_at`` first, with their attempts; hot and archived."""
        ...

    async def activity(
        self, namespace: str, since: datetime, until: datetime
    ) -> list[ActivityCount]:
        """Timers that fired in ``[since, until)`` counted by minute (from ``since``) and
        status, hot and archived, read through the event log's index."""
        ...

    async def chart(
        self,
        namespace: str,
        since: datetime,
        until: datetime,
        bucket: timedelta,
        type: str | None,
        node: str | None,
    ) -> Chart:
        """Timers whose first attempt started in ``[since, until)``, by ``bucket`` (index from
        ``since``): counted by status now, and their lateness percentiles computed by the
        database; only of ``type`` (a glob) and first run on ``node``, when given."""
        ...


class TransactionStore(Protocol):
    """Running a transactional handler's writes in the transaction that completes its timer
    (exactly-once effects); both built-in backends can."""

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
        *,
        claim_token: int | None = None,
        started_at: datetime | None = None,
    ) -> bool:
        """Run ``effect`` and mark the attempt done in one transaction; False if not ours.

        ``claim_token`` and ``started_at``: as :class:`~duetime.model.Finish` has them (the
        claim the attempt must still be under; when the handler began)."""
        ...


class OutboxStore(Protocol):
    """Writing inside the caller's own open transaction (the outbox pattern): what duetime
    writes there is visible only if the caller commits, and gone if it rolls back.

    ``connection`` is the driver connection of that transaction (see :mod:`duetime.app.outbox`):
    psycopg 3 (an ``AsyncConnection``, or a blocking ``Connection``) on PostgreSQL, a
    ``sqlite3.Connection`` opened on the store's own file on SQLite. Given a blocking one,
    these coroutines never wait, so a blocking caller runs them in its own thread.
    """

    async def put_timers_in(
        self,
        connection: object,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """Store timers inside the caller's open transaction: they exist only if it commits."""
        ...

    async def cancel_in(self, connection: object, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel a timer inside the caller's open transaction: undone if it rolls back."""
        ...


class LimitStore(Protocol):
    """Flow control rules (:mod:`duetime.model.flow_rules`) and the claim that obeys them."""

    async def list_rules(self, namespace: str, *, claiming: bool = False) -> list[FlowRule]:
        """The namespace's rules, by pattern. ``claiming``: read for a claim, so never behind
        the handlers that hold the shared connections (a backend with lanes uses the claims')."""
        ...

    async def put_limit(self, rule: FlowRule, now: datetime, cap: int | None = None) -> FlowRule:
        """Set the pattern's limit (replacing its previous one; a pause and the rate's state
        stay). A new pattern's row is refused (CapReached naming ``pattern``) when the
        namespace holds ``cap`` rules of types already."""
        ...

    async def remove_limit(self, namespace: str, pattern: str, now: datetime) -> bool:
        """Drop the pattern's limit (a pause stays); False when it had none."""
        ...

    async def set_paused(
        self, namespace: str, pattern: str, paused: bool, now: datetime, cap: int | None = None
    ) -> FlowRule | None:
        """Pause or resume the pattern's types; the row as it is now (None: no row left). A
        pause of a new pattern is refused as :meth:`put_limit` refuses a limit past ``cap``."""
        ...

    async def status(
        self, namespace: str, now: datetime, cursor: str | None = None, limit: int | None = None
    ) -> Page[FlowStatus]:
        """Rules by pattern (``limit`` a page, after ``cursor``; None: all), each with the
        attempts running and the due timers it holds back now: two statements whatever the
        number of rules."""
        ...

    async def claim(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
        plan: FlowPlan,
        *,
        ungoverned: bool = True,
        due_by: datetime | None = None,
    ) -> RuledClaim:
        """:meth:`Store.claim_due` under ``plan`` (``now`` the claim's instant, ``due_by`` the
        horizon, as there): each limit's types at most as it allows (rate state and running
        count read under the limit's lock, on the database's clock), paused types not at all,
        then the rest (unless ``ungoverned`` is False: the caller knows none is due); oldest
        ``run_at`` first."""
        ...

    async def next_run_at(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        plan: FlowPlan,
        held: Sequence[str],
        *,
        ungoverned: bool = True,
    ) -> datetime | None:
        """:meth:`Store.next_run_at` under ``plan``, leaving out paused types, those of the
        limits in ``held`` (retried at their own instant), and unless ``ungoverned`` those no
        rule governs."""
        ...


def require(
    part: P | None, name: str, store: object, *, field: str, doing: str, hint: str = ""
) -> P:
    """``part`` (the store's ``name`` part), or InvalidInput naming ``field`` and the missing
    part when the store has none, e.g. ``require(store.outbox, "outbox", store,
    field="transaction", doing="scheduling inside your own transaction")``."""
    if part is None:
        raise InvalidInput(
            field,
            f"{doing} needs store.{name}, which {type(store).__name__} ({_scheme(store)}) "
            f"does not have{'; ' + hint if hint else ''}",
        )
    return part


def _scheme(store: object) -> str:
    url = getattr(store, "url", None)
    return url.split(":", 1)[0] if isinstance(url, str) else "this database"
