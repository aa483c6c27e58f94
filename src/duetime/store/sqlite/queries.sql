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

-- name: insert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :due_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now,
    :producer, :trace_context, :priority
)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority, version

-- name: upsert_timer
-- A pending timer takes the new values; one whose every column would stay as it is (the same
-- request again) is left alone and comes back missing, so it is kept, not updated. The trace
-- context is not compared (the same request from another trace is still the same request), but
-- an update takes the new one.
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :due_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now,
    :producer, :trace_context, :priority
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
    producer = excluded.producer,
    trace_context = excluded.trace_context,
    priority = excluded.priority,
    version = timers.version + 1
WHERE timers.status IN ('scheduled', 'retrying')
  AND (timers.type, timers.payload, timers.subject, timers.correlation_id, timers.due_at,
       timers.run_at, timers.local, timers.timezone, timers.disambiguation,
       timers.expires_after, timers.max_attempts, timers.producer, timers.priority)
      IS NOT (excluded.type, excluded.payload, excluded.subject, excluded.correlation_id,
       excluded.due_at, excluded.run_at, excluded.local, excluded.timezone,
       excluded.disambiguation, excluded.expires_after, excluded.max_attempts,
       excluded.producer, excluded.priority)
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority, version

-- name: kept_timer
-- A timer put_timers left as it was, as plain columns in rows.TIMER_COLUMNS order: decoded
-- like the rows an upsert returns, which costs a kept timer little more than an updated one.
SELECT id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority
FROM timers WHERE namespace = ? AND key = ?

-- name: get_timer
SELECT * FROM timers WHERE namespace = ? AND key = ?

-- name: timer_filter
-- The conditions of a TimerFilter (cursors.timer_filter_params), shared by the listing and the
-- bulk actions. Event types hold no GLOB metacharacter but '*' (routes.check_pattern).
(:subject IS NULL OR subject = :subject)
AND (:status IS NULL OR status = :status)
AND (:type_glob IS NULL OR type GLOB :type_glob)
AND (:due_from IS NULL OR due_at >= :due_from)
AND (:due_until IS NULL OR due_at < :due_until)
AND (:keys IS NULL OR key IN (SELECT value FROM json_each(:keys)))
AND (:payload_path IS NULL OR (
    CASE json_type(payload, :payload_path)
        WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number'
        ELSE json_type(payload, :payload_path) END = :payload_kind
    AND (:payload_value IS NULL OR json_extract(payload, :payload_path) = :payload_value)))

-- name: list_timers
-- Newest first, before the cursor's id: a keyset walk of the primary key (or timers_subject,
-- timers_dead), never an OFFSET.
SELECT * FROM timers
WHERE namespace = :namespace
  AND
  -- include: timer_filter
  AND id < :before_id
ORDER BY id DESC
LIMIT :limit

-- name: list_timers_by_due
-- Earliest due first, after the cursor's (due_at, id).
SELECT * FROM timers
WHERE namespace = :namespace
  AND
  -- include: timer_filter
  AND (:after_value IS NULL OR (due_at, id) > (:after_value, :after_id))
ORDER BY due_at, id
LIMIT :limit

-- name: list_timers_by_updated
-- Latest change first, after the cursor's (updated_at, id).
SELECT * FROM timers
WHERE namespace = :namespace
  AND
  -- include: timer_filter
  AND (:after_value IS NULL OR (updated_at, id) < (:after_value, :after_id))
ORDER BY updated_at DESC, id DESC
LIMIT :limit

-- name: list_timers_by_attempts
-- Most attempts first, after the cursor's (attempts, id).
SELECT * FROM timers
WHERE namespace = :namespace
  AND
  -- include: timer_filter
  AND (:after_value IS NULL OR (attempts, id) < (:after_value, :after_id))
ORDER BY attempts DESC, id DESC
LIMIT :limit

-- name: list_types
-- Event types starting with :prefix among the newest :scan timers (read back timers' primary
-- key: a bounded cost however large the table) and the namespace's schedules.
SELECT type FROM (
    SELECT type FROM (
        SELECT type FROM timers WHERE namespace = :namespace ORDER BY id DESC LIMIT :scan
    )
    UNION
    SELECT type FROM schedules WHERE namespace = :namespace
)
WHERE substr(type, 1, length(:prefix)) = :prefix
ORDER BY type
LIMIT :limit

