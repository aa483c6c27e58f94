"""The embedded SQLite store: one file in WAL mode, safe for several processes on one machine.

Every call runs on one private thread that owns the connection, in the order the calls were
made, so the asyncio loop never blocks on disk and a transaction is never interleaved with
another call from this process. Writes that queue up while the thread is busy are committed
together (group commit: one fsync for, say, a worker's batch of outcomes and its next claim),
each in its own savepoint, and each caller hears back only after that durable commit. Other
processes coordinate through SQLite's own locking (``BEGIN IMMEDIATE``, polled in short steps
within a busy timeout), and learn about new timers through :mod:`duetime.store.sqlite.wakeup`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Generic, TypeVar

from duetime.errors import AlreadyExists, Conflict, InvalidInput, NotFound, StoreUnavailable
from duetime.model import (
    Attempt,
    Claimed,
    ClaimFilter,
    FanOut,
    Finish,
    NewTimer,
    Node,
    OnConflict,
    Outcome,
    Page,
    PutAction,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.routes import delivery_key, fan_out_note
from duetime.store.codec import (
    decode_cursor,
    dump_json,
    encode_cursor,
    from_micros,
    payload_text,
    to_micros,
)
from duetime.store.protocol import TransactionEffect, WakeupListener
from duetime.store.queries import load_migrations, load_queries
from duetime.store.sqlite.history import SqliteHistory
from duetime.store.sqlite.rows import (
    TIMER_COLUMNS,
    InstantCache,
    attempt_from_row,
    claimed_from_tuple,
    node_from_row,
    timer_from_row,
    timer_from_tuple,
)
from duetime.store.sqlite.schedules import SqliteSchedules
from duetime.store.sqlite.wakeup import WakeupChannel
from duetime.validation import generate_key

Q = load_queries("duetime.store.sqlite")
MIGRATIONS = load_migrations("duetime.store.sqlite.migrations")
R = TypeVar("R")

_FINAL_OUTCOMES = {
    Outcome.DONE: None,
    Outcome.DEAD: Status.DEAD,
    Outcome.CANCELLED: Status.CANCELLED,
    Outcome.EXPIRED: Status.EXPIRED,
}


def path_from_url(url: str) -> Path:
    """``sqlite:///relative.db`` / ``sqlite:////abs/path.db`` → a filesystem path."""
    if not url.startswith("sqlite:///"):
        raise ValueError(f"not a sqlite URL: {url!r}")
    rest = url[len("sqlite:///") :]
    if not rest or rest == ":memory:":
        raise ValueError("duetime needs a database file: in-memory SQLite is not durable")
    return Path(rest)


