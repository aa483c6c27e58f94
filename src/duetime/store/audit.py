"""The audit log, the same on both backends: the ``audit`` part of a store.

Both keep the same columns and rules; they differ only in how an instant and the target (JSON)
are stored and in how a named query of their ``audit.sql`` is run, so the logic is written once
(as :mod:`duetime.store.tokens` does for tokens).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from duetime.model import Page
from duetime.model.audit import AuditEntry, AuditRecord
from duetime.store.cursors import decode_audit_cursor, encode_audit_cursor, page
from duetime.store.tokens import TokenRow
from duetime.support.jsontext import json_text

RunQuery = Callable[[str, Mapping[str, Any], bool], Awaitable[list[TokenRow]]]
"""Run the named query of the backend's ``audit.sql`` with these parameters (in a write
transaction when the flag says it writes); its rows."""


@dataclass(frozen=True, slots=True)
class AuditColumns:
    """How one backend stores the columns whose types differ between databases."""

    instant_to_column: Callable[[datetime], Any]
    instant_from_column: Callable[[Any], datetime]
    target_from_column: Callable[[Any], Any]


def _audit_cursor(entry: AuditEntry) -> str:
    return encode_audit_cursor(entry.id)


class AuditLog:
    """The :class:`~duetime.store.parts.AuditStore` of a backend, given its columns and queries."""

    def __init__(self, columns: AuditColumns, run: RunQuery) -> None:
        self._columns = columns
        self._run = run

    async def record(self, records: Sequence[AuditRecord], now: datetime) -> None:
        for item in records:
            params = {
                "namespace": item.namespace,
                "at": self._columns.instant_to_column(now),
                "actor": item.actor.name,
                "via": item.actor.via,
                "action": item.action,
                "target": json_text(item.target),
                "count": item.count,
            }
            await self._run("record", params, True)

    async def list_entries(
        self, namespace: str, cursor: str | None, limit: int
    ) -> Page[AuditEntry]:
        params = {
            "namespace": namespace,
            "before_id": decode_audit_cursor(cursor),
            "limit": limit + 1,
        }
        rows = await self._run("list_entries", params, False)
        # Decoding a page of large targets is Python work: on a thread, so the event loop
        # serves the other requests meanwhile (the request's page_bytes goes with it).
        return await asyncio.to_thread(page, rows, limit, self._entry, _audit_cursor)

    async def prune(self, before: datetime, limit: int) -> int:
        params = {"before": self._columns.instant_to_column(before), "limit": limit}
        return len(await self._run("prune", params, True))

    def _entry(self, row: TokenRow) -> AuditEntry:
        return AuditEntry(
            id=row["id"],
            namespace=row["namespace"],
            at=self._columns.instant_from_column(row["at"]),
            actor=row["actor"],
            via=row["via"],
            action=row["action"],
            target=self._columns.target_from_column(row["target"]),
            count=row["count"],
        )
