-- A worker's outcomes, fan-outs and lost leases in the SQLite store (finishing.py, store.py,
-- transactions.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: close_attempt
-- started_at: when the handler (or the delivery) began (NULL: not known, as for a lost one).
-- A claim made by an earlier version wrote its horizon as claimed_at, which may come after the
-- start: the start is then the claimed_at kept (an attempt is claimed before it starts).
UPDATE attempts
SET finished_at = :now, outcome = :outcome, error = :error, traceback = :traceback,
    started_at = coalesce(:started_at, started_at),
    claimed_at = min(claimed_at, coalesce(:started_at, claimed_at))
WHERE timer_id = :timer_id AND number = :attempt AND finished_at IS NULL

-- name: drop_attempt
DELETE FROM attempts WHERE timer_id = :timer_id AND number = :attempt

-- name: finish_done
UPDATE timers
SET status = 'done', completed_at = :now, updated_at = :now, lease_owner = NULL,
    -- the first start known: when the timer fired
    fired_at = coalesce(fired_at, :started_at),
    lease_expires_at = NULL, last_error = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: finish_done_many
-- The common case in one statement: :batch is a JSON array of [timer id, attempt number, claim
-- token, started_at] rows, each fenced like finish_done; returns the ids it changed (the rest
-- are lost).
UPDATE timers
SET status = 'done', completed_at = :now, updated_at = :now, lease_owner = NULL,
    fired_at = coalesce(timers.fired_at, finished.started_at),
    lease_expires_at = NULL, last_error = NULL
FROM (
    SELECT json_extract(value, '$[0]') AS timer_id, json_extract(value, '$[1]') AS attempt,
        json_extract(value, '$[2]') AS claim_token, json_extract(value, '$[3]') AS started_at
    FROM json_each(:batch)
) AS finished
WHERE timers.id = finished.timer_id AND timers.attempts = finished.attempt
  AND timers.lease_owner = :node_id AND timers.status = 'running'
  AND (finished.claim_token IS NULL OR timers.claim_token = finished.claim_token)
RETURNING timers.id

-- name: close_attempts_done
-- close_attempt for every row of :batch (as finish_done_many's), outcome done.
UPDATE attempts SET finished_at = :now, outcome = 'done', error = NULL,
    started_at = coalesce(finished.started_at, attempts.started_at),
    claimed_at = min(attempts.claimed_at, coalesce(finished.started_at, attempts.claimed_at))
FROM (
    SELECT json_extract(value, '$[0]') AS timer_id, json_extract(value, '$[1]') AS attempt,
        json_extract(value, '$[3]') AS started_at
    FROM json_each(:batch)
) AS finished
WHERE attempts.timer_id = finished.timer_id AND attempts.number = finished.attempt
  AND attempts.finished_at IS NULL

-- name: finish_retry
UPDATE timers
SET status = 'retrying', run_at = :run_at, last_error = :error, updated_at = :now,
    -- the first start known: when the timer fired
    fired_at = coalesce(fired_at, :started_at),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: finish_snoozed
UPDATE timers
SET status = 'scheduled', run_at = :run_at, max_attempts = max_attempts + 1, updated_at = :now,
    -- the first start known: when the timer fired
    fired_at = coalesce(fired_at, :started_at),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: finish_final
UPDATE timers
SET status = :status, last_error = :error, completed_at = :now, updated_at = :now,
    -- the first start known: when the timer fired
    fired_at = coalesce(fired_at, :started_at),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: finish_released
UPDATE timers
SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'scheduled' END,
    attempts = attempts - 1, updated_at = :now, lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: expired_leases
SELECT id, attempts, lease_owner FROM timers
WHERE status = 'running' AND lease_expires_at < :now

-- name: rescue_timer
-- The retry is due now, or at the row's own instant when that is still ahead: a row claimed
-- ahead (held by its node until then) must not start earlier on another node.
UPDATE timers
SET status = CASE WHEN attempts >= max_attempts THEN 'dead' ELSE 'retrying' END,
    completed_at = CASE WHEN attempts >= max_attempts THEN :now END,
    run_at = max(run_at, :now), last_error = :error, updated_at = :now,
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND status = 'running'

-- name: expire_leases_of
UPDATE timers SET lease_expires_at = :now
WHERE lease_owner = :node_id AND status = 'running' AND lease_expires_at > :now

-- name: owned_attempt
SELECT 1 FROM timers
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)

-- name: fan_out_event
-- An event handed on by its owner (fenced as finish_done is): done; fan_out_deliveries and
-- close_attempt follow in the same transaction.
UPDATE timers
SET status = 'done', completed_at = :now, updated_at = :now, last_error = NULL,
    fired_at = coalesce(fired_at, :now),
    lease_owner = NULL, lease_expires_at = NULL
WHERE id = :timer_id AND attempts = :attempt AND lease_owner = :node_id AND status = 'running'
  AND (:claim_token IS NULL OR claim_token = :claim_token)
RETURNING run_at

-- name: fan_out_deliveries
-- One delivery row per [key, destination] pair of :deliveries, with the event's content and due
-- when it was; a key that exists already is kept as it is.
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, expires_after,
    status, max_attempts, registered_at, updated_at, destination, producer, trace_context,
    priority
)
SELECT event.namespace, json_extract(d.value, '$[0]'), event.type, event.payload, event.subject,
    event.correlation_id, event.due_at, event.run_at, event.expires_after, 'scheduled',
    event.max_attempts, event.registered_at, :now, json_extract(d.value, '$[1]'), event.producer,
    event.trace_context, event.priority
FROM timers AS event, json_each(:deliveries) AS d
WHERE event.id = :timer_id
ORDER BY d.key
ON CONFLICT (namespace, key) DO NOTHING