class SqliteStore(SqliteSchedules, SqliteHistory):
    """Store backed by one SQLite file (WAL, ``synchronous=FULL``)."""

    def __init__(self, url: str, *, busy_timeout: float = 30.0) -> None:
        self.url = url
        self.path = path_from_url(url)
        self._busy_timeout_ms = int(busy_timeout * 1000)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._listeners: list[WakeupListener] = []
        self._wakeup: WakeupChannel | None = None
        self._lock = threading.Lock()
        self._writes: list[tuple[Callable[[sqlite3.Connection], Any], Future[Any]]] = []
        self._drain_scheduled = False

    # -- plumbing ---------------------------------------------------------------------------
    async def _run(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        if isinstance(fn, _Write):
            return await self._run_write(fn.fn)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call, fn)

    def _call(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        if self._conn is None:
            raise StoreUnavailable("the SQLite store is not open")
        return fn(self._conn)

    def _write(self, fn: Callable[[sqlite3.Connection], R]) -> Callable[[sqlite3.Connection], R]:
        """Wrap ``fn`` in one write transaction, taken up front so it cannot deadlock.

        Run through :meth:`_run`, writes queued while the connection is busy share one
        transaction — group commit: one fsync for all of them — each in its own savepoint, so
        one that raises is rolled back alone. Each caller still hears back only after the
        commit that made its write durable.
        """
        return _Write(fn)

    async def _run_write(self, fn: Callable[[sqlite3.Connection], R]) -> R:
        future: Future[R] = Future()
        with self._lock:
            self._writes.append((fn, future))
            if not self._drain_scheduled:
                try:
                    self._executor.submit(self._drain_writes)
                except RuntimeError:  # closing: the executor takes no more work
                    self._writes.remove((fn, future))
                    raise StoreUnavailable("the SQLite store is closed") from None
                self._drain_scheduled = True
        return await asyncio.wrap_future(future)

    def _drain_writes(self) -> None:
        """On the connection thread: commit every write queued so far, together."""
        with self._lock:
            queued, self._writes = self._writes, []
            self._drain_scheduled = False
        ops = [(fn, future) for fn, future in queued if future.set_running_or_notify_cancel()]
        while ops:
            ops = self._commit_group(ops)

    def _commit_group(
        self, ops: list[tuple[Callable[[sqlite3.Connection], Any], Future[Any]]]
    ) -> list[tuple[Callable[[sqlite3.Connection], Any], Future[Any]]]:
        """Run ``ops`` in one transaction; return those to run again in a fresh one."""
        conn = self._conn
        if conn is None:
            for _, future in ops:
                future.set_exception(StoreUnavailable("the SQLite store is not open"))
            return []
        if len(ops) == 1:
            fn, future = ops[0]
            try:
                future.set_result(_Write(fn)(conn))
            except BaseException as exc:
                future.set_exception(exc)
            return []
        try:
            _begin_immediate(conn)
        except BaseException as exc:
            for _, future in ops:
                future.set_exception(exc)
            return []
        done: list[tuple[Future[Any], Any]] = []
        for index, (fn, future) in enumerate(ops):
            try:
                conn.execute("SAVEPOINT duetime_write")
                result = fn(conn)
            except BaseException as exc:
                if _undo_savepoint(conn):
                    future.set_exception(exc)
                    continue
                # SQLite gave up the whole transaction (e.g. disk full or I/O error): what
                # the others wrote is gone too; run them again on their own — all but those
                # that failed already (their callers have had their answer).
                future.set_exception(exc)
                return [op for op in ops[:index] if not op[1].done()] + ops[index + 1 :]
            conn.execute("RELEASE duetime_write")
            done.append((future, result))
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            _rollback(conn)
            for future, _ in done:
                future.set_exception(exc)
            return []
        for future, result in done:
            future.set_result(result)
        return []

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        mode = _enter_wal(conn, self._busy_timeout_ms / 1000)
        if str(mode).lower() != "wal":
            raise StoreUnavailable(f"could not put {self.path} in WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = FULL")
        # The hot table and its indexes should stay in memory: the default 2 MB page cache makes
        # every claim and finish of a large backlog re-read pages (a cap, not an allocation).
        conn.execute("PRAGMA cache_size = -65536")
        conn.execute("PRAGMA foreign_keys = ON")
        return conn

    async def open(self, *, migrate: bool = True) -> None:
        if self._conn is not None:
            return
        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._executor, self._connect)
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"cannot open SQLite database {self.path}: {exc}") from exc
        if migrate:
            await self.migrate()
        self._wakeup = WakeupChannel(self.path, self._notify_listeners)
        await self._wakeup.start()

    async def close(self) -> None:
        if self._wakeup is not None:
            await self._wakeup.stop()
            self._wakeup = None
        if self._conn is not None:
            conn = self._conn
            await asyncio.get_running_loop().run_in_executor(self._executor, conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="duetime-sqlite")

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        self._listeners.append(listener)

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify_listeners(self, earliest: datetime | None) -> None:
        for listener in list(self._listeners):
            listener(earliest)

    def _announce(self, earliest: datetime | None) -> None:
        """Tell this process's listeners at once and every other process through the channel."""
        self._notify_listeners(earliest)
        if self._wakeup is not None:
            self._wakeup.broadcast(earliest)

    # -- schema -----------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        def run(conn: sqlite3.Connection) -> list[int]:
            conn.execute(Q["create_migrations_table"])
            _begin_immediate(conn)
            try:
                done = {row[0] for row in conn.execute(Q["applied_migrations"])}
                applied = []
                for version, name, sql in MIGRATIONS:
                    if version in done:
                        continue
                    for statement in _split_statements(sql):
                        conn.execute(statement)
                    conn.execute(Q["record_migration"], (version, name, _now_micros()))
                    applied.append(version)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return applied

        return await self._run(run)

    async def schema_version(self) -> int:
        def run(conn: sqlite3.Connection) -> int:
            conn.execute(Q["create_migrations_table"])
            versions = [row[0] for row in conn.execute(Q["applied_migrations"])]
            return max(versions, default=0)

        return await self._run(run)

    async def db_now(self) -> datetime | None:
        """None: the database is a file on this machine, whose wall clock every process shares
        (so no process can be skewed against another)."""
        return None

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(Q["ensure_namespace"], (namespace, to_micros(now)))

        await self._run(run)

    async def namespace_exists(self, namespace: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            return conn.execute(Q["namespace_exists"], (namespace,)).fetchone() is not None

        return await self._run(run)

    async def list_namespaces(self) -> list[str]:
        return await self._run(lambda c: [row[0] for row in c.execute(Q["list_namespaces"])])

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        timers = list(timers)  # every request validated before the write lock is taken
        now_us = to_micros(now)
        rows = [_timer_params(timer, now_us) for timer in timers]

        def run(conn: sqlite3.Connection) -> list[PutResult]:
            query = Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]
            results: list[PutResult] = []
            cursor = conn.cursor()
            cursor.row_factory = None  # TIMER_COLUMNS + version, as plain tuples
            instants = InstantCache()
            for timer, params in zip(timers, rows, strict=True):
                if timer.key is None:  # a key of the store's, drawn again should it be held
                    row = _insert_generated(cursor, params)
                else:
                    row = cursor.execute(query, params).fetchone()
                if row is not None:
                    action: PutAction = "created" if row[-1] == 1 else "updated"
                    results.append(PutResult(action, timer_from_tuple(row[:-1], instants)))
                    continue
                existing = conn.execute(Q["get_timer"], (timer.namespace, timer.key)).fetchone()
                if on_conflict == "error":
                    raise AlreadyExists(
                        f"a timer with key {timer.key!r} already exists", field="key"
                    )
                results.append(PutResult("kept", timer_from_row(existing)))
            return results

        results = await self._run(self._write(run))
        written = [r.timer.run_at for r in results if r.action != "kept"]
        if written:
            self._announce(min(written))
        return results

    async def get_timer(self, namespace: str, key: str) -> Timer | None:
        def run(conn: sqlite3.Connection) -> Timer | None:
            row = conn.execute(Q["get_timer"], (namespace, key)).fetchone()
            return None if row is None else timer_from_row(row)

        return await self._run(run)

    async def list_timers(
        self, namespace: str, filter: TimerFilter, cursor: str | None, limit: int
    ) -> Page[Timer]:
        before = decode_cursor(cursor)
        params = {
            "namespace": namespace,
            "subject": filter.subject,
            "status": filter.status.value if filter.status else None,
            "type": filter.type,
            "before_id": before if before is not None else 2**63 - 1,
            "limit": limit + 1,
        }

        def run(conn: sqlite3.Connection) -> Page[Timer]:
            rows = conn.execute(Q["list_timers"], params).fetchall()
            items = [timer_from_row(row) for row in rows[:limit]]
            more = len(rows) > limit
            return Page(items, encode_cursor(items[-1].id) if more and items else None)

        return await self._run(run)

    async def list_attempts(self, timer_id: int) -> list[Attempt]:
        def run(conn: sqlite3.Connection) -> list[Attempt]:
            return [attempt_from_row(row) for row in conn.execute(Q["list_attempts"], (timer_id,))]

        return await self._run(run)

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        def run(conn: sqlite3.Connection) -> dict[Status, int]:
            counts = dict.fromkeys(Status, 0)
            for status, count in conn.execute(Q["count_by_status"], (namespace,)):
                counts[Status(status)] = count
            return counts

        return await self._run(run)

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        params = {"namespace": namespace, "key": key, "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> Timer:
            row = conn.execute(Q["cancel"], params).fetchone()
            if row is not None:
                return timer_from_row(row)
            existing = conn.execute(Q["get_timer"], (namespace, key)).fetchone()
            if existing is None:
                raise NotFound(f"no timer with key {key!r}", field="key")
            raise Conflict(
                f"timer {key!r} is {existing['status']}: only a scheduled timer can be cancelled",
                field="key",
            )

        return await self._run(self._write(run))

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        params = {"namespace": namespace, "key": key, "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> Timer:
            row = conn.execute(Q["replay"], params).fetchone()
            if row is not None:
                return timer_from_row(row)
            existing = conn.execute(Q["get_timer"], (namespace, key)).fetchone()
            if existing is None:
                raise NotFound(f"no timer with key {key!r}", field="key")
            raise Conflict(
                f"timer {key!r} is {existing['status']}: only a dead timer can be replayed",
                field="key",
            )

        timer = await self._run(self._write(run))
        self._announce(timer.run_at)
        return timer

    # -- working ----------------------------------------------------------------------------
    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        params = _claim_params(namespace, types)

        def run(conn: sqlite3.Connection) -> datetime | None:
            value = conn.execute(Q["next_run_at"], params).fetchone()[0]
            return None if value is None else from_micros(value)

        return await self._run(run)

    async def claim_due(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
    ) -> list[Claimed]:
        now_us = to_micros(now)
        params = _claim_params(namespace, types)
        params.update(now=now_us, limit=limit, node_id=node_id, lease_until=to_micros(lease_until))

        def run(conn: sqlite3.Connection) -> list[Claimed]:
            cursor = conn.cursor()
            cursor.row_factory = None  # plain tuples in TIMER_COLUMNS order: the hot path
            rows: list[tuple[Any, ...]] = cursor.execute(Q["claim_due"], params).fetchall()
            if not rows:
                return []
            rows.sort(key=_run_at_then_id)
            batch = dump_json([(row[0], row[8]) for row in rows])
            conn.execute(Q["open_attempts"], {"batch": batch, "node_id": node_id, "now": now_us})
            instants = InstantCache()
            return [claimed_from_tuple(row, instants) for row in rows]

        return await self._run(self._write(run))

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        now_us = to_micros(now)

        done = [f for f in finishes if f.outcome is Outcome.DONE]
        others = (
            [f for f in finishes if f.outcome is not Outcome.DONE]
            if len(done) < len(finishes)
            else []
        )

        def run(conn: sqlite3.Connection) -> set[int]:
            lost: set[int] = set()
            if done:
                lost.update(_finish_done(conn, done, node_id, now_us))
            for finish in others:
                params = {
                    "timer_id": finish.timer_id,
                    "attempt": finish.attempt,
                    "node_id": node_id,
                    "now": now_us,
                    "error": finish.error,
                    "traceback": finish.traceback,
                    "outcome": finish.outcome.value,
                    "run_at": to_micros(finish.run_at) if finish.run_at else now_us,
                }
                if not _apply_finish(conn, finish.outcome, params):
                    lost.add(finish.timer_id)
            return lost

        lost = await self._run(self._write(run))
        retried = [f.run_at for f in finishes if f.run_at is not None and f.timer_id not in lost]
        released = [f for f in finishes if f.outcome is Outcome.RELEASED]
        if retried or released:
            self._announce(min(retried) if retried else None)
        return lost

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
    ) -> bool:
        """Run a handler's writes and mark its timer done in one transaction (exactly-once).

        ``effect`` gets this store's ``sqlite3.Connection`` on the store's own thread, inside the
        write transaction; it must be a plain function (nothing else runs meanwhile).
        """
        params = {
            "timer_id": timer_id,
            "attempt": attempt,
            "node_id": node_id,
            "now": to_micros(now),
            "error": None,
            "traceback": None,
            "outcome": Outcome.DONE.value,
        }

        def run(conn: sqlite3.Connection) -> bool:
            if conn.execute(Q["owned_attempt"], params).fetchone() is None:
                return False
            result = effect(conn)
            if inspect.isawaitable(result):
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                raise TypeError(
                    "on SQLite a transactional handler must be a plain function, not async"
                )
            return _apply_finish(conn, Outcome.DONE, params)

        return await self._run(self._write(run))

    async def put_timers_in(
        self,
        connection: object,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """Scheduling inside the caller's own transaction is a PostgreSQL feature."""
        raise InvalidInput(
            "transaction", "scheduling inside your own transaction needs the PostgreSQL store"
        )

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        now_us = to_micros(now)

        def run(conn: sqlite3.Connection) -> tuple[set[int], list[int]]:
            lost: set[int] = set()
            due: list[int] = []
            for f in fan_outs:
                params: dict[str, Any] = {
                    "timer_id": f.timer_id,
                    "attempt": f.attempt,
                    "node_id": node_id,
                    "now": now_us,
                }
                row = conn.execute(Q["fan_out_event"], params).fetchone()
                if row is None:
                    lost.add(f.timer_id)
                    continue
                due.append(row[0])
                pairs = [(delivery_key(f.key, d), d) for d in f.destinations]
                conn.execute(Q["fan_out_deliveries"], {**params, "deliveries": dump_json(pairs)})
                note = fan_out_note(f.destinations)
                conn.execute(
                    Q["close_attempt"],
                    {
                        **params,
                        "outcome": Outcome.FANNED_OUT.value,
                        "error": note,
                        "traceback": None,
                    },
                )
            return lost, due

        if not fan_outs:
            return set()
        lost, due = await self._run(self._write(run))
        if due:
            self._announce(from_micros(min(due)))
        return lost

    async def sweep_unsubscribed(
        self, namespace: str, subscribed: ClaimFilter, before: datetime, now: datetime, limit: int
    ) -> list[int]:
        params = _claim_params(namespace, subscribed)
        params.update(before=to_micros(before), now=to_micros(now), limit=limit)

        def run(conn: sqlite3.Connection) -> list[int]:
            return [row[0] for row in conn.execute(Q["sweep_unsubscribed"], params)]

        return await self._run(self._write(run))

    async def rescue(self, now: datetime) -> list[int]:
        now_us = to_micros(now)

        def run(conn: sqlite3.Connection) -> list[int]:
            rescued = []
            for timer_id, attempt, owner in conn.execute(
                Q["expired_leases"], {"now": now_us}
            ).fetchall():
                error = f"lease expired: node {owner} stopped renewing it"
                params = {
                    "timer_id": timer_id,
                    "attempt": attempt,
                    "now": now_us,
                    "error": error,
                    "traceback": None,
                }
                if conn.execute(Q["rescue_timer"], params).rowcount:
                    params["outcome"] = Outcome.LOST.value
                    conn.execute(Q["close_attempt"], params)
                    rescued.append(timer_id)
            return rescued

        rescued = await self._run(self._write(run))
        if rescued:
            self._announce(now)
        return rescued

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        params = {"node_id": node_id, "now": to_micros(now)}
        return await self._run(
            self._write(lambda c: c.execute(Q["expire_leases_of"], params).rowcount)
        )

    # -- nodes ------------------------------------------------------------------------------
    async def register_node(self, node: Node) -> None:
        params = {
            "id": node.id,
            "host": node.host,
            "pid": node.pid,
            "role": node.role,
            "started_at": to_micros(node.started_at),
            "heartbeat_at": to_micros(node.heartbeat_at),
            "in_flight": node.in_flight,
            "subscriptions": dump_json([s.to_dict() for s in node.subscriptions]),
        }
        await self._run(lambda c: c.execute(Q["register_node"], params))

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[int],
        clock_offset: timedelta | None = None,
    ) -> int:
        """``clock_offset`` is not kept: on SQLite every node runs on the database's clock."""
        params = {
            "node_id": node_id,
            "now": to_micros(now),
            "lease_until": to_micros(lease_until),
            "in_flight": len(held),
            "held": json.dumps(list(held)),
        }

        def run(conn: sqlite3.Connection) -> int:
            conn.execute(Q["heartbeat_node"], params)
            return conn.execute(Q["extend_leases"], params).rowcount

        return await self._run(self._write(run))

    async def deregister_node(self, node_id: str) -> None:
        await self._run(lambda c: c.execute(Q["deregister_node"], (node_id,)))

    async def list_nodes(self) -> list[Node]:
        return await self._run(lambda c: [node_from_row(r) for r in c.execute(Q["list_nodes"])])


def _finish_done(
    conn: sqlite3.Connection, done: Sequence[Finish], node_id: str, now_us: int
) -> list[int]:
    """Apply many DONE finishes in two statements; return the timer ids no longer ours."""
    batch = dump_json([(f.timer_id, f.attempt) for f in done])
    params = {"batch": batch, "node_id": node_id, "now": now_us}
    changed = {row[0] for row in conn.execute(Q["finish_done_many"], params)}
    lost = [f.timer_id for f in done if f.timer_id not in changed]
    if changed:
        if lost:
            params["batch"] = dump_json(
                [(f.timer_id, f.attempt) for f in done if f.timer_id in changed]
            )
        conn.execute(Q["close_attempts_done"], {"batch": params["batch"], "now": now_us})
    return lost


def _run_at_then_id(row: tuple[Any, ...]) -> tuple[int, int]:
    return row[12], row[0]


def _returning(sql: str) -> tuple[str, ...]:
    """The column names of a query's RETURNING clause."""
    clause = sql.rsplit("RETURNING", 1)[1]
    return tuple(name.strip() for name in clause.split(","))


if _returning(Q["claim_due"]) != TIMER_COLUMNS or any(  # pragma: no cover
    _returning(Q[name]) != (*TIMER_COLUMNS, "version") for name in ("insert_timer", "upsert_timer")
):
    raise RuntimeError("queries.sql: the RETURNING lists must match rows.TIMER_COLUMNS")


class _Write(Generic[R]):
    """A function marked as a write: :meth:`SqliteStore._run` runs it in a transaction."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[sqlite3.Connection], R]) -> None:
        self.fn = fn

    def __call__(self, conn: sqlite3.Connection) -> R:
        """Run alone, in a transaction of its own."""
        _begin_immediate(conn)
        try:
            result = self.fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return result


_POLL_FIRST = 0.0001
_POLL_MAX = 0.002


def _enter_wal(conn: sqlite3.Connection, patience: float) -> object:
    """``PRAGMA journal_mode = WAL``, tried again while another process holds the file.

    Two processes opening a brand-new file at once (a worker starting, a CLI command beside it)
    both switch it to WAL, which needs the exclusive lock; SQLite sees them wait for each other
    and fails one at once with "database is locked", without its busy handler. The switch is
    retried every few milliseconds for up to ``patience`` seconds. Returns the mode reached.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            return conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
            if not busy or time.monotonic() >= deadline:
                raise
        time.sleep(0.005)


def _begin_immediate(conn: sqlite3.Connection) -> None:
    """``BEGIN IMMEDIATE``, waiting for another process's write lock in short steps.

    SQLite's own busy handler sleeps 1, 2, 5, 10, … 100 ms between tries, so a writer that
    finds the lock taken for 3 ms waits 8, and two processes sharing a file (a producer and a
    worker) see 100-ms latency tails. Polling every 0.1 to 2 ms keeps the wait close to the
    holder's commit time; the connection's busy timeout still bounds the whole wait.
    """
    patience_ms = int(conn.execute("PRAGMA busy_timeout").fetchone()[0])
    conn.execute("PRAGMA busy_timeout = 0")
    try:
        deadline = time.monotonic() + patience_ms / 1000
        pause = _POLL_FIRST
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                busy = exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
                if not busy or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, _POLL_MAX)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {patience_ms}")