-- name: bulk_batch
-- The next batch of a bulk action: ids after the previous batch's last, oldest first, that the
-- filter takes and the action applies to (:acts_on, a JSON list of statuses). Each batch is
-- one short write transaction, so a bulk action over 100,000 rows never blocks writers long.
SELECT id FROM timers
WHERE namespace = :namespace
  AND id > :after_id
  AND status IN (SELECT value FROM json_each(:acts_on))
  AND (:run_after IS NULL OR run_at > :run_after)
  AND
  -- include: timer_filter
ORDER BY id
LIMIT :limit

-- name: bulk_keys
-- bulk_batch for a selection of keys: found through the (namespace, key) index, then by id.
SELECT id FROM timers
WHERE namespace = :namespace
  AND key IN (SELECT value FROM json_each(:keys))
  AND id > :after_id
  AND status IN (SELECT value FROM json_each(:acts_on))
  AND (:run_after IS NULL OR run_at > :run_after)
  AND
  -- include: timer_filter
ORDER BY id
LIMIT :limit

-- name: count_keys
-- How many of a selection of keys a bulk action would take: bulk_keys's conditions, counted.
SELECT count(*) FROM timers
WHERE namespace = :namespace
  AND key IN (SELECT value FROM json_each(:keys))
  AND status IN (SELECT value FROM json_each(:acts_on))
  AND (:run_after IS NULL OR run_at > :run_after)
  AND
  -- include: timer_filter

-- name: dead_types
-- The dead letters by type, through timers_dead; the newest error of each type read back the
-- same index.
SELECT type, count(*) AS count, max(completed_at) AS newest_at,
    (SELECT last_error FROM timers AS newest
     WHERE newest.namespace = :namespace AND newest.status = 'dead'
       AND newest.type = timers.type
     ORDER BY newest.id DESC LIMIT 1) AS newest_error
FROM timers
WHERE namespace = :namespace AND status = 'dead'
GROUP BY type
ORDER BY count DESC, type
LIMIT :limit

-- name: bulk_count
-- How many timers a bulk action would take: bulk_batch's conditions, counted.
SELECT count(*) FROM timers
WHERE namespace = :namespace
  AND status IN (SELECT value FROM json_each(:acts_on))
  AND (:run_after IS NULL OR run_at > :run_after)
  AND
  -- include: timer_filter

-- name: bulk_cancel
UPDATE timers
SET status = 'cancelled', completed_at = :now, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status IN ('scheduled', 'retrying')

-- name: bulk_replay
UPDATE timers
SET status = 'scheduled', run_at = :now, completed_at = NULL, updated_at = :now,
    max_attempts = max_attempts + attempts
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'dead'

-- name: bulk_run_now
UPDATE timers
SET run_at = :now, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids)) AND status IN ('scheduled', 'retrying')
  AND run_at > :now

-- name: bulk_delete
-- Finished timers leave with their attempts (ON DELETE CASCADE), all but the newest row of the
-- table: SQLite gives a new row max(id) + 1, and an id must never be reused (deliveries carry
-- it for deduplication), so that one is hollowed instead (hollow_newest).
DELETE FROM timers
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('done', 'dead', 'cancelled', 'expired')
  AND id < (SELECT max(id) FROM timers)

-- name: hollow_newest
-- The newest row of the table, when it is to be deleted: kept as a husk in no namespace ('' is
-- no namespace's name) with nothing of the timer left, so its id stays taken; retention deletes
-- it once a newer row exists.
UPDATE timers
SET namespace = '', key = 'deleted:' || id, type = '', payload = 'null', subject = NULL,
    correlation_id = NULL, last_error = NULL, local = NULL, timezone = NULL,
    schedule_id = NULL, destination = NULL, producer = NULL, trace_context = NULL,
    overlap = NULL, updated_at = :now
WHERE id IN (SELECT value FROM json_each(:ids))
  AND status IN ('done', 'dead', 'cancelled', 'expired')
  AND id = (SELECT max(id) FROM timers)
RETURNING id

-- name: drop_attempts_of
DELETE FROM attempts WHERE timer_id = :id

-- name: run_now
-- Make one pending timer due now (retry now, or run early).
UPDATE timers
SET run_at = :now, updated_at = :now
WHERE namespace = :namespace AND key = :key AND status IN ('scheduled', 'retrying')
RETURNING *

-- name: list_attempts
SELECT * FROM attempts WHERE timer_id = ? ORDER BY number

-- name: count_by_status
SELECT status, count(*) FROM timers WHERE namespace = ? GROUP BY status

-- name: gauge_counts
-- Timers by namespace and status, every namespace at once (a metrics scrape).
SELECT namespace, status, count(*) FROM timers GROUP BY namespace, status

-- name: gauge_earliest
-- Every namespace with the earliest run_at of its pending timers, in one statement.
SELECT name,
    (SELECT min(run_at) FROM timers
     WHERE namespace = namespaces.name AND status IN ('scheduled', 'retrying'))
FROM namespaces

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
  AND (:everything
      OR (destination IS NULL AND type IN (SELECT value FROM json_each(:types)))
      OR (destination IS NULL
          AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE timers.type GLOB value))
      OR destination IN (SELECT value FROM json_each(:destinations))
      OR (destination = 'handler'
          AND type IN (SELECT value FROM json_each(:handler_types))))

