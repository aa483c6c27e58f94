-- The PostgreSQL store's history: partitions, archiving, events, activity and charts (history.py).
-- Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: history_namespaces
-- Every namespace with fired or finished timers in the hot table, running ones aside (nothing
-- to archive there), one index probe each (a loose scan of timers_events), whether or not the
-- namespaces table lists it.
WITH RECURSIVE found AS (
    (SELECT namespace FROM timers
     WHERE coalesce(fired_at, completed_at) IS NOT NULL AND lease_expires_at IS NULL
     ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT namespace FROM timers
            WHERE namespace > found.namespace AND coalesce(fired_at, completed_at) IS NOT NULL
              AND lease_expires_at IS NULL
            ORDER BY namespace LIMIT 1)
    FROM found WHERE found.namespace IS NOT NULL
)
SELECT namespace FROM found WHERE namespace IS NOT NULL

-- name: lock_partitions
-- History partitions are created and dropped by one node at a time (per schema).
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: set_lock_timeout
SELECT set_config('lock_timeout', %(timeout)s, true)

-- name: list_partitions
SELECT child.relname AS name
FROM pg_inherits
JOIN pg_class AS child ON child.oid = pg_inherits.inhrelid
WHERE pg_inherits.inhparent = %(parent)s::regclass

-- name: create_partition
-- Identifiers and bounds are filled in with psycopg.sql (DDL takes no parameters).
CREATE TABLE IF NOT EXISTS {partition} PARTITION OF {parent}
    FOR VALUES FROM ({start}) TO ({end})

-- name: drop_partition
DROP TABLE IF EXISTS {partition}