def _undo_savepoint(conn: sqlite3.Connection) -> bool:
    """Roll back to the write's savepoint; False when the whole transaction is gone."""
    if not conn.in_transaction:
        return False
    try:
        conn.execute("ROLLBACK TO duetime_write")
        conn.execute("RELEASE duetime_write")
    except sqlite3.Error:
        _rollback(conn)
        return False
    return True


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def _apply_finish(conn: sqlite3.Connection, outcome: Outcome, params: dict[str, Any]) -> bool:
    """Run the fenced transition for one finish; False when the attempt is no longer ours."""
    if outcome is Outcome.DONE:
        changed = conn.execute(Q["finish_done"], params).rowcount
    elif outcome is Outcome.RETRY:
        changed = conn.execute(Q["finish_retry"], params).rowcount
    elif outcome is Outcome.SNOOZED:
        changed = conn.execute(Q["finish_snoozed"], params).rowcount
    elif outcome is Outcome.RELEASED:
        changed = conn.execute(Q["finish_released"], params).rowcount
        if changed:
            conn.execute(Q["drop_attempt"], params)
        return bool(changed)
    else:
        status = _FINAL_OUTCOMES[outcome]
        assert status is not None
        changed = conn.execute(Q["finish_final"], {**params, "status": status.value}).rowcount
    if changed:
        conn.execute(Q["close_attempt"], params)
    return bool(changed)