-- name: claim_due
-- The node's subscriptions filter the pending rows: events (no destination) of a type it takes,
-- exact or by GLOB pattern (event types hold no GLOB metacharacter but *); deliveries to a
-- destination it serves ('handler' = routes.HANDLER: only for types it has a handler for).
-- Plain ORs, cheapest first: a CASE costs the single-handler fast path more per row.
-- include: claim_mark
-- Priority (migration 0010): the urgent due rows (priority above 0, through timers_urgent, an
-- empty index while every timer is normal), highest first, then the normal ones in run_at
-- order through timers_pending; of at most twice :limit candidates the first :limit are taken.
WHERE id IN (
    SELECT id FROM (
        SELECT * FROM (
            SELECT id, priority, run_at FROM timers
            WHERE namespace = :namespace AND priority > 0
              AND status IN ('scheduled', 'retrying') AND run_at <= :now
              AND
              -- include: claim_subscribed
            ORDER BY priority DESC, run_at
            LIMIT :limit
        )
        UNION ALL
        SELECT * FROM (
            SELECT id, 0, run_at FROM timers
            WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
              AND run_at <= :now AND priority = 0
              AND
              -- include: claim_subscribed
            ORDER BY run_at
            LIMIT :limit
        )
    )
    ORDER BY priority DESC, run_at
    LIMIT :limit
)
-- include: claim_returning

-- name: claim_subscribed
-- The node's subscriptions (_claim_params), as claim_due, claim_ruled and next_run_ruled filter
-- the pending rows.
(:everything
    OR (destination IS NULL AND type IN (SELECT value FROM json_each(:types)))
    OR (destination IS NULL
        AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE timers.type GLOB value))
    OR destination IN (SELECT value FROM json_each(:destinations))
    OR (destination = 'handler'
        AND type IN (SELECT value FROM json_each(:handler_types))))

-- name: rule_destination
-- Of the deliveries, a destination's rule takes those to :dest alone; every other rule, and the
-- claim of the rows no rule governs, leaves alone those to the destinations with rules of their
-- own (the JSON array :dest_excluded). See the PostgreSQL store's rule_destination.
((:dest IS NULL OR destination = :dest)
    AND NOT EXISTS (SELECT 1 FROM json_each(:dest_excluded) WHERE timers.destination = value))

-- name: claim_mark
UPDATE timers
SET status = 'running',
    attempts = attempts + 1,
    lease_owner = :node_id,
    lease_expires_at = :lease_until,
    updated_at = :now,
    claim_token = :claim_token

-- name: claim_returning
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority

-- name: claim_ruled
-- claim_due under flow control (duetime.model.limits): only the types GLOB :only and none of
-- those GLOB one of :excluded (a JSON array: more specific limits, pauses). Run inside the
-- write transaction that reads and updates the limit's row.
-- include: claim_mark
WHERE id IN (
    SELECT id FROM (
        SELECT * FROM (
            SELECT id, priority, run_at FROM timers
            WHERE namespace = :namespace AND priority > 0
              AND status IN ('scheduled', 'retrying') AND run_at <= :now
              AND type GLOB :only
              AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
              AND
              -- include: rule_destination
              AND
              -- include: claim_subscribed
            ORDER BY priority DESC, run_at
            LIMIT :limit
        )
        UNION ALL
        SELECT * FROM (
            SELECT id, 0, run_at FROM timers
            WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
              AND run_at <= :now AND priority = 0
              AND type GLOB :only
              AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
              AND
              -- include: rule_destination
              AND
              -- include: claim_subscribed
            ORDER BY run_at
            LIMIT :limit
        )
    )
    ORDER BY priority DESC, run_at
    LIMIT :limit
)
-- include: claim_returning

