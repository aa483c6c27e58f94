-- Stored timers as operators see them in the PostgreSQL store: reads, listings, actions on one
-- timer or many (timers.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: get_timer
-- The hot table first (its keys are in timer_keys), then the history: an archived timer is
-- still found by its key (the newest archived one, as a key may be used again once its timer
-- is archived).
SELECT * FROM (
    SELECT timers.*, false AS archived FROM timer_keys JOIN timers ON timers.id = timer_id
    WHERE timer_keys.namespace = %(namespace)s AND timer_keys.key = %(key)s
    UNION ALL
    (SELECT *, true FROM timer_history WHERE namespace = %(namespace)s AND key = %(key)s
     ORDER BY id DESC LIMIT 1)
) AS found
ORDER BY archived
LIMIT 1

-- name: timer_filter
-- The conditions of a TimerFilter (cursors.timer_filter_params), shared by the listing and the
-- bulk actions; status is checked by each statement, as what it means differs.
(%(subject)s::text IS NULL OR subject = %(subject)s::text)
AND (%(type_like)s::text IS NULL OR type LIKE %(type_like)s::text)
AND (%(due_from)s::timestamptz IS NULL OR due_at >= %(due_from)s::timestamptz)
AND (%(due_until)s::timestamptz IS NULL OR due_at < %(due_until)s::timestamptz)
AND (%(keys)s::text[] IS NULL OR key = ANY(%(keys)s::text[]))
-- A schedule's occurrences: the prefix, then their instant (a digit: not a longer name's key).
AND (%(key_prefix)s::text IS NULL OR (left(key, length(%(key_prefix)s::text)) = %(key_prefix)s::text
    AND substr(key, length(%(key_prefix)s::text) + 1, 1) IN ('0', '1', '2', '3', '4', '5', '6', '7', '8', '9')))
AND (%(payload_doc)s::jsonb IS NULL OR payload @> %(payload_doc)s::jsonb)

-- name: list_timers
-- Newest first over the hot table and the history (ids are never reused: one cursor serves
-- both). Pending, running and dead timers are never archived, so asking for those skips it.
-- The hot rows not running come from timers_listing (or timers_subject), the running ones,
-- which those leave out, from timers_leased (see migration 0009); the always-true bounds on
-- the lease keep that index chosen even on a table never analysed.
SELECT * FROM (
    (SELECT * FROM timers
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND %(status)s::text IS DISTINCT FROM 'running'
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND id < %(before_id)s
     ORDER BY id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timers
     WHERE lease_expires_at BETWEEN '-infinity' AND 'infinity'
       AND namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR %(status)s::text = 'running')
       AND
       -- include: timer_filter
       AND id < %(before_id)s
     ORDER BY id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timer_history
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR %(status)s::text IN ('done', 'cancelled', 'expired'))
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND id < %(before_id)s
     ORDER BY id DESC
     LIMIT %(limit)s)
) AS found
ORDER BY id DESC
LIMIT %(limit)s

-- name: list_timers_by_due
-- Earliest due first over the hot table and the history, after the cursor's (due_at, id).
SELECT * FROM (
    (SELECT * FROM timers
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::timestamptz IS NULL OR (due_at, id) > (%(after_value)s::timestamptz, %(after_id)s::bigint))
     ORDER BY due_at, id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timer_history
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR %(status)s::text IN ('done', 'cancelled', 'expired'))
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::timestamptz IS NULL OR (due_at, id) > (%(after_value)s::timestamptz, %(after_id)s::bigint))
     ORDER BY due_at, id
     LIMIT %(limit)s)
) AS found
ORDER BY due_at, id
LIMIT %(limit)s

-- name: list_timers_by_updated
-- Latest change first, after the cursor's (updated_at, id).
SELECT * FROM (
    (SELECT * FROM timers
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::timestamptz IS NULL OR (updated_at, id) < (%(after_value)s::timestamptz, %(after_id)s::bigint))
     ORDER BY updated_at DESC, id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timer_history
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR %(status)s::text IN ('done', 'cancelled', 'expired'))
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::timestamptz IS NULL OR (updated_at, id) < (%(after_value)s::timestamptz, %(after_id)s::bigint))
     ORDER BY updated_at DESC, id DESC
     LIMIT %(limit)s)
) AS found
ORDER BY updated_at DESC, id DESC
LIMIT %(limit)s

