-- The SQLite store's bookkeeping of its migrations (schema.py). Each block's name is the
-- method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at INTEGER NOT NULL
)

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version

-- name: record_migration
INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)
