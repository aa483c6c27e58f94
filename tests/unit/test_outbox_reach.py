"""Which PostgreSQL connections may hold the outbox's writes: the comparison alone, on the
facts a connection reports (the tests on a real server are in tests/integration)."""

from __future__ import annotations

from dataclasses import replace

from duetime.store.postgres.reach import Reach, refusal

APP = Reach(
    server="7712843887476017285",
    port="5432",
    database="shop",
    database_oid=16384,
    timers_oid=16500,
    uses_schema=True,
    writes_timers=True,
)
SCHEMA = "duetime"


def test_the_apps_own_database_is_taken() -> None:
    assert refusal(APP, APP, SCHEMA) is None
    # A role that may not read the server's identifier, on the same server: its port stands in.
    assert refusal(replace(APP, server=None), APP, SCHEMA) is None


def test_a_twin_on_another_server_is_told_apart_by_the_servers_identifier() -> None:
    # Same port, same names, same oids (two servers set up alike): only the identifier differs.
    twin = replace(APP, server="7712843887476017999")
    assert "another PostgreSQL server" in (refusal(twin, APP, SCHEMA) or "")
    assert "another PostgreSQL server" in (
        refusal(replace(APP, server=None, port="5433"), APP, SCHEMA) or ""
    )


def test_another_database_or_schema_is_refused_by_name() -> None:
    other = replace(APP, database="postgres", database_oid=5, timers_oid=None)
    assert "database 'postgres', not this app's database ('shop')" in (
        refusal(other, APP, SCHEMA) or ""
    )
    restored = replace(APP, timers_oid=17000)  # a schema of the name, but not the app's table
    assert "does not reach this app's duetime schema" in (refusal(restored, APP, SCHEMA) or "")
    unmigrated = replace(APP, timers_oid=None)
    assert "has no duetime schema 'duetime'" in (refusal(unmigrated, unmigrated, SCHEMA) or "")


def test_a_role_that_may_not_write_is_refused() -> None:
    for denied in (replace(APP, uses_schema=False), replace(APP, writes_timers=False)):
        assert "may not write" in (refusal(denied, APP, SCHEMA) or "")