-- name: list_timers_by_attempts
-- Most attempts first, after the cursor's (attempts, id).
SELECT * FROM (
    (SELECT * FROM timers
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::int IS NULL OR (attempts, id) < (%(after_value)s::int, %(after_id)s::bigint))
     ORDER BY attempts DESC, id DESC
     LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM timer_history
     WHERE namespace = %(namespace)s
       AND (%(status)s::text IS NULL OR %(status)s::text IN ('done', 'cancelled', 'expired'))
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
       AND (%(after_value)s::int IS NULL OR (attempts, id) < (%(after_value)s::int, %(after_id)s::bigint))
     ORDER BY attempts DESC, id DESC
     LIMIT %(limit)s)
) AS found
ORDER BY attempts DESC, id DESC
LIMIT %(limit)s

-- name: list_types
-- Event types starting with the prefix among the newest timers (the last :scan by
-- timers_listing: a bounded cost however large the table) and the namespace's schedules.
SELECT type FROM (
    (SELECT type FROM timers
     WHERE namespace = %(namespace)s AND lease_expires_at IS NULL
     ORDER BY id DESC LIMIT %(scan)s)
    UNION
    SELECT type FROM schedules WHERE namespace = %(namespace)s
) AS known
WHERE left(type, length(%(prefix)s::text)) = %(prefix)s::text
ORDER BY type
LIMIT %(limit)s

-- name: bulk_batch
-- The next batch of a bulk action: ids after the previous batch's last, oldest first, that
-- the filter takes and the action applies to (:acts_on). Running rows (leased) are never
-- acted on, so timers_listing (or timers_dead) serves the walk. Each batch is its own short
-- transaction: a bulk action over 100,000 rows never holds their locks all at once.
SELECT id FROM timers
WHERE namespace = %(namespace)s
  AND lease_expires_at IS NULL
  AND id > %(after_id)s
  AND status = ANY(%(acts_on)s::text[])
  AND (%(run_after)s::timestamptz IS NULL OR run_at > %(run_after)s::timestamptz)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND
  -- include: timer_filter
ORDER BY id
LIMIT %(limit)s

-- name: bulk_keys
-- bulk_batch for a selection of keys: the ids found through timer_keys, then by id.
SELECT id FROM timers
WHERE id IN (SELECT timer_id FROM timer_keys
             WHERE namespace = %(namespace)s AND key = ANY(%(keys)s::text[]))
  AND namespace = %(namespace)s
  AND lease_expires_at IS NULL
  AND id > %(after_id)s
  AND status = ANY(%(acts_on)s::text[])
  AND (%(run_after)s::timestamptz IS NULL OR run_at > %(run_after)s::timestamptz)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND
  -- include: timer_filter
ORDER BY id
LIMIT %(limit)s

-- name: count_keys
-- How many of a selection of keys a bulk action would take: bulk_keys's conditions, counted.
SELECT count(*) FROM timers
WHERE id IN (SELECT timer_id FROM timer_keys
             WHERE namespace = %(namespace)s AND key = ANY(%(keys)s::text[]))
  AND namespace = %(namespace)s
  AND lease_expires_at IS NULL
  AND status = ANY(%(acts_on)s::text[])
  AND (%(run_after)s::timestamptz IS NULL OR run_at > %(run_after)s::timestamptz)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND
  -- include: timer_filter

-- name: delete_candidates
-- A bulk delete's next batch: finished timers of the hot table and of the history (every row
-- there is finished), ids after the previous batch's last, as the listing shows them both.
SELECT id FROM (
    (SELECT id FROM timers
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND id > %(after_id)s
       AND status = ANY(%(acts_on)s::text[])
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
     ORDER BY id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM timer_history
     WHERE namespace = %(namespace)s
       AND id > %(after_id)s
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
     ORDER BY id
     LIMIT %(limit)s)
) AS found
ORDER BY id
LIMIT %(limit)s

-- name: delete_key_candidates
-- delete_candidates for a selection of keys: the hot rows through timer_keys, the archived
-- ones through timer_history_key.
SELECT id FROM (
    (SELECT id FROM timers
     WHERE id IN (SELECT timer_id FROM timer_keys
                  WHERE namespace = %(namespace)s AND key = ANY(%(keys)s::text[]))
       AND namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND id > %(after_id)s
       AND status = ANY(%(acts_on)s::text[])
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
     ORDER BY id
     LIMIT %(limit)s)
    UNION ALL
    (SELECT id FROM timer_history
     WHERE namespace = %(namespace)s
       AND key = ANY(%(keys)s::text[])
       AND id > %(after_id)s
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
     ORDER BY id
     LIMIT %(limit)s)
) AS found
ORDER BY id
LIMIT %(limit)s

-- name: count_deletable
-- How many timers a bulk delete would take: delete_candidates's conditions, counted.
SELECT
    (SELECT count(*) FROM timers
     WHERE namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND status = ANY(%(acts_on)s::text[])
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
    )
    + (SELECT count(*) FROM timer_history
       WHERE namespace = %(namespace)s
         AND (%(status)s::text IS NULL OR status = %(status)s::text)
         AND
         -- include: timer_filter
      ) AS count

