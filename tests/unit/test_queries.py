"""The named-query files and migrations parse, and every store method's query exists."""

from __future__ import annotations

import re

import pytest

from duetime.errors import InvalidInput
from duetime.store.codec import from_micros, to_micros
from duetime.store.cursors import decode_cursor, encode_cursor
from duetime.store.queries import load_migrations, load_queries, parse_queries, query_files


def test_parse_named_blocks() -> None:
    text = "-- name: one\nSELECT 1;\n\n-- name: two\nSELECT 2\n"
    assert parse_queries(text) == {"one": "SELECT 1", "two": "SELECT 2"}


def test_whole_line_comments_stay_out_of_the_statements() -> None:
    text = "-- name: one\n-- why it is so\nSELECT 1 -- kept: same line\n  -- indented\nFROM t\n"
    assert parse_queries(text) == {"one": "SELECT 1 -- kept: same line\nFROM t"}


def test_every_postgres_statement_is_short_enough_for_psycopg_to_cache() -> None:
    """psycopg parses a statement's placeholders again on every execution when it is longer
    than 4 KiB or has more than 50 parameters: scheduling and outcomes run hundreds a second."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH, MAX_CACHED_STATEMENT_PARAMS

    package = "duetime.store.postgres"
    files = query_files(package)
    assert {"writes.sql", "claims.sql", "outcomes.sql", "schedules.sql", "tokens.sql"} <= set(files)
    for name, sql in load_queries(package, *files).items():
        assert len(sql.encode()) <= MAX_CACHED_STATEMENT_LENGTH, name
        assert len(set(re.findall(r"%\((\w+)\)", sql))) <= MAX_CACHED_STATEMENT_PARAMS, name


def test_an_include_line_stands_for_the_named_block() -> None:
    text = (
        "-- name: rows\n-- shared\nunnest(%(a)s)\n  AS t (a)\n"
        "-- name: one\nSELECT * FROM\n    -- include: rows\nWHERE true\n"
    )
    assert (
        parse_queries(text)["one"] == "SELECT * FROM\n    unnest(%(a)s)\n      AS t (a)\nWHERE true"
    )
    with pytest.raises(ValueError, match="no query 'other' to include"):
        parse_queries("-- name: one\nSELECT\n-- include: other\n")


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        parse_queries("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n")


def test_an_include_may_name_a_block_of_another_file_loaded_with_it() -> None:
    shared = "-- name: rows\nunnest(%(a)s)\n"
    one = "-- name: one\nSELECT * FROM\n  -- include: rows\n"
    assert parse_queries(shared, one)["one"] == "SELECT * FROM\n  unnest(%(a)s)"
    with pytest.raises(ValueError, match="twice"):
        parse_queries(shared, shared)


def test_each_query_file_loads_with_the_files_its_module_loads_it_with() -> None:
    """A name is defined once among all of a backend's files, so every module's files load."""
    for package in ("duetime.store.postgres", "duetime.store.sqlite"):
        files = query_files(package)
        assert "queries.sql" not in files
        assert len(files) > 5
        load_queries(package, *files)


def test_sqlite_queries_and_migrations_load() -> None:
    queries = load_queries("duetime.store.sqlite", *query_files("duetime.store.sqlite"))
    assert {"claim_due", "finish_done", "rescue_timer", "upsert_timer"} <= set(queries)
    migrations = load_migrations("duetime.store.sqlite.migrations")
    assert [version for version, _, _ in migrations] == list(range(1, len(migrations) + 1))


def test_micros_round_trip_is_exact() -> None:
    instant = from_micros(1_741_000_000_123_456)
    assert to_micros(instant) == 1_741_000_000_123_456
    assert instant.tzinfo is not None


def test_cursor_round_trip_and_garbage() -> None:
    assert decode_cursor(encode_cursor(42)) == 42
    assert decode_cursor(None) is None
    with pytest.raises(InvalidInput) as info:
        decode_cursor("!!!not-a-cursor")
    assert info.value.field == "cursor"
