"""A PostgreSQL store's workers: claiming due timers, their outcomes and fan-outs, and rescuing
lost leases (the nodes that hold them register in :mod:`.nodes`).

Claims, finishes and rescues are single statements (a claim's transaction first turns sorting
off, see ``claim_in_order``), so their cost in round trips does not grow with the timers they
take. :class:`PostgresWorking` is a part of
:class:`~duetime.store.postgres.store.PostgresStore`; the SQL lives in ``claims.sql``,
``outcomes.sql`` and ``nodes.sql`` under each method's name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from duetime.model import (
    Claimed,
    ClaimFilter,
    FanOut,
    Finish,
    Node,
)
from duetime.model.deliveries import delivery_key, fan_out_note
from duetime.store.codec import like_pattern, new_claim_token
from duetime.store.postgres.claimed_rows import claim_known, claimed_rows
from duetime.store.postgres.claims import give_back_if_unread
from duetime.store.postgres.database import Conn, Database, Statement
from duetime.store.postgres.fetching import fetch_all, fetch_value
from duetime.store.postgres.finish_batch import FinishBatch
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.rows import Row, node_from_row
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "claims.sql", "outcomes.sql", "nodes.sql", "session.sql")


class PostgresWorking:
    """What workers do to timers."""

    _db: Database
    _notices: Notices

    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        params = {"namespace": namespace, **claim_params(types)}

        async def run(conn: Conn) -> datetime | None:
            earliest: datetime | None = await fetch_value(conn, Q["next_run_at"], params)
            return earliest

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
        token = new_claim_token()
        params = {
            "namespace": namespace,
            **claim_params(types),
            "now": now,
            "due_by": now if due_by is None else due_by,
            "limit": limit,
            "node_id": node_id,
            "lease_until": lease_until,
            "claim_token": token,
        }
        known = claim_known(namespace, node_id, lease_until, now, token)
        claimed = await give_back_if_unread(
            self._db,
            self._db.atomic(
                [
                    Statement(Q["claim_in_order"], self._db.settings.claim_params),
                    Statement(
                        Q["claim_due"], params, claimed_rows(known, self._db.sealing), binary=True
                    ),
                ],
                lane="claims",  # not behind the handlers: the lease runs from now
            ),
            node_id,
            token,
            now,
        )
        claimed.sort(key=lambda c: (-c.timer.priority, c.timer.run_at, c.timer.id))
        return claimed

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        batch = FinishBatch.of(finishes, node_id, now, self._db.sealing)
        if not batch.finishes:
            return set(batch.repeated)
        statements = [Statement(Q["finish_by_lookup"], {}), Statement(Q["finish"], batch.params)]
        # Retries and released timers are due again: wake the workers after the commit (for all
        # of them; one fenced out makes the hint early, never late).
        again = batch.retried()
        after = (
            [self._notices.notice(min(again) if again else None)] if again or batch.released else []
        )
        _, rows = await self._db.atomic(statements, after)
        if again or batch.released:
            self._notices.here(min(again) if again else None)
        return batch.lost(rows[0]["applied"])

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        if not fan_outs:
            return set()
        params = fan_out_params(fan_outs, node_id, now)

        async def run(conn: Conn) -> list[Row]:
            await fetch_all(conn, Q["finish_by_lookup"], {})
            rows = await fetch_all(conn, Q["fan_out"], params)
            if rows:
                await self._notices.notify(conn, min(row["run_at"] for row in rows))
            return rows

        rows = await self._db.write(run)
        if rows:
            self._notices.here(min(row["run_at"] for row in rows))
        done = {row["id"] for row in rows}
        return {f.timer_id for f in fan_outs if f.timer_id not in done}

    async def sweep_unsubscribed(
        self, namespace: str, subscribed: ClaimFilter, before: datetime, now: datetime, limit: int
    ) -> list[int]:
        params = {
            "namespace": namespace,
            **claim_params(subscribed),
            "before": before,
            "now": now,
            "limit": limit,
        }

        async def run(conn: Conn) -> list[int]:
            return [row["id"] for row in await fetch_all(conn, Q["sweep_unsubscribed"], params)]

        return await self._db.write(run)

    async def unsubscribed_types(
        self, namespace: str, subscribed: ClaimFilter, limit: int
    ) -> list[tuple[str, int]]:
        params = {"namespace": namespace, **claim_params(subscribed), "limit": limit}

        async def run(conn: Conn) -> list[tuple[str, int]]:
            rows = await fetch_all(conn, Q["unsubscribed_types"], params)
            return [(row["type"], row["count"]) for row in rows]

        return await self._db.read(run)

    async def rescue(self, now: datetime) -> list[int]:
        async def run(conn: Conn) -> list[int]:
            return await self._rescue(conn, now)

        rescued = await self._db.write(run)
        if rescued:
            self._notices.here(now)
        return rescued

    async def _rescue(self, conn: Conn, now: datetime) -> list[int]:
        rescued = [row["id"] for row in await fetch_all(conn, Q["rescue"], {"now": now})]
        if rescued:
            await self._notices.notify(conn, now)
        return rescued

    async def rescue_and_sweep(
        self,
        now: datetime,
        namespace: str,
        subscribed: Callable[[list[Node]], ClaimFilter],
        before: datetime,
        limit: int,
    ) -> tuple[list[int], list[int], list[Node]]:
        async def run(conn: Conn) -> tuple[list[int], list[int], list[Node]]:
            rescued = await self._rescue(conn, now)
            nodes = [node_from_row(row) for row in await fetch_all(conn, Q["list_nodes"], {})]
            params = {
                "namespace": namespace,
                **claim_params(subscribed(nodes)),
                "before": before,
                "now": now,
                "limit": limit,
            }
            swept = [row["id"] for row in await fetch_all(conn, Q["sweep_unsubscribed"], params)]
            return rescued, swept, nodes

        rescued, swept, nodes = await self._db.write(run)
        if rescued:
            self._notices.here(now)
        return rescued, swept, nodes


def claim_params(types: Sequence[str] | ClaimFilter | None) -> Row:
    """The subscription filter of claim_due, next_run_at and sweep_unsubscribed: ``None`` takes
    every row; a list of types is :meth:`ClaimFilter.of_types`; globs become LIKE patterns."""
    if types is None:
        claim = ClaimFilter()
    elif isinstance(types, ClaimFilter):
        claim = types
    else:
        claim = ClaimFilter.of_types(types)
    return {
        "types": None if types is None else list(claim.types),
        "patterns": [like_pattern(p) for p in claim.patterns],
        "destinations": list(claim.destinations),
        "handler_types": list(claim.handler_types),
    }


def fan_out_params(fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> Row:
    """The arrays fan_out unnests: the events (fenced), then their deliveries."""
    root_ids: list[int] = []
    keys: list[str] = []
    destinations: list[str] = []
    for f in fan_outs:
        for destination in f.destinations:
            root_ids.append(f.timer_id)
            keys.append(delivery_key(f.key, destination))
            destinations.append(destination)
    return {
        "timer_ids": [f.timer_id for f in fan_outs],
        "attempts": [f.attempt for f in fan_outs],
        "notes": [fan_out_note(f.destinations) for f in fan_outs],
        "claim_tokens": [f.claim_token for f in fan_outs],
        "root_ids": root_ids,
        "keys": keys,
        "destinations": destinations,
        "node_id": node_id,
        "now": now,
    }