-- name: count_deletable_keys
-- How many of a selection of keys a bulk delete would take: delete_key_candidates, counted.
SELECT
    (SELECT count(*) FROM timers
     WHERE id IN (SELECT timer_id FROM timer_keys
                  WHERE namespace = %(namespace)s AND key = ANY(%(keys)s::text[]))
       AND namespace = %(namespace)s
       AND lease_expires_at IS NULL
       AND status = ANY(%(acts_on)s::text[])
       AND (%(status)s::text IS NULL OR status = %(status)s::text)
       AND
       -- include: timer_filter
    )
    + (SELECT count(*) FROM timer_history
       WHERE namespace = %(namespace)s
         AND key = ANY(%(keys)s::text[])
         AND (%(status)s::text IS NULL OR status = %(status)s::text)
         AND
         -- include: timer_filter
      ) AS count

-- name: dead_types
-- The dead letters by type, through timers_dead; the newest error of each type read back the
-- same index.
SELECT type, count(*) AS count, max(completed_at) AS newest_at,
    (SELECT last_error FROM timers AS newest
     WHERE newest.namespace = %(namespace)s AND newest.status = 'dead'
       AND newest.type = timers.type
     ORDER BY newest.id DESC LIMIT 1) AS newest_error
FROM timers
WHERE namespace = %(namespace)s AND status = 'dead'
GROUP BY type
ORDER BY count DESC, type
LIMIT %(limit)s

-- name: bulk_count
-- How many timers a bulk action would take: bulk_batch's conditions, counted.
SELECT count(*) FROM timers
WHERE namespace = %(namespace)s
  AND lease_expires_at IS NULL
  AND status = ANY(%(acts_on)s::text[])
  AND (%(run_after)s::timestamptz IS NULL OR run_at > %(run_after)s::timestamptz)
  AND (%(status)s::text IS NULL OR status = %(status)s::text)
  AND
  -- include: timer_filter

-- name: bulk_cancel
UPDATE timers
SET status = 'cancelled', completed_at = %(now)s, updated_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('scheduled', 'retrying')
  AND lease_expires_at IS NULL

-- name: bulk_replay
UPDATE timers
SET status = 'scheduled', run_at = %(now)s, completed_at = NULL,
    updated_at = %(now)s, max_attempts = max_attempts + attempts
WHERE id = ANY(%(ids)s::bigint[]) AND status = 'dead'

-- name: bulk_run_now
UPDATE timers
SET run_at = %(now)s, updated_at = %(now)s
WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('scheduled', 'retrying')
  AND lease_expires_at IS NULL AND run_at > %(now)s

-- name: bulk_delete
-- Finished timers leave with their attempts, from the hot table and from the history (ids are
-- never reused, so one list of ids serves both). A row that is pending or running again by now
-- stays, and so do its attempts.
WITH hot AS (
    DELETE FROM timers
    WHERE id = ANY(%(ids)s::bigint[]) AND status IN ('done', 'dead', 'cancelled', 'expired')
      AND lease_expires_at IS NULL
    RETURNING id
),
hot_attempts AS (
    DELETE FROM attempts WHERE timer_id IN (SELECT id FROM hot)
),
archived AS (
    DELETE FROM timer_history
    WHERE namespace = %(namespace)s AND id = ANY(%(ids)s::bigint[])
    RETURNING id
),
archived_attempts AS (
    DELETE FROM attempt_history WHERE timer_id IN (SELECT id FROM archived)
)
SELECT (SELECT count(*) FROM hot) + (SELECT count(*) FROM archived) AS count

-- name: delete_timer
-- One key: its hot timer if finished, with every archived timer of the key (a key may be used
-- again once its timer is archived), each with its attempts; the archived ones also when the
-- key has no hot timer at all. A pending or running hot timer keeps everything (nothing comes
-- back, and the caller says why).
WITH found AS (
    SELECT timer_id FROM timer_keys WHERE namespace = %(namespace)s AND key = %(key)s
),
hot AS (
    DELETE FROM timers
    WHERE id = (SELECT timer_id FROM found)
      AND status IN ('done', 'dead', 'cancelled', 'expired') AND lease_expires_at IS NULL
    RETURNING timers.*, false AS archived
),
hot_attempts AS (
    DELETE FROM attempts WHERE timer_id IN (SELECT id FROM hot)
),
archived AS (
    DELETE FROM timer_history
    WHERE namespace = %(namespace)s AND key = %(key)s
      AND (NOT EXISTS (SELECT FROM found) OR EXISTS (SELECT FROM hot))
    RETURNING timer_history.*, true AS archived
),
archived_attempts AS (
    DELETE FROM attempt_history WHERE timer_id IN (SELECT id FROM archived)
)
SELECT * FROM (SELECT * FROM hot UNION ALL SELECT * FROM archived) AS gone
ORDER BY archived, id DESC