KEY_DRAWS = 3
"""Keys drawn for a timer before a clash is reported. 80 random bits a millisecond do not
repeat; a generator that did would be a fault to report, not to hide."""


def _insert_generated(cursor: sqlite3.Cursor, params: dict[str, Any]) -> tuple[Any, ...]:
    """Insert a timer under the key the store generated for it, or under another one drawn
    while a stored timer holds it (never merged with that timer)."""
    for _ in range(KEY_DRAWS):
        row: tuple[Any, ...] | None = cursor.execute(Q["insert_timer"], params).fetchone()
        if row is not None:
            return row
        params["key"] = generate_key()
    raise AlreadyExists(
        f"keys generated for a timer were held by stored timers in {KEY_DRAWS} draws",
        field="key",
    )


def _timer_params(timer: NewTimer, now_us: int) -> dict[str, Any]:
    return {
        "namespace": timer.namespace,
        "key": generate_key() if timer.key is None else timer.key,
        "type": timer.type,
        "payload": payload_text(timer),
        "subject": timer.subject,
        "correlation_id": timer.correlation_id,
        "due_at": to_micros(timer.due_at),
        "local": timer.local.isoformat() if timer.local else None,
        "timezone": timer.timezone,
        "disambiguation": timer.disambiguation,
        "expires_after": (
            None
            if timer.expires_after is None
            else int(timer.expires_after.total_seconds() * 1_000_000)
        ),
        "max_attempts": timer.max_attempts,
        "producer": timer.producer,
        "now": now_us,
    }


def _claim_params(namespace: str, types: Sequence[str] | ClaimFilter | None) -> dict[str, Any]:
    """The subscription filter of claim_due, next_run_at and sweep_unsubscribed: ``None`` takes
    every row, a list of types is :meth:`ClaimFilter.of_types`. Globs go as they are: SQLite's
    GLOB reads ``*`` as routes do, and event types hold no other GLOB metacharacter."""
    if types is None:
        claim = ClaimFilter()
    elif isinstance(types, ClaimFilter):
        claim = types
    else:
        claim = ClaimFilter.of_types(types)
    return {
        "namespace": namespace,
        "everything": types is None,
        "types": dump_json(claim.types),
        "patterns": dump_json(claim.patterns),
        "destinations": dump_json(claim.destinations),
        "handler_types": dump_json(claim.handler_types),
    }


def _split_statements(sql: str) -> list[str]:
    """Split a migration into statements (migrations hold no semicolons inside literals)."""
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]


def _now_micros() -> int:
    from duetime.clock import SystemClock

    return to_micros(SystemClock().now())