-- name: claim_partitioned
-- claim_ruled for a limit with partition_by: at most :concurrency running per partition key (the
-- subject, or the payload field :field), ranked within their key after those running, among
-- the oldest :scan due rows (see the PostgreSQL store's claim_partitioned).
-- include: claim_mark
WHERE id IN (
    WITH running AS (
        SELECT CASE WHEN :field IS NULL THEN subject
                ELSE json_extract(payload, '$."' || :field || '"') END AS part,
            count(*) AS n
        FROM timers
        WHERE status = 'running' AND namespace = :namespace AND type GLOB :only
          AND NOT EXISTS (SELECT 1 FROM json_each(:shadows) WHERE timers.type GLOB value)
          AND
          -- include: rule_destination
        GROUP BY 1
    ),
    candidates AS (
        SELECT id, run_at,
            CASE WHEN :field IS NULL THEN subject
                ELSE json_extract(payload, '$."' || :field || '"') END AS part
        FROM timers
        WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
          AND type GLOB :only
          AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
          AND
          -- include: rule_destination
          AND
          -- include: claim_subscribed
        ORDER BY run_at
        LIMIT :scan
    ),
    ranked AS (
        SELECT c.id, c.run_at,
            row_number() OVER (PARTITION BY c.part ORDER BY c.run_at) + coalesce(r.n, 0) AS place
        FROM candidates c LEFT JOIN running r ON r.part IS c.part
    )
    SELECT id FROM ranked WHERE place <= :concurrency ORDER BY run_at LIMIT :limit
)
-- include: claim_returning

-- name: next_run_ruled
SELECT min(run_at) FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination
  AND
  -- include: claim_subscribed

-- name: get_limit
SELECT concurrency, rate_count, rate_period_us, burst, partition_by, tat FROM flow_limits
WHERE namespace = :namespace AND pattern = :pattern
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)

-- name: count_leased
SELECT count(*) FROM timers
WHERE status = 'running' AND namespace = :namespace AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination

-- name: spend_tokens
UPDATE flow_limits SET tat = :tat WHERE namespace = :namespace AND pattern = :pattern

-- name: held_by_rule
SELECT count(*) AS held, min(run_at) AS oldest FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
  AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination

-- name: list_limits
SELECT * FROM flow_limits WHERE namespace = :namespace ORDER BY pattern

-- name: limit_room
-- Whether the pattern has a row already, and how many rules of types the namespace holds (a
-- new one must stay within the cap; a destination's rate is configuration, not counted).
SELECT EXISTS (SELECT 1 FROM flow_limits WHERE namespace = :namespace AND pattern = :pattern)
        AS present,
    (SELECT count(*) FROM flow_limits WHERE namespace = :namespace AND destination IS NULL)
        AS rules

-- name: count_by_type
-- What every rule of a namespace holds (limits ls), in one statement whatever the number of
-- rules: attempts running and due rows waiting, per type and destination (the rules are
-- matched to the types in Python, duetime.model.limits.tally).
SELECT type, destination, sum(running) AS running, sum(held) AS held, min(oldest) AS oldest
FROM (
    SELECT type, destination, count(*) AS running, 0 AS held, NULL AS oldest FROM timers
    WHERE status = 'running' AND namespace = :namespace
    GROUP BY type, destination
    UNION ALL
    SELECT type, destination, 0, count(*), min(run_at) FROM timers
    WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
    GROUP BY type, destination
)
GROUP BY type, destination

-- name: put_limit
INSERT INTO flow_limits (namespace, pattern, concurrency, rate_count, rate_period_us, burst,
    partition_by, destination, updated_at)
VALUES (:namespace, :pattern, :concurrency, :rate_count, :rate_period_us, :burst,
    :partition_by, :destination, :now)
ON CONFLICT (namespace, pattern) DO UPDATE
SET concurrency = excluded.concurrency, rate_count = excluded.rate_count,
    rate_period_us = excluded.rate_period_us, burst = excluded.burst,
    partition_by = excluded.partition_by, destination = excluded.destination,
    updated_at = excluded.updated_at
RETURNING *

-- name: remove_limit
UPDATE flow_limits
SET concurrency = NULL, rate_count = NULL, rate_period_us = NULL, burst = NULL,
    partition_by = NULL, tat = NULL, updated_at = :now
WHERE namespace = :namespace AND pattern = :pattern
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)
RETURNING *

