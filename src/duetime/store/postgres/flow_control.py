"""Flow control in PostgreSQL: the limits table, and claims that obey it (see
:mod:`duetime.store.flow_grants`). A limit's claim is one transaction that locks the limit's row
(``FOR UPDATE``): claims of the types it governs run one at a time across every node, on the
database's clock; other claims never wait for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from psycopg.rows import DictRow, dict_row

from duetime.model import Claimed, ClaimFilter, Page
from duetime.model.flow_rules import (
    FlowPlan,
    FlowRule,
    FlowStatus,
    Governed,
    RuledClaim,
    RuleFilter,
)
from duetime.store.codec import like_pattern, new_claim_token
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
from duetime.store.postgres.claimed_rows import claim_known, claimed_rows
from duetime.store.postgres.claims import give_back_if_unread
from duetime.store.postgres.database import Conn, Database, Statement
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "claims.sql", "limits.sql", "namespaces.sql")
Types = Sequence[str] | ClaimFilter | None


def _instant(value: Any) -> datetime:
    return value  # type: ignore[no-any-return]


def _globs(rows: RuleFilter) -> dict[str, Any]:
    return {
        "only": like_pattern(rows.only),
        "excluded": [like_pattern(p) for p in rows.excluded],
        "dest": rows.destination,
        "dest_excluded": list(rows.destinations),
    }


def _tally_params(tally: RuleTally) -> dict[str, Any]:
    return {
        "limits": list(tally.limits),
        "limit_likes": [like_pattern(p) for p in tally.limits],
        "destinations": [d for d, _ in tally.destinations],
        "destination_rules": [p for _, p in tally.destinations],
        "shown": [p for p, _ in tally.shown],
        "shown_likes": [like_pattern(p) for p, _ in tally.shown],
        "pauses_only": [only for _, only in tally.shown],
    }


class PostgresLimits:
    """The limits part of a :class:`~duetime.store.postgres.store.PostgresStore`."""

    def __init__(self, db: Database, filter_params: Callable[[Types], dict[str, Any]]) -> None:
        self._db = db
        self._filter = filter_params

    async def list_rules(self, namespace: str, *, claiming: bool = False) -> list[FlowRule]:
        async def run(conn: Conn) -> list[FlowRule]:
            rows = await fetch_all(conn, Q["list_limits"], {"namespace": namespace})
            return [rule_from_row(row, _instant) for row in rows]

        return await self._db.read(run, lane="claims" if claiming else None)

    async def put_limit(self, rule: FlowRule, now: datetime, cap: int | None = None) -> FlowRule:
        params = {**rule_params(rule), "now": now}

        async def run(conn: Conn) -> FlowRule:
            if cap is not None and rule.destination is None:
                await conn.execute(Q["lock_namespace_row"], params)
                check_room((await fetch_all(conn, Q["limit_room"], params))[0], rule, cap)
            rows = await fetch_all(conn, Q["put_limit"], params)
            return rule_from_row(rows[0], _instant)

        return await self._db.write(run)

    async def remove_limit(self, namespace: str, pattern: str, now: datetime) -> bool:
        params = {"namespace": namespace, "pattern": pattern, "now": now}

        async def run(conn: Conn) -> bool:
            rows = await fetch_all(conn, Q["remove_limit"], params)
            await conn.execute(Q["prune_limits"], params)
            return bool(rows)

        return await self._db.write(run)

    async def set_paused(
        self, namespace: str, pattern: str, paused: bool, now: datetime, cap: int | None = None
    ) -> FlowRule | None:
        params = {"namespace": namespace, "pattern": pattern, "paused": paused, "now": now}

        async def run(conn: Conn) -> FlowRule | None:
            if paused and cap is not None:
                await conn.execute(Q["lock_namespace_row"], params)
                room = (await fetch_all(conn, Q["limit_room"], params))[0]
                check_room(room, FlowRule(namespace, pattern), cap)
            rows = await fetch_all(conn, Q["set_paused"], params)
            cursor = await conn.execute(Q["prune_limits"], params)
            return None if cursor.rowcount else rule_from_row(rows[0], _instant)

        return await self._db.write(run)

    async def status(
        self, namespace: str, now: datetime, cursor: str | None = None, limit: int | None = None
    ) -> Page[FlowStatus]:
        params = {"namespace": namespace, "now": now}

        async def run(conn: Conn) -> Page[FlowStatus]:
            rows = await fetch_all(conn, Q["list_limits"], params)
            rules = [rule_from_row(row, _instant) for row in rows]
            size = len(rules) if limit is None else limit
            shown = shown_rules(rules, cursor, size)
            counted: list[DictRow] = []
            if shown:
                tally = _tally_params(rule_tally(rules, shown[:size]))
                counted = await fetch_all(conn, Q["tally_rules"], {**params, **tally})
            return tallied_page(shown, counted, size, _instant)

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
        token = new_claim_token()
        horizon = now if due_by is None else due_by
        base = {
            "namespace": namespace,
            **self._filter(types),
            "now": now,
            "due_by": horizon,
            "node_id": node_id,
            "lease_until": lease_until,
            "claim_token": token,
        }
        known = claim_known(namespace, node_id, lease_until, now, token)
        rows_of = claimed_rows(known, self._db.sealing)

        async def by_limit(governed: Governed, room: int) -> tuple[list[Claimed], Grant | None]:
            pattern = governed.rule.pattern
            globs = _globs(plan.filter_of(governed))
            shadows = [like_pattern(p) for p in governed.shadows]
            key = {"namespace": namespace, "pattern": pattern}

            async def run(conn: Conn) -> tuple[list[Claimed], Grant | None]:
                # In a pipeline (Database.pipelined_write), three round trips: BEGIN, the lock
                # and the count (which runs once the lock is held: statements run in turn, so
                # it sees the running rows of the claim before); the claim; the rate's new
                # state and COMMIT.
                await conn.execute(Q["claim_in_order"], self._db.settings.claim_params)
                lock = conn.cursor(row_factory=dict_row)
                await lock.execute(Q["lock_limit"], key)
                count = conn.cursor(row_factory=dict_row)
                await count.execute(Q["count_leased"], {**key, **globs})
                locked = await lock.fetchall()
                running = int((await count.fetchall())[0]["count"])
                if not locked:
                    return [], None  # removed since the plan was read
                row = locked[0]
                db_now: datetime = row["db_now"]
                granted = grant(row, rate_state(row, _instant), running, room, db_now)
                if granted.rows <= 0:
                    return [], granted
                params = {**base, **globs, "limit": granted.rows}
                partitioned = row["partition_by"] is not None
                if partitioned:
                    params.update(partition_params(row, granted.rows), shadows=shadows)
                query = Q["claim_partitioned" if partitioned else "claim_ruled"]
                async with conn.cursor(row_factory=rows_of, binary=True) as cur:
                    await cur.execute(query, params)
                    claimed: list[Claimed] = await cur.fetchall()
                if partitioned and len(claimed) < granted.rows:
                    left = await fetch_value(conn, Q["next_run_ruled"], {**base, **globs})
                    if left is not None and left <= horizon:
                        granted = partitions_full(granted, len(claimed), db_now)
                state = spent(granted, db_now, len(claimed))
                if state is not None:
                    params = {**key, **state_params(state, _instant)}
                    await conn.execute(Q["spend_tokens"], params)
                return claimed, granted

            return await self._db.pipelined_write(run, lane="claims")  # see Database.LANES

        async def plain(rows: RuleFilter, room: int) -> list[Claimed]:
            params = {**base, **_globs(rows), "limit": room}
            claiming = self._db.atomic(
                [
                    Statement(Q["claim_in_order"], self._db.settings.claim_params),
                    Statement(Q["claim_ruled"], params, rows_of, binary=True),
                ],
                lane="claims",
            )
            return list(await give_back_if_unread(self._db, claiming, node_id, token, now))

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
        base = {"namespace": namespace, **self._filter(types)}

        async def run(conn: Conn) -> datetime | None:
            found: list[datetime] = []
            for rows in next_run_parts(plan, held, ungoverned):
                value = await fetch_value(conn, Q["next_run_ruled"], {**base, **_globs(rows)})
                if value is not None:
                    found.append(value)
            return min(found, default=None)

        return await self._db.read(run)
