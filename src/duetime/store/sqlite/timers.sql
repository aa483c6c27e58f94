-- Stored timers as operators see them in the SQLite store: reads, listings, actions on one timer
-- or many (store.py, deletes.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

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
-- A schedule's occurrences: the prefix, then their instant (a digit: not a longer name's key).
AND (:key_prefix IS NULL OR (substr(key, 1, length(:key_prefix)) = :key_prefix
    AND substr(key, length(:key_prefix) + 1, 1) IN ('0', '1', '2', '3', '4', '5', '6', '7', '8', '9')))
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

-- name: reseal_scan
-- A rotation's batch (resealing.py): the next timers by id, with what may be sealed.
SELECT id, namespace, payload, last_error FROM timers WHERE id > :after ORDER BY id LIMIT :limit

-- name: reseal_attempts_scan
SELECT timer_id, number, error, traceback FROM attempts
WHERE timer_id IN (SELECT value FROM json_each(:ids))

-- name: reseal_payload
-- Each value only over the value read: what a worker wrote meanwhile stays.
UPDATE timers SET payload = :new WHERE id = :id AND payload = :old

-- name: reseal_last_error
UPDATE timers SET last_error = :new WHERE id = :id AND last_error = :old

-- name: reseal_attempt_error
UPDATE attempts SET error = :new WHERE timer_id = :timer_id AND number = :number AND error = :old

-- name: reseal_attempt_traceback
UPDATE attempts SET traceback = :new
WHERE timer_id = :timer_id AND number = :number AND traceback = :old
