"""A SQLite store's workers: claiming due timers, their outcomes and fan-outs, rescuing lost
leases, and the nodes that hold them.

:class:`SqliteWorking` is a part of :class:`~duetime.store.sqlite.store.SqliteStore`, each
method one call on the file's connection thread (see :mod:`.database`); the SQL lives in
``claims.sql``, ``outcomes.sql`` and ``nodes.sql`` under each method's name.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from duetime.model import (
    Claimed,
    ClaimFilter,
    FanOut,
    Finish,
    HeldRow,
    Node,
    Outcome,
)
from duetime.model.deliveries import delivery_key, fan_out_note
from duetime.store.codec import dump_json, from_micros, to_micros
from duetime.store.protocol import ClockSampler
from duetime.store.queries import load_queries
from duetime.store.sqlite.claims import take_rows
from duetime.store.sqlite.database import SqliteDatabase
from duetime.store.sqlite.finishing import apply_finish, finish_done
from duetime.store.sqlite.rows import TIMER_COLUMNS, node_from_row, returning

Q = load_queries("duetime.store.sqlite", "claims.sql", "outcomes.sql", "nodes.sql")


class SqliteWorking:
    """What workers do to timers, and their nodes' registrations."""

    _db: SqliteDatabase

    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        params = claim_params(namespace, types)

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
        *,
        due_by: datetime | None = None,
    ) -> list[Claimed]:
        now_us = to_micros(now)
        params = claim_params(namespace, types)
        params.update(
            now=now_us,
            due_by=now_us if due_by is None else to_micros(due_by),
            limit=limit,
            node_id=node_id,
            lease_until=to_micros(lease_until),
        )

        def run(conn: sqlite3.Connection) -> list[Claimed]:
            return take_rows(conn, Q["claim_due"], params, node_id, now_us, self._db.sealing)

        return await self._db.write(run)

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        now_us = to_micros(now)

        done = [f for f in finishes if f.outcome is Outcome.DONE]
        others = (
            [f for f in finishes if f.outcome is not Outcome.DONE]
            if len(done) < len(finishes)
            else []
        )

        seal_text = self._db.sealing.seal_error

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
                    "error": seal_text(finish.error),
                    "traceback": seal_text(finish.traceback),
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
        params = claim_params(namespace, subscribed)
        params.update(before=to_micros(before), now=to_micros(now), limit=limit)

        def run(conn: sqlite3.Connection) -> list[int]:
            return [row[0] for row in conn.execute(Q["sweep_unsubscribed"], params)]

        return await self._db.write(run)

    async def unsubscribed_types(
        self, namespace: str, subscribed: ClaimFilter, limit: int
    ) -> list[tuple[str, int]]:
        params = claim_params(namespace, subscribed)
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
            params = claim_params(namespace, subscribed(nodes))
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


if returning(Q["claim_due"]) != TIMER_COLUMNS:  # pragma: no cover
    raise RuntimeError("claims.sql: claim_due's RETURNING list must match rows.TIMER_COLUMNS")


def claim_params(namespace: str, types: Sequence[str] | ClaimFilter | None) -> dict[str, Any]:
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
