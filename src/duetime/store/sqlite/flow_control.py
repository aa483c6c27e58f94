"""Flow control in SQLite: the limits table, and claims that obey it (see
:mod:`duetime.store.flow_grants`). A limit's claim runs inside one write transaction, which SQLite
serialises across processes; the rate's clock is this machine's, read inside it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from duetime.model import Claimed, ClaimFilter, Page
from duetime.model.flow_rules import (
    FlowPlan,
    FlowRule,
    FlowStatus,
    Governed,
    RuledClaim,
    RuleFilter,
)
from duetime.store.codec import dump_json, from_micros, to_micros
from duetime.store.flow_grants import (
    Grant,
    RuleTally,
    check_room,
    claim_under,
    grant,
    next_run_parts,
    partition_params,
    partitions_full,
    rate_state,
    rule_from_row,
    rule_params,
    rule_tally,
    shown_rules,
    spent,
    state_params,
    tallied_page,
)
from duetime.store.queries import load_queries
from duetime.store.sqlite.claims import take_rows
from duetime.store.sqlite.database import SqliteDatabase
from duetime.support.budgets import checked

Q = load_queries("duetime.store.sqlite", "claims.sql", "limits.sql")
Types = Sequence[str] | ClaimFilter | None


def _globs(rows: RuleFilter) -> dict[str, Any]:
    return {
        "only": rows.only,
        "excluded": dump_json(list(rows.excluded)),
        "dest": rows.destination,
        "dest_excluded": dump_json(list(rows.destinations)),
    }


def _tally_params(tally: RuleTally) -> dict[str, Any]:
    return {
        "limits": dump_json(list(tally.limits)),
        "by_destination": dump_json(dict(tally.destinations)),
        "shown": dump_json([[pattern, int(only)] for pattern, only in tally.shown]),
    }


def _rows(conn: sqlite3.Connection, query: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    cursor = conn.execute(query, params)
    names = [c[0] for c in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in checked(cursor)]


class SqliteLimits:
    """The limits part of a :class:`~duetime.store.sqlite.store.SqliteStore`."""

    def __init__(
        self, db: SqliteDatabase, filter_params: Callable[[str, Types], dict[str, Any]]
    ) -> None:
        self._db = db
        self._filter = filter_params

    async def list_rules(self, namespace: str, *, claiming: bool = False) -> list[FlowRule]:
        def run(conn: sqlite3.Connection) -> list[FlowRule]:
            rows = _rows(conn, Q["list_limits"], {"namespace": namespace})
            return [rule_from_row(row, from_micros) for row in rows]

        return await self._db.read(run)

    async def put_limit(self, rule: FlowRule, now: datetime, cap: int | None = None) -> FlowRule:
        params = {**rule_params(rule), "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> FlowRule:
            check_room(_rows(conn, Q["limit_room"], params)[0], rule, cap)
            return rule_from_row(_rows(conn, Q["put_limit"], params)[0], from_micros)

        return await self._db.write(run)

    async def remove_limit(self, namespace: str, pattern: str, now: datetime) -> bool:
        params = {"namespace": namespace, "pattern": pattern, "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> bool:
            rows = _rows(conn, Q["remove_limit"], params)
            conn.execute(Q["prune_limits"], params)
            return bool(rows)

        return await self._db.write(run)

    async def set_paused(
        self, namespace: str, pattern: str, paused: bool, now: datetime, cap: int | None = None
    ) -> FlowRule | None:
        params = {
            "namespace": namespace,
            "pattern": pattern,
            "paused": int(paused),
            "now": to_micros(now),
        }

        def run(conn: sqlite3.Connection) -> FlowRule | None:
            if paused:
                room = _rows(conn, Q["limit_room"], params)[0]
                check_room(room, FlowRule(namespace, pattern), cap)
            rows = _rows(conn, Q["set_paused"], params)
            pruned = conn.execute(Q["prune_limits"], params).rowcount
            return None if pruned else rule_from_row(rows[0], from_micros)

        return await self._db.write(run)

    async def status(
        self, namespace: str, now: datetime, cursor: str | None = None, limit: int | None = None
    ) -> Page[FlowStatus]:
        params = {"namespace": namespace, "now": to_micros(now)}

        def run(conn: sqlite3.Connection) -> Page[FlowStatus]:
            rows = _rows(conn, Q["list_limits"], params)
            rules = [rule_from_row(row, from_micros) for row in checked(rows)]
            size = len(rules) if limit is None else limit
            shown = shown_rules(rules, cursor, size)
            counted = []
            if shown:
                tally = rule_tally(rules, shown[:size])
                counted = _rows(conn, Q["tally_rules"], {**params, **_tally_params(tally)})
            return tallied_page(shown, counted, size, from_micros)

        return await self._db.read(run)

    async def claim(
        self,
        namespace: str,
        types: Types,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
        plan: FlowPlan,
        *,
        ungoverned: bool = True,
        due_by: datetime | None = None,
    ) -> RuledClaim:
        now_us = to_micros(now)
        horizon_us = now_us if due_by is None else to_micros(due_by)
        base = {
            **self._filter(namespace, types),
            "now": now_us,
            "due_by": horizon_us,
            "node_id": node_id,
            "lease_until": to_micros(lease_until),
        }

        async def by_limit(governed: Governed, room: int) -> tuple[list[Claimed], Grant | None]:
            pattern = governed.rule.pattern
            globs = _globs(plan.filter_of(governed))
            shadows = dump_json(list(governed.shadows))
            key = {"namespace": namespace, "pattern": pattern}

            def run(conn: sqlite3.Connection) -> tuple[list[Claimed], Grant | None]:
                found = _rows(conn, Q["get_limit"], key)
                if not found:
                    return [], None  # removed since the plan was read
                row = found[0]
                clock = datetime.now(UTC)  # inside the write lock: the claims' order
                running = 0
                if row["concurrency"] is not None:
                    params = {**key, **globs}
                    running = int(conn.execute(Q["count_leased"], params).fetchone()[0])
                granted = grant(row, rate_state(row, from_micros), running, room, clock)
                if granted.rows <= 0:
                    return [], granted
                params = {**base, **globs, "limit": granted.rows}
                partitioned = row["partition_by"] is not None
                if partitioned:
                    params.update(partition_params(row, granted.rows), shadows=shadows)
                query = Q["claim_partitioned" if partitioned else "claim_ruled"]
                claimed = take_rows(conn, query, params, node_id, now_us, self._db.sealing)
                if partitioned and len(claimed) < granted.rows:
                    left = conn.execute(Q["next_run_ruled"], {**base, **globs}).fetchone()[0]
                    if left is not None and left <= horizon_us:
                        granted = partitions_full(granted, len(claimed), clock)
                state = spent(granted, clock, len(claimed))
                if state is not None:
                    conn.execute(Q["spend_tokens"], {**key, **state_params(state, to_micros)})
                return claimed, granted

            return await self._db.write(run)

        async def plain(rows: RuleFilter, room: int) -> list[Claimed]:
            params = {**base, **_globs(rows), "limit": room}

            def run(conn: sqlite3.Connection) -> list[Claimed]:
                return take_rows(conn, Q["claim_ruled"], params, node_id, now_us, self._db.sealing)

            return await self._db.write(run)

        return await claim_under(plan, limit, by_limit, plain, ungoverned, types)

    async def next_run_at(
        self,
        namespace: str,
        types: Types,
        plan: FlowPlan,
        held: Sequence[str],
        *,
        ungoverned: bool = True,
    ) -> datetime | None:
        base = self._filter(namespace, types)

        def run(conn: sqlite3.Connection) -> datetime | None:
            found: list[int] = []
            for rows in next_run_parts(plan, held, ungoverned):
                value = conn.execute(Q["next_run_ruled"], {**base, **_globs(rows)})
                earliest = value.fetchone()[0]
                if earliest is not None:
                    found.append(earliest)
            return from_micros(min(found)) if found else None

        return await self._db.read(run)
