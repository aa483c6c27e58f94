-- Namespaces of the SQLite store, and its change marker (store.py). Each block's name is the
-- method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = ?

-- name: list_namespaces
SELECT name FROM namespaces ORDER BY name

-- name: data_version
-- Changes when another connection (another process) commits; this connection's own writes
-- are counted by sqlite3's total_changes instead.
PRAGMA data_version
