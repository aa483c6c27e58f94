"""Namespaces and tokens are listed a page at a time, each page a walk of the table's key from
the cursor on: what a page costs follows its size, not how many rows the table holds.

Every test runs against each backend; the plans are checked on each backend's own terms
(PostgreSQL: the rows the scan under the limit reads; SQLite: no sort of the whole table).
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from typing import Any

import psycopg
from storekit import NOW, PG_URL, new_timer

from duetime.model import TimerFilter
from duetime.store import Store
from duetime.store.postgres.store import Q as PG
from duetime.store.queries import load_queries
from duetime.support import budgets
from duetime.support.budgets import Budget
from duetime.tenancy.auth import hash_token

ROWS = 3000
PAGE = 10
PG_TOKENS = load_queries("duetime.store.postgres", "tokens.sql")
SQLITE = load_queries("duetime.store.sqlite", "namespaces.sql")
SQLITE_TOKENS = load_queries("duetime.store.sqlite", "tokens.sql")


async def test_namespaces_come_by_name_after_the_cursor(store: Store) -> None:
    for name in ("delta", "alpha", "charlie", "bravo", "echo"):
        await store.ensure_namespace(name, NOW)
    assert await store.list_namespaces() == ["alpha", "bravo", "charlie", "delta", "echo"]
    assert await store.list_namespaces("", 2) == ["alpha", "bravo"]
    assert await store.list_namespaces("bravo", 2) == ["charlie", "delta"]
    assert await store.list_namespaces("delta", 2) == ["echo"]
    only = ["echo", "bravo", "zulu"]
    assert await store.list_namespaces("", 1, only) == ["bravo"]
    assert await store.list_namespaces("bravo", 5, only) == ["echo"]
    assert await store.list_namespaces("", None, []) == []


async def test_tokens_come_oldest_first_after_the_cursor(store: Store) -> None:
    made = [
        await store.tokens.add_token(None, hash_token(f"dt_{i}"), ("ns",), False, NOW)
        for i in range(5)
    ]
    await store.tokens.revoke_token(made[1].id, NOW)
    ids = [t.id for t in made]
    assert [t.id for t in await store.tokens.list_tokens(limit=2)] == [ids[0], ids[2]]
    after = await store.tokens.list_tokens(after=ids[2], limit=2)
    assert [t.id for t in after] == [ids[3], ids[4]]
    everything = await store.tokens.list_tokens(include_revoked=True, after=ids[0], limit=2)
    assert [t.id for t in everything] == [ids[1], ids[2]]


def _pg_plan(conn: psycopg.Connection[Any], query: str, params: dict[str, Any]) -> str:
    rows = conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {query}", params).fetchall()
    return "\n".join(row[0] for row in rows)


def _scanned(plan: str) -> list[int]:
    """The rows each scan node of an EXPLAIN ANALYZE returned."""
    found = []
    for line in plan.splitlines():
        if "Scan" in line and "actual rows=" in line:
            found.append(int(line.split("actual rows=")[1].split()[0]))
    return found


async def test_a_postgres_page_reads_the_page(pg_url: str, pg_schema: str) -> None:
    from duetime.store.postgres.store import PostgresStore

    store = PostgresStore(pg_url, listen=False)
    await store.open()
    await store.close()
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={pg_schema}") as c:
        c.execute(
            "INSERT INTO namespaces (name, created_at) "
            "SELECT 'ns' || lpad(i::text, 5, '0'), now() FROM generate_series(1, %s) i",
            (ROWS,),
        )
        c.execute(
            "INSERT INTO tokens (hash, namespaces, read_only, created_at) "
            "SELECT 'h' || i, '{ns}', false, now() FROM generate_series(1, %s) i",
            (ROWS,),
        )
        c.execute("ANALYZE namespaces")
        c.execute("ANALYZE tokens")
        pages = [
            (PG["list_namespaces"], {"after": "ns01500", "limit": PAGE + 1, "only": None}),
            (
                PG["list_namespaces"],
                {"after": "", "limit": PAGE + 1, "only": ["ns00002", "ns02000"]},
            ),
            (
                PG_TOKENS["list_tokens"],
                {"after": ROWS // 2, "limit": PAGE + 1, "include_revoked": False},
            ),
        ]
        for query, params in pages:
            plan = _pg_plan(c, query, params)
            assert "Sort" not in plan, plan
            scanned = _scanned(plan)
            assert scanned, plan
            assert max(scanned) <= PAGE + 1, plan


def test_a_sqlite_page_walks_the_key_in_order(tmp_path: Any, runner: Any) -> None:
    from duetime.store import create_store

    store = create_store(f"sqlite:///{tmp_path / 'pages.db'}")
    runner.run(store.open())
    runner.run(store.close())
    with sqlite3.connect(tmp_path / "pages.db") as conn:
        pages = [
            (SQLITE["list_namespaces"], {"after": "ns", "limit": PAGE + 1, "only": None}),
            (
                SQLITE_TOKENS["list_tokens"],
                {"after": 7, "limit": PAGE + 1, "include_revoked": 0},
            ),
        ]
        for query, params in pages:
            plan = " / ".join(row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {query}", params))
            assert "TEMP B-TREE" not in plan, plan  # no sort of every row
            assert "SEARCH" in plan, plan  # a range of the key, from the cursor on


async def test_a_requests_page_bytes_end_a_listing_page_early_with_its_cursor(
    store: Store,
) -> None:
    """Under a request's ``page_bytes`` a page decodes only the rows it can answer (one at
    least) and ends with the cursor after its last; the walk still meets every timer once."""
    await store.put_timers(
        [new_timer(f"k{n}", timedelta(hours=n), payload={"text": "x" * 1000}) for n in range(5)],
        "error",
        NOW,
    )
    whole = await store.list_timers("ns", TimerFilter(), None, 1000)
    assert len(whole.items) == 5
    assert whole.next_cursor is None
    keys: list[str] = []
    cursor = None
    with budgets.within(Budget(statement_timeout=30, connection_wait=30, page_bytes=1)):
        for _ in range(10):
            page = await store.list_timers("ns", TimerFilter(), cursor, 1000)
            assert len(page.items) == 1
            keys += [t.key for t in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
    assert keys == [t.key for t in whole.items]
    sizes: list[int] = []
    cursor = None
    with budgets.within(Budget(statement_timeout=30, connection_wait=30, page_bytes=2_500)):
        for _ in range(10):  # payloads of about 1 KB: two rows a page, not three
            page = await store.list_timers("ns", TimerFilter(), cursor, 1000)
            sizes.append(len(page.items))
            cursor = page.next_cursor
            if cursor is None:
                break
    assert sizes == [2, 2, 1]