-- name: set_paused
INSERT INTO flow_limits (namespace, pattern, paused, updated_at)
VALUES (:namespace, :pattern, :paused, :now)
ON CONFLICT (namespace, pattern) DO UPDATE
SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING *

-- name: prune_limits
DELETE FROM flow_limits
WHERE namespace = :namespace AND pattern = :pattern
  AND NOT paused AND concurrency IS NULL AND rate_count IS NULL

-- name: open_attempts
-- :batch is a JSON array of [timer id, attempt number] pairs. The attempt has no start until its
-- outcome reports one: :now is the claim's instant.
INSERT INTO attempts (timer_id, number, node_id, claimed_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :node_id, :now
FROM json_each(:batch)

-- name: close_attempt
-- started_at: when the handler (or the delivery) began (NULL: not known, as for a lost one).
UPDATE attempts
SET finished_at = :now, outcome = :outcome, error = :error, traceback = :traceback,
    started_at = coalesce(:started_at, started_at)
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
    started_at = coalesce(finished.started_at, attempts.started_at)
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
INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at, in_flight, subscriptions)
VALUES (:id, :host, :pid, :role, :started_at, :heartbeat_at, :in_flight, :subscriptions)
ON CONFLICT (id) DO UPDATE SET
    heartbeat_at = excluded.heartbeat_at, subscriptions = excluded.subscriptions

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = :now, in_flight = :in_flight WHERE id = :node_id

-- name: extend_leases
-- :held is a JSON array of [timer id, claim token] pairs: each row is renewed only under the
-- claim the node holds it by (a NULL token: any), as on PostgreSQL.
UPDATE timers SET lease_expires_at = :lease_until
WHERE lease_owner = :node_id AND status = 'running'
  AND id IN (SELECT json_extract(value, '$[0]') FROM json_each(:held))
  AND EXISTS (
      SELECT 1 FROM json_each(:held) AS h
      WHERE json_extract(h.value, '$[0]') = timers.id
        AND (json_extract(h.value, '$[1]') IS NULL
            OR json_extract(h.value, '$[1]') = timers.claim_token)
  )

-- name: deregister_node
DELETE FROM nodes WHERE id = ?

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at

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

-- name: sweep_unsubscribed
-- Of the oldest pending rows overdue by the grace (at most :limit, so a backlog never makes it
-- a long scan: rows no one takes stay at the old end of the index, where the next sweep finds
-- them), those no live node's subscriptions take (the claim_due filter is not true) are dead,
-- with the reason.
UPDATE timers
SET status = 'dead', completed_at = :now, updated_at = :now,
    last_error = CASE WHEN destination IS NULL
        THEN 'no subscriber for type ' || type
        ELSE 'no node serves destination ' || destination || ' (type ' || type || ')'
    END
WHERE id IN (
    SELECT id FROM (
        SELECT id, type, destination FROM timers
        WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
          AND run_at < :before
        ORDER BY run_at
        LIMIT :limit
    ) AS oldest
    WHERE (:everything
        OR (oldest.destination IS NULL AND oldest.type IN (SELECT value FROM json_each(:types)))
        OR (oldest.destination IS NULL
            AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE oldest.type GLOB value))
        OR oldest.destination IN (SELECT value FROM json_each(:destinations))
        OR (oldest.destination = 'handler'
            AND oldest.type IN (SELECT value FROM json_each(:handler_types)))
    ) IS NOT TRUE
)
RETURNING id

-- name: unsubscribed_types
-- The pending rows no live node's subscriptions take (the claim_due filter is not true), by
-- type, most first: what waits for a subscriber, as the overview shows it.
SELECT type, count(*) AS count FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND
  -- include: claim_subscribed
  IS NOT TRUE
GROUP BY type
ORDER BY count DESC, type
LIMIT :limit

-- name: history_namespaces
-- Every namespace with fired or finished timers, one probe of timers_events each (a loose scan:
-- DISTINCT would read the whole index on the thread every call waits for).
WITH RECURSIVE found (namespace) AS (
    SELECT (SELECT namespace FROM timers WHERE coalesce(fired_at, completed_at) IS NOT NULL
            ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT namespace FROM timers
            WHERE namespace > found.namespace AND coalesce(fired_at, completed_at) IS NOT NULL
            ORDER BY namespace LIMIT 1)
    FROM found WHERE found.namespace IS NOT NULL
)
SELECT namespace FROM found WHERE namespace IS NOT NULL

