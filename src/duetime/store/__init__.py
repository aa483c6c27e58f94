"""Storage backends behind one protocol; :func:`create_store` picks one from a database URL."""

from __future__ import annotations

from duetime.errors import InvalidInput
from duetime.store.protocol import Store


def create_store(url: str) -> Store:
    """A not-yet-opened store for ``url`` (``sqlite:///…`` or ``postgresql://…``)."""
    if url.startswith("sqlite:///"):
        from duetime.store.sqlite.store import SqliteStore

        try:
            return SqliteStore(url)
        except ValueError as exc:
            raise InvalidInput("database_url", str(exc)) from exc
    if url.startswith(("postgresql://", "postgres://")):
        try:
            from duetime.store.postgres.store import PostgresStore
        except ImportError as exc:
            raise InvalidInput(
                "database_url",
                f"PostgreSQL needs psycopg 3: pip install 'duetime[postgres]' ({exc})",
            ) from exc
        try:
            return PostgresStore(url)
        except ValueError as exc:
            raise InvalidInput("database_url", str(exc)) from exc
    raise InvalidInput("database_url", "must start with sqlite:/// or postgresql://")


__all__ = ["Store", "create_store"]
