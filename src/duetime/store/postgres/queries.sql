-- All SQL of the PostgreSQL store. Each block's name is the PostgresStore method that runs it.
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

-- name: db_now
SELECT clock_timestamp() AS now

-- name: notify
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (%(name)s, %(now)s)
ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = %(name)s

-- name: list_namespaces
SELECT name FROM namespaces ORDER BY name

-- name: insert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at
) VALUES (
    %(namespace)s, %(key)s, %(type)s, %(payload)s, %(subject)s, %(correlation_id)s,
    %(due_at)s, %(due_at)s, %(local)s, %(timezone)s, %(disambiguation)s, %(expires_after)s,
    'scheduled', %(max_attempts)s, %(now)s, %(now)s
)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING *

-- name: upsert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at
) VALUES (
    %(namespace)s, %(key)s, %(type)s, %(payload)s, %(subject)s, %(correlation_id)s,
    %(due_at)s, %(due_at)s, %(local)s, %(timezone)s, %(disambiguation)s, %(expires_after)s,
    'scheduled', %(max_attempts)s, %(now)s, %(now)s
)
ON CONFLICT (namespace, key) DO UPDATE SET
    type = excluded.type,
    payload = excluded.payload,
    subject = excluded.subject,
    correlation_id = excluded.correlation_id,
    due_at = excluded.due_at,
    run_at = excluded.run_at,
    local = excluded.local,
    timezone = excluded.timezone,
    disambiguation = excluded.disambiguation,
    expires_after = excluded.expires_after,
    max_attempts = excluded.max_attempts,
    updated_at = excluded.updated_at,
    version = timers.version + 1
WHERE timers.status IN ('scheduled', 'retrying')
RETURNING *

-- name: get_timers
SELECT timers.* FROM timers
JOIN unnest(%(namespaces)s::text[], %(keys)s::text[]) AS wanted (namespace, key)
    USING (namespace, key)

-- name: get_timer
SELECT * FROM timers WHERE namespace = %(namespace)s AND key = %(key)s

-- name: list_timers
SELECT * FROM timers
WHERE namespace = %(namespace)s
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(type)s::text IS NULL OR type = %(type)s::text)
  AND id < %(before_id)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: list_attempts
SELECT * FROM attempts WHERE timer_id = %(timer_id)s ORDER BY number

-- name: count_by_status
SELECT status, count(*) AS count FROM timers WHERE namespace = %(namespace)s GROUP BY status

-- name: cancel
UPDATE timers
SET status = 'cancelled', completed_at = %(now)s, updated_at = %(now)s
WHERE namespace = %(namespace)s AND key = %(key)s AND status IN ('scheduled', 'retrying')
RETURNING *

-- name: replay
-- A fresh set of attempts: numbering goes on (the history keeps the old ones), and the budget
-- grows by as many attempts as were used.
UPDATE timers
SET status = 'scheduled', run_at = %(now)s, completed_at = NULL,
    updated_at = %(now)s, max_attempts = max_attempts + attempts
WHERE namespace = %(namespace)s AND key = %(key)s AND status = 'dead'
RETURNING *

-- name: next_run_at
-- Walk the pending index in run_at order and stop at the first row. The always-true bound on
-- run_at puts both index columns in the index condition, as in claim_due: without it, a table
-- that was never analysed gets a bitmap scan of every pending row of the namespace plus a sort.
SELECT run_at FROM timers
WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
  AND run_at <= 'infinity'
  AND (%(types)s::text[] IS NULL OR type = ANY (%(types)s::text[]))
ORDER BY run_at
LIMIT 1

-- name: claim_due
-- One statement: lock the due rows (skipping those another node is claiming), mark them
-- running under this node's lease, and open their attempt rows.
WITH due AS (
    SELECT id FROM timers
    WHERE namespace = %(namespace)s
      AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND (%(types)s::text[] IS NULL OR type = ANY (%(types)s::text[]))
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE timers
    SET status = 'running',
        attempts = timers.attempts + 1,
        lease_owner = %(node_id)s,
        lease_expires_at = %(lease_until)s,
        fired_at = coalesce(timers.fired_at, %(now)s),
        updated_at = %(now)s
    FROM due
    WHERE timers.id = due.id
    RETURNING timers.*
),
opened AS (
    INSERT INTO attempts (timer_id, number, node_id, started_at)
    SELECT id, attempts, %(node_id)s, %(now)s FROM claimed
)
SELECT * FROM claimed