-- name: prune_candidates
-- One batch of timers that finished before :delete_before (dead letters too), walking the
-- namespace's timers_events from where the previous batch stopped.
SELECT id, coalesce(fired_at, completed_at) AS event_at FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) < :delete_before
  AND (coalesce(fired_at, completed_at), id) > (:after_at, :after_id)
  AND completed_at < :delete_before
ORDER BY coalesce(fired_at, completed_at), id
LIMIT :limit

-- name: prune_timers
-- Their attempts go with them (ON DELETE CASCADE). The newest row is always kept: SQLite gives a
-- new row max(id) + 1, and an id must never be reused (deliveries carry it for deduplication).
DELETE FROM timers
WHERE id IN (SELECT value FROM json_each(:ids))
  AND id < (SELECT max(id) FROM timers)

-- name: list_events
-- The event log: timers that fired, newest fired_at first (coalesce(...) is fired_at for them;
-- written so, timers_events serves the order and the bounds).
SELECT * FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND (coalesce(fired_at, completed_at), id) < (:before_at, :before_id)
  AND fired_at IS NOT NULL
  AND (:type_glob IS NULL OR type GLOB :type_glob)
ORDER BY coalesce(fired_at, completed_at) DESC, id DESC
LIMIT :limit

-- name: list_deliveries
SELECT * FROM attempts WHERE timer_id IN (SELECT value FROM json_each(:ids))
ORDER BY timer_id, number

-- name: activity
-- Timers that fired in [since, until), by minute and status, through timers_events; lateness
-- is fired_at - due_at (the first attempt's start against the due time), in milliseconds.
SELECT (coalesce(fired_at, completed_at) - :since) / 60000000 AS minute, status,
    count(*) AS count,
    sum(fired_at - due_at) / 1000.0 AS lateness_sum_ms,
    max(fired_at - due_at) / 1000.0 AS lateness_max_ms
FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND fired_at IS NOT NULL
GROUP BY minute, status

-- name: chart_rows
-- The timers whose first attempt started in [since, until) (fired_at: the true start), through
-- timers_events; of a type (glob), and whose first attempt ran on a node, when asked.
FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND fired_at >= :since AND fired_at < :until
  AND (:type_glob IS NULL OR type GLOB :type_glob)
  AND (:node IS NULL
       OR (SELECT node_id FROM attempts WHERE timer_id = timers.id AND number = 1) = :node)

-- name: chart_throughput
-- chart_rows by bucket (of :bucket microseconds from :since) and status now.
SELECT (fired_at - :since) / :bucket AS bucket, status, count(*) AS count
  -- include: chart_rows
GROUP BY bucket, status

-- name: chart_lateness
-- Each bucket's lateness (fired_at - due_at) ranked in order, and per percentile the value at
-- rank floor(p * (n - 1)) and the next: what percentile_cont interpolates between (the store
-- finishes it: charts.interpolated). Exact, from the bucket's ordered rows.
WITH late AS (
    SELECT (fired_at - :since) / :bucket AS bucket, fired_at - due_at AS late_us
    -- include: chart_rows
), ranked AS (
    SELECT bucket, late_us / 1000.0 AS ms,
        row_number() OVER (PARTITION BY bucket ORDER BY late_us) - 1 AS rank,
        count(*) OVER (PARTITION BY bucket) AS n
    FROM late
)
SELECT bucket, n,
    max(CASE WHEN rank = CAST(0.5 * (n - 1) AS INTEGER) THEN ms END) AS p50_low,
    max(CASE WHEN rank = CAST(0.5 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p50_high,
    max(CASE WHEN rank = CAST(0.95 * (n - 1) AS INTEGER) THEN ms END) AS p95_low,
    max(CASE WHEN rank = CAST(0.95 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p95_high,
    max(CASE WHEN rank = CAST(0.99 * (n - 1) AS INTEGER) THEN ms END) AS p99_low,
    max(CASE WHEN rank = CAST(0.99 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p99_high,
    max(ms) AS max_ms
FROM ranked
GROUP BY bucket, n

-- name: data_version
-- Changes when another connection (another process) commits; this connection's own writes
-- are counted by sqlite3's total_changes instead.
PRAGMA data_version
