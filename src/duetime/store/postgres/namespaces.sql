-- Namespaces of the PostgreSQL store (store.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (%(name)s, %(now)s)
ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = %(name)s

-- name: list_namespaces
-- By name, after %(after)s, at most %(limit)s (NULL: all), only those of %(only)s (NULL: every
-- one): a walk of the primary key from the cursor on.
SELECT name FROM namespaces
WHERE name > %(after)s AND (%(only)s::text[] IS NULL OR name = ANY (%(only)s::text[]))
ORDER BY name
LIMIT %(limit)s

-- name: lock_namespaces
-- Capped creations of namespaces run one at a time (per schema): the count of the next one,
-- a later statement, sees the rows of the one before (see duetime.store.room).
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: namespace_room
-- How many namespaces there are (counted no further than the cap) and which of %(names)s are
-- new, read after lock_namespaces.
SELECT (SELECT count(*) FROM (SELECT 1 FROM namespaces LIMIT %(up_to)s) held) AS held,
    ARRAY(SELECT given.name FROM unnest(%(names)s::text[]) AS given (name)
          WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE namespaces.name = given.name))
        AS new

-- name: lock_namespace_row
-- A namespace's row, locked until the transaction ends, before counting what it holds of a
-- capped collection (schedules, rules): two creations at once cannot both take the last place,
-- as the count, a later statement, sees the rows of the transaction that held the lock before
-- (a count in the same statement as the lock would read the snapshot taken before the wait).
-- NO KEY UPDATE: timers written meanwhile, whose key-share lock it leaves alone, never wait.
SELECT 1 FROM namespaces WHERE name = %(namespace)s FOR NO KEY UPDATE
