"""Reading rows on a pooled connection: all of them, the first value, or JSON as text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from psycopg.pq import TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg.types.string import TextLoader

from duetime.store.postgres.database import Conn
from duetime.support import budgets


async def fetch_all(conn: Conn, query: str, params: dict[str, Any]) -> list[DictRow]:
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        return await cur.fetchall()


PAGE_BATCH = 64
"""Rows a bounded listing fetches at a time from its server-side cursor."""


async def fetch_json_as_text(conn: Conn, query: str, params: Mapping[str, Any]) -> list[DictRow]:
    """:func:`fetch_all` with ``json`` and ``jsonb`` columns as their text, not decoded: a
    listing decodes only the rows its page answers (``duetime.store.cursors.within_bytes``
    counts their text), after the fetch, row by row, instead of every row in the fetch.

    Under a request's ``page_bytes`` (its reads run in a transaction) the rows come through a
    server-side cursor, :data:`PAGE_BATCH` at a time, and the fetch stops once their text has
    passed the budget: a page of large payloads never crosses the wire whole."""
    budget = budgets.current()
    if (
        budget is None
        or budget.page_bytes is None
        or conn.info.transaction_status is (TransactionStatus.IDLE)
    ):
        async with conn.cursor(row_factory=dict_row) as cur:
            cur.adapters.register_loader("jsonb", TextLoader)
            cur.adapters.register_loader("json", TextLoader)
            await cur.execute(query, params)
            return await cur.fetchall() if cur.description else []
    rows: list[DictRow] = []
    size = 0
    async with conn.cursor("duetime_page", row_factory=dict_row) as cur:
        cur.adapters.register_loader("jsonb", TextLoader)
        cur.adapters.register_loader("json", TextLoader)
        await cur.execute(query, params)
        while size <= budget.page_bytes:
            batch = await cur.fetchmany(PAGE_BATCH)
            if not batch:
                break
            rows.extend(batch)
            size += sum(_text_bytes(row) for row in batch)
    return rows


def _text_bytes(row: DictRow) -> int:
    """The row's text as stored: a sealed payload counts at its sealed length."""
    return sum(len(value) for value in row.values() if isinstance(value, str | bytes))


async def fetch_value(conn: Conn, query: str, params: dict[str, Any]) -> Any:
    """The first column of the first row (None when there is no row)."""
    async with conn.cursor(row_factory=dict_row) as cur:
        await cur.execute(query, params)
        row = await cur.fetchone()
    return None if row is None else next(iter(row.values()))
