"""A SQLAlchemy session in a transactional handler (``duetime.contrib.sqlalchemy``): its ORM
writes commit with the timer's completion, and roll back with it when the handler raises —
on PostgreSQL (``async_session_for``) and SQLite (``session_for``)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import psycopg
from outbox_kit import NS, PgOutbox, pg_outbox
from psycopg import sql
from sqlalchemy import String
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from duetime import App, AsyncApp, Event, Status
from duetime.contrib.sqlalchemy import async_session_for, session_for

__all__ = ["pg_outbox"]


class Base(DeclarativeBase):
    pass


class Receipt(Base):
    __tablename__ = "receipts"  # in duetime's own schema: the handler's connection's path

    order: Mapped[str] = mapped_column(String, primary_key=True)


class Refused(Exception):
    """The handler failed after writing: its writes must roll back."""


def test_async_session_commits_with_the_completion_on_postgres(pg_outbox: PgOutbox) -> None:
    with psycopg.connect(pg_outbox.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL('CREATE TABLE {}.receipts ("order" text PRIMARY KEY)').format(
                sql.Identifier(pg_outbox.schema)
            )
        )

    async def main() -> None:
        app = AsyncApp(pg_outbox.url, NS)

        @app.handler("order.paid", transactional=True)
        async def paid(event: Event, connection: psycopg.AsyncConnection) -> None:
            async with async_session_for(connection) as session:
                session.add(Receipt(order=event.payload["order"]))
                await session.flush()
                if event.payload.get("fail"):
                    raise Refused("after writing")

        async with app:
            await app.schedule("order.paid", {"order": "p1"}, key="p1", delay=0)
            await app.schedule("order.paid", {"order": "p2", "fail": True}, key="p2", delay=0)
            await app.tick()
            assert (await app.get("p1")).status is Status.DONE
            assert (await app.get("p2")).status is Status.RETRYING

    asyncio.run(main())
    with psycopg.connect(pg_outbox.dsn) as conn:
        query = sql.SQL('SELECT "order" FROM {}.receipts').format(sql.Identifier(pg_outbox.schema))
        assert [row[0] for row in conn.execute(query)] == ["p1"]


def test_session_commits_with_the_completion_on_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "shop.db"
    with sqlite3.connect(db) as conn:
        conn.execute('CREATE TABLE receipts ("order" TEXT PRIMARY KEY)')
    conn.close()
    app = App(f"sqlite:///{db}", NS)

    @app.handler("order.paid", transactional=True)
    def paid(event: Event, connection: sqlite3.Connection) -> None:
        with session_for(connection) as session:
            session.add(Receipt(order=event.payload["order"]))
            session.flush()
            if event.payload.get("fail"):
                raise Refused("after writing")

    with app:
        app.schedule("order.paid", {"order": "s1"}, key="s1", delay=0)
        app.schedule("order.paid", {"order": "s2", "fail": True}, key="s2", delay=0)
        app.tick()
        assert app.get("s1").status is Status.DONE
        assert app.get("s2").status is Status.RETRYING
    with sqlite3.connect(db) as conn:
        assert [row[0] for row in conn.execute('SELECT "order" FROM receipts')] == ["s1"]
    conn.close()