-- name: archive_timers
-- One batch, one statement (its own transaction): terminal timers other than dead that finished
-- before archive_before (but within the retention) move to the history, their attempts first
-- (and leave with it), a first attempt kept on the timer row as a row of its own. The walk goes
-- on after the previous batch's last row.
-- Rows another node is moving are skipped, not waited on.
WITH batch AS (
    SELECT id, coalesce(fired_at, completed_at) AS event_at FROM timers
    WHERE namespace = %(namespace)s
      AND coalesce(fired_at, completed_at) < %(archive_before)s
      AND (coalesce(fired_at, completed_at), id) > (%(after_at)s, %(after_id)s)
      AND lease_expires_at IS NULL
      AND completed_at < %(archive_before)s
      AND completed_at >= %(delete_before)s
      AND status IN ('done', 'cancelled', 'expired')
    ORDER BY coalesce(fired_at, completed_at), id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved_attempts AS (
    DELETE FROM attempts
    USING batch, timers
    WHERE attempts.timer_id = batch.id AND timers.id = batch.id
    RETURNING timers.completed_at, attempts.*
),
-- A first attempt that completed its timer, kept on the timer row (see finish), is written to
-- the history as a row like the others.
first_attempts AS (
    SELECT timers.completed_at, timers.id, 1, timers.done_by, timers.fired_at,
        timers.completed_at, 'done', NULL::text, NULL::text, timers.claimed_at
    FROM batch JOIN timers ON timers.id = batch.id
    WHERE timers.done_by IS NOT NULL
),
kept_attempts AS (
    INSERT INTO attempt_history
    SELECT * FROM moved_attempts UNION ALL SELECT * FROM first_attempts
),
moved AS (
    DELETE FROM timers USING batch WHERE timers.id = batch.id RETURNING timers.*
),
kept AS (
    INSERT INTO timer_history SELECT * FROM moved RETURNING 1
)
SELECT (SELECT count(*) FROM kept) AS count, last.event_at, last.id
FROM (SELECT event_at, id FROM batch ORDER BY event_at DESC, id DESC LIMIT 1) AS last

-- name: delete_finished
-- One batch: whatever finished before delete_before (dead letters too) leaves the hot table,
-- its attempts first.
WITH batch AS (
    SELECT id, coalesce(fired_at, completed_at) AS event_at FROM timers
    WHERE namespace = %(namespace)s
      AND coalesce(fired_at, completed_at) < %(delete_before)s
      AND (coalesce(fired_at, completed_at), id) > (%(after_at)s, %(after_id)s)
      AND lease_expires_at IS NULL
      AND completed_at < %(delete_before)s
    ORDER BY coalesce(fired_at, completed_at), id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
dropped_attempts AS (
    DELETE FROM attempts USING batch WHERE attempts.timer_id = batch.id
),
deleted AS (
    DELETE FROM timers USING batch WHERE timers.id = batch.id RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS count, last.event_at, last.id
FROM (SELECT event_at, id FROM batch ORDER BY event_at DESC, id DESC LIMIT 1) AS last

-- name: list_events
-- The event log: timers that fired, newest fired_at first, from the hot table (timers_events,
-- and timers_leased for the running ones, as in list_timers) and the history. fired_at <=
-- completed_at, so since also prunes older history partitions.
SELECT * FROM (
    (SELECT * FROM timers
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND coalesce(fired_at, completed_at) >= %(since)s
       AND coalesce(fired_at, completed_at) < %(until)s
       AND (coalesce(fired_at, completed_at), id) < (%(before_at)s, %(before_id)s)
       AND fired_at IS NOT NULL
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
     ORDER BY coalesce(fired_at, completed_at) DESC, id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timers
     WHERE lease_expires_at BETWEEN '-infinity' AND 'infinity'
       AND namespace = %(namespace)s
       AND fired_at >= %(since)s
       AND fired_at < %(until)s
       AND (fired_at, id) < (%(before_at)s, %(before_id)s)
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
     ORDER BY fired_at DESC, id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timer_history
     WHERE namespace = %(namespace)s
       AND fired_at >= %(since)s
       AND fired_at < %(until)s
       AND (fired_at, id) < (%(before_at)s, %(before_id)s)
       AND completed_at >= %(since)s
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
     ORDER BY fired_at DESC, id DESC
     LIMIT %(limit)s)
) AS events
ORDER BY fired_at DESC, id DESC
LIMIT %(limit)s

-- name: list_deliveries
-- The attempts of a page of events, hot or archived (none finished before since), those
-- running now, and first attempts that completed their timer without a row (see finish).
SELECT timer_id, number, node_id, coalesce(claimed_at, started_at) AS claimed_at, started_at,
    finished_at, outcome, error, traceback
FROM attempts
WHERE timer_id = ANY (%(ids)s::bigint[])
UNION ALL
SELECT id, attempts, lease_owner, updated_at, NULL, NULL, NULL, NULL, NULL FROM timers
WHERE id = ANY (%(ids)s::bigint[]) AND status = 'running'
  AND NOT EXISTS (SELECT FROM attempts WHERE timer_id = timers.id AND number = timers.attempts)
UNION ALL
SELECT id, 1, done_by, claimed_at, fired_at, completed_at, 'done', NULL, NULL FROM timers
WHERE id = ANY (%(ids)s::bigint[]) AND done_by IS NOT NULL
UNION ALL
SELECT timer_id, number, node_id, coalesce(claimed_at, started_at), started_at, finished_at,
    outcome, error, traceback
FROM attempt_history
WHERE timer_id = ANY (%(ids)s::bigint[]) AND completed_at >= %(since)s
ORDER BY timer_id, number

-- name: activity
-- Timers that fired in [since, until), by minute and status: the hot rows through
-- timers_events (the running ones through timers_leased), archived ones through
-- timer_history_events, as in list_events. Lateness is fired_at - due_at, in milliseconds.
SELECT floor(extract(epoch FROM fired_at - %(since)s) / 60)::int AS minute, status,
    count(*) AS count,
    sum(extract(epoch FROM fired_at - due_at))::float8 * 1000 AS lateness_sum_ms,
    max(extract(epoch FROM fired_at - due_at))::float8 * 1000 AS lateness_max_ms
FROM (
    (SELECT fired_at, due_at, status FROM timers
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND coalesce(fired_at, completed_at) >= %(since)s
       AND coalesce(fired_at, completed_at) < %(until)s
       AND fired_at IS NOT NULL)
    UNION ALL
    (SELECT fired_at, due_at, status FROM timers
     WHERE lease_expires_at BETWEEN '-infinity' AND 'infinity'
       AND namespace = %(namespace)s
       AND fired_at >= %(since)s
       AND fired_at < %(until)s)
    UNION ALL
    (SELECT fired_at, due_at, status FROM timer_history
     WHERE namespace = %(namespace)s
       AND fired_at >= %(since)s
       AND fired_at < %(until)s
       AND completed_at >= %(since)s)
) AS fired
GROUP BY minute, status

-- name: chart_rows
-- The timers whose first attempt started in [since, until) (fired_at: the true start), hot and
-- archived, reached as activity reaches them; of a type, and whose first attempt ran on a node
-- (done_by, else its attempts row), when asked.
FROM (
    (SELECT fired_at, due_at, status FROM timers AS t
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND coalesce(fired_at, completed_at) >= %(since)s
       AND coalesce(fired_at, completed_at) < %(until)s
       AND fired_at >= %(since)s AND fired_at < %(until)s
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
       AND (%(node)s::text IS NULL OR coalesce(done_by,
            (SELECT node_id FROM attempts AS a WHERE a.timer_id = t.id AND a.number = 1))
            = %(node)s::text))
    UNION ALL
    (SELECT fired_at, due_at, status FROM timers AS t
     WHERE lease_expires_at BETWEEN '-infinity' AND 'infinity'
       AND namespace = %(namespace)s
       AND fired_at >= %(since)s AND fired_at < %(until)s
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
       AND (%(node)s::text IS NULL OR
            (SELECT node_id FROM attempts AS a WHERE a.timer_id = t.id AND a.number = 1)
            = %(node)s::text))
    UNION ALL
    (SELECT fired_at, due_at, status FROM timer_history AS h
     WHERE namespace = %(namespace)s
       AND fired_at >= %(since)s AND fired_at < %(until)s
       AND completed_at >= %(since)s
       AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
       AND (%(node)s::text IS NULL OR coalesce(done_by,
            (SELECT node_id FROM attempt_history AS a WHERE a.timer_id = h.id AND a.number = 1))
            = %(node)s::text))
) AS fired

-- name: chart_throughput
-- chart_rows by bucket (of bucket_seconds from since) and status now.
SELECT floor(extract(epoch FROM fired_at - %(since)s) / %(bucket_seconds)s::float8)::int AS bucket,
    status, count(*) AS count
  -- include: chart_rows
GROUP BY bucket, status

-- name: chart_lateness
-- Each bucket's lateness (fired_at - due_at) in milliseconds: percentile_cont of its rows.
SELECT floor(extract(epoch FROM fired_at - %(since)s) / %(bucket_seconds)s::float8)::int AS bucket,
    count(*) AS n,
    percentile_cont(ARRAY[0.5, 0.95, 0.99]::float8[])
        WITHIN GROUP (ORDER BY (extract(epoch FROM fired_at - due_at) * 1000)::float8) AS ps,
    max(extract(epoch FROM fired_at - due_at) * 1000)::float8 AS max_ms
  -- include: chart_rows
GROUP BY bucket

-- name: reseal_history_scan
-- A rotation's batch of archived timers (resealing.py): one namespace's, by id (the listing
-- index), with what may be sealed.
SELECT id, namespace, payload::text AS payload, last_error FROM timer_history
WHERE namespace = %(namespace)s AND id > %(after)s ORDER BY id LIMIT %(limit)s

-- name: reseal_history_attempts_scan
SELECT timer_id, number, error, traceback FROM attempt_history WHERE timer_id = ANY(%(ids)s)

-- name: reseal_history_payload
-- Each value only over the value read.
UPDATE timer_history SET payload = %(new)s::jsonb
WHERE namespace = %(namespace)s AND id = %(id)s AND payload = %(old)s::jsonb

-- name: reseal_history_last_error
UPDATE timer_history SET last_error = %(new)s
WHERE namespace = %(namespace)s AND id = %(id)s AND last_error = %(old)s

-- name: reseal_history_attempt_error
UPDATE attempt_history SET error = %(new)s
WHERE timer_id = %(timer_id)s AND number = %(number)s AND error = %(old)s

-- name: reseal_history_attempt_traceback
UPDATE attempt_history SET traceback = %(new)s
WHERE timer_id = %(timer_id)s AND number = %(number)s AND traceback = %(old)s
