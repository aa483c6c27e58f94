-- All SQL of the SQLite store's deadline watch (SqliteDeadlines). Each block's name is the
-- method that runs it. Instants and spans are integer microseconds, UTC.

-- name: watched
-- A page of the namespace's watched schedules (schedules_watched), by id, each with the
-- watch's row of it (NULL columns: not watched yet).
SELECT s.*, w.checked_through AS w_checked_through, w.failures_in_row AS w_failures_in_row,
    w.misses AS w_misses, w.last_miss_at AS w_last_miss_at,
    w.last_miss_reason AS w_last_miss_reason, w.last_success_at AS w_last_success_at
FROM schedules AS s
LEFT JOIN schedule_watch AS w ON w.schedule_id = s.id
WHERE s.namespace = :namespace AND s.id > :after_id
  AND (s.must_succeed_within IS NOT NULL OR s.pause_after_failures IS NOT NULL)
ORDER BY s.id
LIMIT :limit

-- name: watches
-- The watch's rows of some schedules (:ids a JSON array).
SELECT * FROM schedule_watch WHERE schedule_id IN (SELECT value FROM json_each(:ids))

-- name: occurrences
-- What the timers of some occurrences (:keys a JSON array) hold.
SELECT key, status, completed_at, last_error FROM timers
WHERE namespace = :namespace AND key IN (SELECT value FROM json_each(:keys))

-- name: start_watch
-- A schedule's first round: its row, unless another round wrote it meanwhile.
INSERT INTO schedule_watch (
    schedule_id, namespace, checked_through, failures_in_row, misses, last_miss_at,
    last_miss_reason, last_success_at, updated_at
) VALUES (
    :schedule_id, :namespace, :checked_through, :failures_in_row, :misses, :last_miss_at,
    :last_miss_reason, :last_success_at, :now
)
ON CONFLICT (schedule_id) DO NOTHING

-- name: move_watch
-- A later round: only over the place it read (else another round judged these meanwhile).
UPDATE schedule_watch
SET checked_through = :checked_through, failures_in_row = :failures_in_row, misses = :misses,
    last_miss_at = :last_miss_at, last_miss_reason = :last_miss_reason,
    last_success_at = :last_success_at, updated_at = :now
WHERE schedule_id = :schedule_id AND checked_through = :since

-- name: record_miss
INSERT INTO schedule_misses (
    schedule_id, nominal_at, namespace, schedule_name, reason, deadline_at, recorded_at
) VALUES (
    :schedule_id, :nominal_at, :namespace, :name, :reason, :deadline_at, :now
)
ON CONFLICT (schedule_id, nominal_at) DO NOTHING

-- name: raise_event
-- An event due now, delivered like any other (its key is one per occurrence or pause).
INSERT INTO timers (
    namespace, key, type, payload, due_at, run_at, disambiguation, status, max_attempts,
    registered_at, updated_at
) VALUES (
    :namespace, :key, :type, :payload, :now, :now, 'compatible', 'scheduled', :max_attempts,
    :now, :now
)
ON CONFLICT (namespace, key) DO NOTHING

-- name: pause_schedule
UPDATE schedules SET active = 0, updated_at = :now, version = version + 1
WHERE id = :schedule_id AND active = 1

-- name: withdraw_occurrences
-- A paused schedule's occurrences made ahead of time and not fired (as a pause by hand).
DELETE FROM timers
WHERE schedule_id = :schedule_id AND status = 'scheduled' AND attempts = 0 AND due_at > :after

-- name: audit_pause
INSERT INTO audit_log (namespace, at, actor, via, action, target, count)
VALUES (:namespace, :now, :actor, 'python', 'schedule_pause', :target, 1)

-- name: recent_misses
SELECT * FROM schedule_misses
WHERE namespace = :namespace AND (:schedule_id IS NULL OR schedule_id = :schedule_id)
ORDER BY recorded_at DESC, nominal_at DESC
LIMIT :limit

-- name: successes
-- Every watched schedule's latest success in time, for the metrics' gauge.
SELECT s.namespace, s.name, w.last_success_at, s.created_at, w.misses
FROM schedules AS s
JOIN schedule_watch AS w ON w.schedule_id = s.id
WHERE s.must_succeed_within IS NOT NULL
