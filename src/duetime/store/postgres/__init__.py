"""The PostgreSQL store (``postgresql://…``): needs the ``postgres`` extra (psycopg 3)."""

from duetime.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
