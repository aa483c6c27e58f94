"""For applications that open PostgreSQL connections of their own beside duetime's.

A read model or a report next to duetime's tables wants the same connection as the store: the
schema of the URL's ``?schema=`` on the search path, UTC instants, durable commits. psycopg is
imported only when a function here is called (it comes with the ``postgres`` extra).
"""

from __future__ import annotations


def conninfo(database_url: str) -> str:
    """The libpq connection string duetime's store connects with for ``database_url``: the
    URL's host, database and libpq parameters, duetime's own parameters (``schema``,
    ``pool_*``, ``listen``) taken out, and the session settings the store uses (search_path =
    the schema, ``TimeZone=UTC``, ``synchronous_commit=on``). For ``psycopg.connect`` and
    ``psycopg.AsyncConnection.connect``; ValueError for a URL that is not PostgreSQL's or that
    libpq cannot read.
    """
    from duetime.store.postgres.settings import parse_url

    return parse_url(database_url).conninfo
