-- All SQL of the SQLite store. Each block's name is the SqliteStore method that runs it.
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

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = ?

-- name: list_namespaces
SELECT name FROM namespaces ORDER BY name

-- name: insert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :due_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now
)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at, version

-- name: upsert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :due_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now
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
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at, version

-- name: get_timer
SELECT * FROM timers WHERE namespace = ? AND key = ?

-- name: list_timers
SELECT * FROM timers
WHERE namespace = :namespace
  AND (:subject IS NULL OR subject = :subject)
  AND (:status IS NULL OR status = :status)
  AND (:type IS NULL OR type = :type)
  AND id < :before_id
ORDER BY id DESC
LIMIT :limit

-- name: list_attempts
SELECT * FROM attempts WHERE timer_id = ? ORDER BY number

-- name: count_by_status
SELECT status, count(*) FROM timers WHERE namespace = ? GROUP BY status

-- name: cancel
UPDATE timers
SET status = 'cancelled', completed_at = :now, updated_at = :now
WHERE namespace = :namespace AND key = :key AND status IN ('scheduled', 'retrying')
RETURNING *

-- name: replay
-- A fresh set of attempts: numbering goes on (the history keeps the old ones), and the budget
-- grows by as many attempts as were used.
UPDATE timers
SET status = 'scheduled', run_at = :now, completed_at = NULL, updated_at = :now,
    max_attempts = max_attempts + attempts
WHERE namespace = :namespace AND key = :key AND status = 'dead'
RETURNING *

-- name: next_run_at
SELECT min(run_at) FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND (:all_types OR type IN (SELECT value FROM json_each(:types)))

-- name: claim_due
UPDATE timers
SET status = 'running',
    attempts = attempts + 1,
    lease_owner = :node_id,
    lease_expires_at = :lease_until,
    fired_at = coalesce(fired_at, :now),
    updated_at = :now
WHERE id IN (
    SELECT id FROM timers
    WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
      AND (:all_types OR type IN (SELECT value FROM json_each(:types)))
    ORDER BY run_at
    LIMIT :limit
)
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at

-- name: open_attempts
-- :batch is a JSON array of [timer id, attempt number] pairs.
INSERT INTO attempts (timer_id, number, node_id, started_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :node_id, :now
FROM json_each(:batch)

-- name: close_attempt
UPDATE attempts SET finished_at = :now, outcome = :outcome, error = :error
WHERE timer_id = :timer_id AND number = :attempt AND finished_at IS NULL

-- name: drop_attempt
DELETE FROM attempts WHERE timer_id = :timer_id AND number = :attempt

-- name: finish_done
UPDATE timers
SET status = 'done', completed_at = :now, updated_at = :now, lease_owner = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'

-- name: finish_done_many
-- The common case in one statement: :batch is a JSON array of [timer id, attempt number]
-- pairs, each fenced like finish_done; returns the ids it changed (the rest are lost).
UPDATE timers
SET status = 'done', completed_at = :now, updated_at = :now, lease_owner = NULL,
    lease_expires_at = NULL, last_error = NULL
FROM (
    SELECT json_extract(value, '$[0]') AS timer_id, json_extract(value, '$[1]') AS attempt
    FROM json_each(:batch)
) AS finished
WHERE timers.id = finished.timer_id AND timers.attempts = finished.attempt
  AND timers.lease_owner = :node_id AND timers.status = 'running'
RETURNING timers.id

-- name: close_attempts_done
-- close_attempt for every [timer id, attempt number] pair of :batch, outcome done.
UPDATE attempts SET finished_at = :now, outcome = 'done', error = NULL
FROM (
    SELECT json_extract(value, '$[0]') AS timer_id, json_extract(value, '$[1]') AS attempt
    FROM json_each(:batch)
) AS finished
WHERE attempts.timer_id = finished.timer_id AND attempts.number = finished.attempt
  AND attempts.finished_at IS NULL

-- name: finish_retry
UPDATE timers
SET status = 'retrying', run_at = :run_at, last_error = :error, updated_at = :now,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'

-- name: finish_snoozed
UPDATE timers
SET status = 'scheduled', run_at = :run_at, max_attempts = max_attempts + 1, updated_at = :now,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'

-- name: finish_final
UPDATE timers
SET status = :status, last_error = :error, completed_at = :now, updated_at = :now,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'

-- name: finish_released
UPDATE timers
SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'scheduled' END,
    attempts = attempts - 1, updated_at = :now, lease_owner = NULL, lease_expires_at = NULL,
    fired_at = CASE WHEN attempts > 1 THEN fired_at END
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'

-- name: expired_leases
SELECT id, attempts, lease_owner FROM timers
WHERE status = 'running' AND lease_expires_at < :now

-- name: rescue_timer
UPDATE timers
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retrying' END,
    completed_at = CASE WHEN attempts >= max_attempts THEN :now END,
    run_at = :now, last_error = :error, updated_at = :now,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND status = 'running'

-- name: expire_leases_of
UPDATE timers SET lease_expires_at = :now
WHERE lease_owner = :node_id AND status = 'running' AND lease_expires_at > :now

-- name: register_node
INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at, in_flight)
VALUES (:id, :host, :pid, :role, :started_at, :heartbeat_at, :in_flight)
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = :now, in_flight = :in_flight WHERE id = :node_id

-- name: extend_leases
UPDATE timers SET lease_expires_at = :lease_until
WHERE lease_owner = :node_id AND status = 'running'
  AND id IN (SELECT value FROM json_each(:held))

-- name: deregister_node
DELETE FROM nodes WHERE id = ?

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at

-- name: owned_attempt
SELECT 1 FROM timers
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
