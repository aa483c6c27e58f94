"""The embedded SQLite store: one file in WAL mode, safe for several processes on one machine.

Timers and nodes are written here, each method one call on the file's connection thread (see
:mod:`.database`: group commit, cross-process wake-ups); the parts — schedules, history, tokens,
transactional handlers, the outbox — are objects of their own on the same database.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from duetime.model import (
    Attempt,
    BulkAction,
    Claimed,
    ClaimFilter,
    DeadType,
    FanOut,
    Finish,
    HeldRow,
    NewTimer,
    Node,
    OnConflict,
    Outcome,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.deliveries import delivery_key, fan_out_note
from duetime.model.finding import TimerSort
from duetime.store.codec import dump_json, from_micros, maybe_from_micros, to_micros
from duetime.store.cursors import (
    TYPES_SCAN,
    bulk_params,
    page,
    sorted_cursor,
    timer_listing,
)
from duetime.store.gauges import gauges
from duetime.store.listeners import WakeupListener
from duetime.store.protocol import ClockSampler
from duetime.store.queries import load_queries
from duetime.store.room import check_namespace_room
from duetime.store.sqlite.audit import SqliteAudit
from duetime.store.sqlite.claims import take_rows
from duetime.store.sqlite.database import SqliteDatabase, path_from_url
from duetime.store.sqlite.deletes import delete_ids, delete_key
from duetime.store.sqlite.finishing import apply_finish, finish_done
from duetime.store.sqlite.history import SqliteHistory
from duetime.store.sqlite.limits import SqliteLimits
from duetime.store.sqlite.outbox import SqliteOutbox
from duetime.store.sqlite.rows import (
    TIMER_COLUMNS,
    attempt_from_row,
    node_from_row,
    timer_from_row,
)
from duetime.store.sqlite.schedules import SqliteSchedules
from duetime.store.sqlite.schema import migrate, schema_version
from duetime.store.sqlite.tokens import SqliteTokens
from duetime.store.sqlite.transactions import SqliteTransactions
from duetime.store.sqlite.writes import earliest_written, timer_rows, transition, write_timers
from duetime.store.transitions import Transition

Q = load_queries("duetime.store.sqlite")


class SqliteStore:
    """Store backed by one SQLite file (WAL, ``synchronous=FULL``)."""

    def __init__(self, url: str, *, busy_timeout: float = 30.0) -> None:
        self.url = url
        self.path = path_from_url(url)
        self._db = SqliteDatabase(self.path, busy_timeout=busy_timeout)
        self.schedules = SqliteSchedules(self._db)
        self.history = SqliteHistory(self._db)
        self.tokens = SqliteTokens(self._db)
        self.audit = SqliteAudit(self._db)
        self.limits = SqliteLimits(self._db, _claim_params)
        self.transactions = SqliteTransactions(self._db)
        self.outbox = SqliteOutbox(self._db)

    async def open(self, *, migrate: bool = True) -> None:
        if self._db.is_open:
            return
        await self._db.open()
        if migrate:
            await self.migrate()
        await self.schedules.hear_releases()
        await self._db.listen()

    async def close(self) -> None:
        await self._db.close()

    async def change_marker(self) -> str:
        def run(conn: sqlite3.Connection) -> str:
            version = conn.execute(Q["data_version"]).fetchone()[0]
            return f"{version}.{conn.total_changes}"

        return await self._db.read(run)

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        self._db.listeners.add(listener)

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        self._db.listeners.remove(listener)

    # -- schema -----------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        return await self._db.read(migrate)

    async def schema_version(self) -> int:
        return await self._db.read(schema_version)

    async def db_now(self) -> datetime | None:
        """None: the database is a file on this machine, whose wall clock every process shares
        (so no process can be skewed against another)."""
        return None

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(Q["ensure_namespace"], (namespace, to_micros(now)))

        await self._db.read(run)

    async def namespace_exists(self, namespace: str) -> bool:
        def run(conn: sqlite3.Connection) -> bool:
            return conn.execute(Q["namespace_exists"], (namespace,)).fetchone() is not None

        return await self._db.read(run)

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        params = {
            "after": after,
            "limit": limit,
            "only": None if only is None else dump_json(list(only)),
        }
        return await self._db.read(
            lambda c: [row[0] for row in c.execute(Q["list_namespaces"], params)]
        )

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        given = dump_json(list(dict.fromkeys(names)))

        def run(conn: sqlite3.Connection) -> list[str]:
            (held,) = conn.execute(Q["namespaces_held"], {"up_to": cap}).fetchone()
            new = [row[0] for row in conn.execute(Q["namespaces_new"], {"names": given})]
            check_namespace_room(int(held), len(new), cap, field)
            conn.executemany(Q["ensure_namespace"], [(name, to_micros(now)) for name in new])
            return new

        return await self._db.write(run)

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        timers = list(timers)  # every request validated before the write lock is taken
        rows = timer_rows(timers, now)
        results = await self._db.write(lambda conn: write_timers(conn, timers, rows, on_conflict))
        earliest = earliest_written(results)
        if earliest is not None:
            self._db.announce(earliest)
        return results

    async def get_timer(self, namespace: str, key: str) -> Timer | None:
        def run(conn: sqlite3.Connection) -> Timer | None:
            row = conn.execute(Q["get_timer"], (namespace, key)).fetchone()
            return None if row is None else timer_from_row(row)

        return await self._db.read(run)

    async def list_timers(
        self,
        namespace: str,
        filter: TimerFilter,
        cursor: str | None,
        limit: int,
        sort: TimerSort = "newest",
    ) -> Page[Timer]:
        params = timer_listing(namespace, filter, cursor, limit, to_micros, json.dumps, sort)
        query = Q["list_timers" if sort == "newest" else f"list_timers_by_{sort}"]

        def run(conn: sqlite3.Connection) -> Page[Timer]:
            rows = conn.execute(query, params).fetchall()
            return page(rows, limit, timer_from_row, partial(sorted_cursor, sort))

        return await self._db.read(run)

    async def list_types(self, namespace: str, prefix: str, limit: int) -> list[str]:
        params = {"namespace": namespace, "prefix": prefix, "limit": limit, "scan": TYPES_SCAN}

        def run(conn: sqlite3.Connection) -> list[str]:
            return [row[0] for row in conn.execute(Q["list_types"], params)]

        return await self._db.read(run)

    async def list_attempts(self, timer_id: int) -> list[Attempt]:
        def run(conn: sqlite3.Connection) -> list[Attempt]:
            return [attempt_from_row(row) for row in conn.execute(Q["list_attempts"], (timer_id,))]

        return await self._db.read(run)

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        def run(conn: sqlite3.Connection) -> dict[Status, int]:
            counts = dict.fromkeys(Status, 0)
            for status, count in conn.execute(Q["count_by_status"], (namespace,)):
                counts[Status(status)] = count
            return counts

        return await self._db.read(run)

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        def run(conn: sqlite3.Connection) -> dict[str, tuple[dict[Status, int], datetime | None]]:
            counts = conn.execute(Q["gauge_counts"]).fetchall()
            earliest = conn.execute(Q["gauge_earliest"]).fetchall()
            return gauges(
                counts, ((name, None if at is None else from_micros(at)) for name, at in earliest)
            )

        return await self._db.read(run)

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._transition("cancel", namespace, key, now)

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("replay", namespace, key, now)
        self._db.announce(timer.run_at)
        return timer

    async def run_now(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("run_now", namespace, key, now)
        self._db.announce(timer.run_at)
        return timer

    async def delete(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._db.write(lambda conn: delete_key(conn, namespace, key, now))

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
        params = {
            **bulk_params(namespace, action, filter, now, to_micros, json.dumps, keys),
            "after_id": after_id,
            "limit": limit,
        }
        query = Q["bulk_batch" if keys is None else "bulk_keys"]

        def run(conn: sqlite3.Connection) -> tuple[int, int | None]:
            ids = [row[0] for row in conn.execute(query, params)]
            if not ids:
                return 0, None
            if action == "delete":
                return delete_ids(conn, ids, now), ids[-1]
            change = {"ids": json.dumps(ids), "now": to_micros(now)}
            return conn.execute(Q[f"bulk_{action}"], change).rowcount, ids[-1]

        changed, last = await self._db.write(run)
        if changed and action in ("replay", "run_now"):
            self._db.announce(now)
        return changed, last

    async def dead_types(self, namespace: str, limit: int) -> list[DeadType]:
        params = {"namespace": namespace, "limit": limit}

        def run(conn: sqlite3.Connection) -> list[DeadType]:
            return [
                DeadType(row[0], row[1], maybe_from_micros(row[2]), row[3])
                for row in conn.execute(Q["dead_types"], params)
            ]

        return await self._db.read(run)

    async def count_matching(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        now: datetime,
        keys: Sequence[str] | None = None,
    ) -> int:
        params = bulk_params(namespace, action, filter, now, to_micros, json.dumps, keys)
        query = Q["bulk_count" if keys is None else "count_keys"]

        def run(conn: sqlite3.Connection) -> int:
            count: int = conn.execute(query, params).fetchone()[0]
            return count

        return await self._db.read(run)

    async def _transition(self, name: Transition, namespace: str, key: str, now: datetime) -> Timer:
        return await self._db.write(lambda conn: transition(conn, name, namespace, key, now))

    # -- working ----------------------------------------------------------------------------
    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        params = _claim_params(namespace, types)

        def run(conn: sqlite3.Connection) -> datetime | None:
            value = conn.execute(Q["next_run_at"], params).fetchone()[0]
            return None if value is None else from_micros(value)

        return await self._db.read(run)

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
            return take_rows(conn, Q["claim_due"], params, node_id, now_us)

        return await self._db.write(run)

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
                lost.update(finish_done(conn, done, node_id, now_us))
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
                    "claim_token": finish.claim_token,
                    "started_at": to_micros(finish.started_at) if finish.started_at else None,
                }
                if not apply_finish(conn, finish.outcome, params):
                    lost.add(finish.timer_id)
            return lost

        lost = await self._db.write(run)
        retried = [f.run_at for f in finishes if f.run_at is not None and f.timer_id not in lost]
        released = [f for f in finishes if f.outcome is Outcome.RELEASED]
        if retried or released:
            self._db.announce(min(retried) if retried else None)
        return lost

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
                    "claim_token": f.claim_token,
                    "started_at": now_us,  # the delivery's start: the fan-out's
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
        lost, due = await self._db.write(run)
        if due:
            self._db.announce(from_micros(min(due)))
        return lost

    async def sweep_unsubscribed(
        self, namespace: str, subscribed: ClaimFilter, before: datetime, now: datetime, limit: int
    ) -> list[int]:
        params = _claim_params(namespace, subscribed)
        params.update(before=to_micros(before), now=to_micros(now), limit=limit)

        def run(conn: sqlite3.Connection) -> list[int]:
            return [row[0] for row in conn.execute(Q["sweep_unsubscribed"], params)]

        return await self._db.write(run)

    async def unsubscribed_types(
        self, namespace: str, subscribed: ClaimFilter, limit: int
    ) -> list[tuple[str, int]]:
        params = _claim_params(namespace, subscribed)
        params["limit"] = limit

        def run(conn: sqlite3.Connection) -> list[tuple[str, int]]:
            return [(row[0], row[1]) for row in conn.execute(Q["unsubscribed_types"], params)]

        return await self._db.read(run)

    async def rescue(self, now: datetime) -> list[int]:
        rescued = await self._db.write(lambda conn: _rescue(conn, now))
        if rescued:
            self._db.announce(now)
        return rescued

    async def rescue_and_sweep(
        self,
        now: datetime,
        namespace: str,
        subscribed: Callable[[list[Node]], ClaimFilter],
        before: datetime,
        limit: int,
    ) -> tuple[list[int], list[int], list[Node]]:
        def run(conn: sqlite3.Connection) -> tuple[list[int], list[int], list[Node]]:
            rescued = _rescue(conn, now)
            nodes = [node_from_row(r) for r in conn.execute(Q["list_nodes"])]
            params = _claim_params(namespace, subscribed(nodes))
            params.update(before=to_micros(before), now=to_micros(now), limit=limit)
            swept = [row[0] for row in conn.execute(Q["sweep_unsubscribed"], params)]
            return rescued, swept, nodes

        rescued, swept, nodes = await self._db.write(run)
        if rescued:
            self._db.announce(now)
        return rescued, swept, nodes

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        params = {"node_id": node_id, "now": to_micros(now)}
        return await self._db.write(lambda c: c.execute(Q["expire_leases_of"], params).rowcount)

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
        await self._db.read(lambda c: c.execute(Q["register_node"], params))

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[HeldRow],
        clock_offset: timedelta | None = None,
        sample_clock: ClockSampler | None = None,
    ) -> int:
        """``clock_offset`` is not kept and ``sample_clock`` not called: on SQLite every node
        runs on the database's clock, this machine's."""
        params = {
            "node_id": node_id,
            "now": to_micros(now),
            "lease_until": to_micros(lease_until),
            "in_flight": len(held),
            "held": json.dumps([list(row) for row in held]),
        }

        def run(conn: sqlite3.Connection) -> int:
            conn.execute(Q["heartbeat_node"], params)
            return conn.execute(Q["extend_leases"], params).rowcount

        return await self._db.write(run)

    async def deregister_node(self, node_id: str) -> None:
        await self._db.read(lambda c: c.execute(Q["deregister_node"], (node_id,)))

    async def list_nodes(self) -> list[Node]:
        return await self._db.read(lambda c: [node_from_row(r) for r in c.execute(Q["list_nodes"])])


def _rescue(conn: sqlite3.Connection, now: datetime) -> list[int]:
    """Rescue's work in the caller's write transaction; the ids rescued."""
    now_us = to_micros(now)
    rescued = []
    for timer_id, attempt, owner in conn.execute(Q["expired_leases"], {"now": now_us}).fetchall():
        params = {
            "timer_id": timer_id,
            "attempt": attempt,
            "now": now_us,
            "error": f"lease expired: node {owner} stopped renewing it",
            "traceback": None,
            "started_at": None,  # never known: the claim's instant stays
        }
        if conn.execute(Q["rescue_timer"], params).rowcount:
            params["outcome"] = Outcome.LOST.value
            conn.execute(Q["close_attempt"], params)
            rescued.append(timer_id)
    return rescued


def _returning(sql: str) -> tuple[str, ...]:
    """The column names of a query's RETURNING clause."""
    clause = sql.rsplit("RETURNING", 1)[1]
    return tuple(name.strip() for name in clause.split(","))


if _returning(Q["claim_due"]) != TIMER_COLUMNS or any(  # pragma: no cover
    _returning(Q[name]) != (*TIMER_COLUMNS, "version") for name in ("insert_timer", "upsert_timer")
):
    raise RuntimeError("queries.sql: the RETURNING lists must match rows.TIMER_COLUMNS")


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