-- name: finish
-- The owner's outcomes, fenced by (id, attempt, owner, running): rows that are no longer the
-- owner's are left alone and come back missing from the result (lost). Attempts are closed,
-- or deleted when the work was released unstarted.
WITH f AS (
    SELECT * FROM unnest(
        %(timer_ids)s::bigint[], %(attempts)s::integer[], %(outcomes)s::text[],
        %(errors)s::text[], %(run_ats)s::timestamptz[]
    ) AS f (timer_id, attempt, outcome, error, run_at)
),
finished AS (
    UPDATE timers
    SET status = CASE f.outcome
            WHEN 'retry' THEN 'retrying'
            WHEN 'snoozed' THEN 'scheduled'
            WHEN 'released' THEN
                CASE WHEN timers.attempts > 1 THEN 'retrying' ELSE 'scheduled' END
            ELSE f.outcome
        END,
        run_at = CASE WHEN f.outcome IN ('retry', 'snoozed') THEN f.run_at ELSE timers.run_at END,
        last_error = CASE
            WHEN f.outcome = 'done' THEN NULL
            WHEN f.outcome IN ('snoozed', 'released') THEN timers.last_error
            ELSE f.error
        END,
        completed_at = CASE
            WHEN f.outcome IN ('done', 'dead', 'cancelled', 'expired') THEN %(now)s
            ELSE timers.completed_at
        END,
        max_attempts = timers.max_attempts + CASE WHEN f.outcome = 'snoozed' THEN 1 ELSE 0 END,
        attempts = timers.attempts - CASE WHEN f.outcome = 'released' THEN 1 ELSE 0 END,
        fired_at = CASE
            WHEN f.outcome = 'released' AND timers.attempts <= 1 THEN NULL
            ELSE timers.fired_at
        END,
        updated_at = %(now)s,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM f
    WHERE timers.id = f.timer_id
      AND timers.attempts = f.attempt
      AND timers.lease_owner = %(node_id)s
      AND timers.status = 'running'
    RETURNING timers.id, f.attempt, f.outcome, f.error
),
closed AS (
    UPDATE attempts
    SET finished_at = %(now)s, outcome = finished.outcome, error = finished.error
    FROM finished
    WHERE attempts.timer_id = finished.id AND attempts.number = finished.attempt
      AND attempts.finished_at IS NULL AND finished.outcome <> 'released'
),
dropped AS (
    DELETE FROM attempts
    USING finished
    WHERE attempts.timer_id = finished.id AND attempts.number = finished.attempt
      AND finished.outcome = 'released'
)
SELECT id FROM finished

-- name: rescue
-- Leases that ran out: the attempt is lost; the timer retries, or is dead when out of
-- attempts. Rows another node is rescuing (or finishing) right now are skipped, not waited on.
WITH expired AS (
    SELECT id FROM timers
    WHERE status = 'running' AND lease_expires_at < %(now)s
    ORDER BY id
    FOR UPDATE SKIP LOCKED
),
rescued AS (
    UPDATE timers
    SET status = CASE WHEN timers.attempts >= timers.max_attempts THEN 'dead' ELSE 'retrying' END,
        completed_at = CASE WHEN timers.attempts >= timers.max_attempts THEN %(now)s END,
        run_at = %(now)s,
        last_error = 'lease expired: node ' || timers.lease_owner || ' stopped renewing it',
        updated_at = %(now)s,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM expired
    WHERE timers.id = expired.id
    RETURNING timers.id, timers.attempts, timers.last_error
),
closed AS (
    UPDATE attempts
    SET finished_at = %(now)s, outcome = 'lost', error = rescued.last_error
    FROM rescued
    WHERE attempts.timer_id = rescued.id AND attempts.number = rescued.attempts
      AND attempts.finished_at IS NULL
)
SELECT id FROM rescued ORDER BY id

-- name: expire_leases_of
UPDATE timers SET lease_expires_at = %(now)s
WHERE lease_owner = %(node_id)s AND status = 'running' AND lease_expires_at > %(now)s

-- name: register_node
INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at, in_flight)
VALUES (%(id)s, %(host)s, %(pid)s, %(role)s, %(started_at)s, %(heartbeat_at)s, %(in_flight)s)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = %(now)s, in_flight = %(in_flight)s WHERE id = %(node_id)s

-- name: extend_leases
-- Locks the node's rows in id order, as finish does, so the two never deadlock. Rows locked by
-- a transactional handler still running are skipped: rescue skips them too, so they stay ours.
UPDATE timers SET lease_expires_at = %(lease_until)s
FROM (
    SELECT id FROM timers
    WHERE lease_owner = %(node_id)s AND status = 'running' AND id = ANY(%(held)s::bigint[])
    ORDER BY id
    FOR UPDATE SKIP LOCKED
) AS mine
WHERE timers.id = mine.id AND timers.status = 'running'

-- name: deregister_node
DELETE FROM nodes WHERE id = %(node_id)s

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at

-- name: lock_attempt
-- A transactional handler's fence: the row stays locked until its transaction ends, so neither
-- rescue nor another node can take the attempt while the handler's writes are in flight.
SELECT id FROM timers
WHERE id = %(timer_id)s AND attempts = %(attempt)s AND lease_owner = %(node_id)s
  AND status = 'running'
FOR UPDATE

-- name: current_search_path
SELECT current_setting('search_path') AS search_path

-- name: set_search_path
SELECT set_config('search_path', %(search_path)s, true) AS search_path
