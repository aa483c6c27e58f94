-- The PostgreSQL store's bookkeeping of its migrations (schema.py). Each block's name is the
-- method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: lock_migrations
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)

-- name: migrations_table_exists
SELECT to_regclass(%(table)s) IS NOT NULL AS present

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version

-- name: record_migration
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)
