-- Namespaces of the SQLite store, and its change marker (store.py). Each block's name is the
-- method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = ?

-- name: list_namespaces
-- By name, after :after, at most :limit (NULL: all), only those of :only (JSON; NULL: every
-- one): a walk of the primary key from the cursor on.
SELECT name FROM namespaces
WHERE name > :after AND (:only IS NULL OR name IN (SELECT value FROM json_each(:only)))
ORDER BY name
LIMIT coalesce(:limit, -1)

-- name: namespaces_held
-- How many namespaces there are, counted no further than the cap (in the write transaction of
-- a capped creation, whose lock keeps others out until it commits).
SELECT count(*) FROM (SELECT 1 FROM namespaces LIMIT :up_to)

-- name: namespaces_new
-- Which of the given names (JSON) are not namespaces yet, in the order given.
SELECT value FROM json_each(:names)
WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE name = json_each.value)
ORDER BY key

-- name: data_version
-- Changes when another connection (another process) commits; this connection's own writes
-- are counted by sqlite3's total_changes instead.
PRAGMA data_version