-- name: run_now
-- Make one pending timer due now (retry now, or run early); the key's row as cancel finds it.
UPDATE timers
SET run_at = %(now)s, updated_at = %(now)s
WHERE id = (SELECT timer_id FROM timer_keys WHERE namespace = %(namespace)s AND key = %(key)s)
  AND status IN ('scheduled', 'retrying')
RETURNING *

-- name: list_attempts
-- A timer's attempts, in the hot table or archived with it, the one it is running now, and the
-- first attempt that completed it when that has no row of its own (see finish).
-- An attempt running now has no known start (its worker reports it with the outcome); rows
-- written before claimed_at was kept have none either, and their started_at held the claim's
-- instant.
SELECT timer_id, number, node_id, coalesce(claimed_at, started_at) AS claimed_at, started_at,
    finished_at, outcome, error, traceback
FROM attempts
WHERE timer_id = %(timer_id)s
UNION ALL
SELECT id, attempts, lease_owner, updated_at, NULL, NULL, NULL, NULL, NULL FROM timers
WHERE id = %(timer_id)s AND status = 'running'
  AND NOT EXISTS (SELECT FROM attempts WHERE timer_id = timers.id AND number = timers.attempts)
UNION ALL
-- A first attempt that completed the timer lives on its row (migration 0011).
SELECT id, 1, done_by, claimed_at, fired_at, completed_at, 'done', NULL, NULL FROM timers
WHERE id = %(timer_id)s AND done_by IS NOT NULL
UNION ALL
SELECT timer_id, number, node_id, coalesce(claimed_at, started_at), started_at, finished_at,
    outcome, error, traceback
FROM attempt_history
WHERE timer_id = %(timer_id)s
ORDER BY number

-- name: count_by_status
SELECT status, count(*) AS count FROM timers WHERE namespace = %(namespace)s GROUP BY status

-- name: gauge_counts
-- Timers by namespace and status, every namespace at once (a metrics scrape).
SELECT namespace, status, count(*) AS count FROM timers GROUP BY namespace, status

-- name: gauge_earliest
-- Every namespace with the earliest run_at of its pending timers: one probe of the pending
-- index per namespace (as next_run_at), all in one statement.
SELECT namespaces.name AS namespace,
    (SELECT run_at FROM timers
     WHERE namespace = namespaces.name AND status IN ('scheduled', 'retrying')
       AND run_at <= 'infinity'
     ORDER BY run_at
     LIMIT 1) AS earliest
FROM namespaces

-- name: cancel
UPDATE timers
SET status = 'cancelled', completed_at = %(now)s, updated_at = %(now)s
WHERE id = (SELECT timer_id FROM timer_keys WHERE namespace = %(namespace)s AND key = %(key)s)
  AND status IN ('scheduled', 'retrying')
RETURNING *

-- name: replay
-- A fresh set of attempts: numbering goes on (the history keeps the old ones), and the budget
-- grows by as many attempts as were used.
UPDATE timers
SET status = 'scheduled', run_at = %(now)s, completed_at = NULL,
    updated_at = %(now)s, max_attempts = max_attempts + attempts
WHERE id = (SELECT timer_id FROM timer_keys WHERE namespace = %(namespace)s AND key = %(key)s)
  AND status = 'dead'
RETURNING *

-- name: reseal_scan
-- A rotation's batch (resealing.py): the next timers of the hot table by id, with what may be
-- sealed.
SELECT id, namespace, payload::text AS payload, last_error FROM timers
WHERE id > %(after)s ORDER BY id LIMIT %(limit)s

-- name: reseal_attempts_scan
SELECT timer_id, number, error, traceback FROM attempts WHERE timer_id = ANY(%(ids)s)

-- name: reseal_payload
-- Each value only over the value read: what a worker wrote meanwhile stays.
UPDATE timers SET payload = %(new)s::jsonb WHERE id = %(id)s AND payload = %(old)s::jsonb

-- name: reseal_last_error
UPDATE timers SET last_error = %(new)s WHERE id = %(id)s AND last_error = %(old)s

-- name: reseal_attempt_error
UPDATE attempts SET error = %(new)s
WHERE timer_id = %(timer_id)s AND number = %(number)s AND error = %(old)s

-- name: reseal_attempt_traceback
UPDATE attempts SET traceback = %(new)s
WHERE timer_id = %(timer_id)s AND number = %(number)s AND traceback = %(old)s
