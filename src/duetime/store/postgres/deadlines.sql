-- All SQL of the PostgreSQL store's deadline watch (PostgresDeadlines). Each block's name is
-- the method that runs it.

-- name: watched
-- A page of the namespace's watched schedules (schedules_watched), by id, each with the
-- watch's row of it (NULL columns: not watched yet).
SELECT s.*, w.checked_through AS w_checked_through, w.failures_in_row AS w_failures_in_row,
    w.misses AS w_misses, w.last_miss_at AS w_last_miss_at,
    w.last_miss_reason AS w_last_miss_reason, w.last_success_at AS w_last_success_at
FROM schedules AS s
LEFT JOIN schedule_watch AS w ON w.schedule_id = s.id
WHERE s.namespace = %(namespace)s AND s.id > %(after_id)s
  AND (s.must_succeed_within IS NOT NULL OR s.pause_after_failures IS NOT NULL)
ORDER BY s.id
LIMIT %(limit)s

-- name: watches
SELECT * FROM schedule_watch WHERE schedule_id = ANY (%(ids)s::bigint[])

-- name: occurrences
-- What the timers of some occurrences hold, found through their keys (timer_keys).
SELECT t.key, t.status, t.completed_at, t.last_error
FROM timer_keys AS k
JOIN timers AS t ON t.id = k.timer_id
WHERE k.namespace = %(namespace)s AND k.key = ANY (%(keys)s::text[])

-- name: start_watch
-- A schedule's first round: its row, unless another round wrote it meanwhile.
INSERT INTO schedule_watch (
    schedule_id, namespace, checked_through, failures_in_row, misses, last_miss_at,
    last_miss_reason, last_success_at, updated_at
) VALUES (
    %(schedule_id)s, %(namespace)s, %(checked_through)s, %(failures_in_row)s, %(misses)s,
    %(last_miss_at)s, %(last_miss_reason)s, %(last_success_at)s, %(now)s
)
ON CONFLICT (schedule_id) DO NOTHING

-- name: move_watch
-- A later round: only over the place it read (else another round judged these meanwhile).
UPDATE schedule_watch
SET checked_through = %(checked_through)s, failures_in_row = %(failures_in_row)s,
    misses = %(misses)s, last_miss_at = %(last_miss_at)s,
    last_miss_reason = %(last_miss_reason)s, last_success_at = %(last_success_at)s,
    updated_at = %(now)s
WHERE schedule_id = %(schedule_id)s AND checked_through = %(since)s

-- name: record_miss
INSERT INTO schedule_misses (
    schedule_id, nominal_at, namespace, schedule_name, reason, deadline_at, recorded_at
) VALUES (
    %(schedule_id)s, %(nominal_at)s, %(namespace)s, %(name)s, %(reason)s, %(deadline_at)s,
    %(now)s
)
ON CONFLICT (schedule_id, nominal_at) DO NOTHING

-- name: raise_event
-- An event due now, delivered like any other: its key taken in timer_keys first (a key that
-- exists makes nothing), then its timer under the id the key row was given.
WITH keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id)
    VALUES (%(namespace)s, %(key)s, nextval('timers_id_seq'))
    ON CONFLICT DO NOTHING
    RETURNING timer_id
)
INSERT INTO timers (
    id, namespace, key, type, payload, due_at, run_at, disambiguation, status, max_attempts,
    registered_at, updated_at
) OVERRIDING SYSTEM VALUE
SELECT timer_id, %(namespace)s, %(key)s, %(type)s, %(payload)s::jsonb, %(now)s, %(now)s,
    'compatible', 'scheduled', %(max_attempts)s, %(now)s, %(now)s
FROM keyed

-- name: pause_schedule
UPDATE schedules SET active = false, updated_at = %(now)s, version = version + 1
WHERE id = %(schedule_id)s AND active

-- name: withdraw_occurrences
-- A paused schedule's occurrences made ahead of time and not fired (as a pause by hand).
DELETE FROM timers
WHERE schedule_id = %(schedule_id)s AND status = 'scheduled' AND attempts = 0
  AND due_at > %(after)s

-- name: audit_pause
INSERT INTO audit_log (namespace, at, actor, via, action, target, count)
VALUES (%(namespace)s, %(now)s, %(actor)s, 'python', 'schedule_pause', %(target)s::jsonb, 1)

-- name: recent_misses
SELECT * FROM schedule_misses
WHERE namespace = %(namespace)s
  AND (%(schedule_id)s::bigint IS NULL OR schedule_id = %(schedule_id)s::bigint)
ORDER BY recorded_at DESC, nominal_at DESC
LIMIT %(limit)s

-- name: successes
-- Every watched schedule's latest success in time, for the metrics' gauge.
SELECT s.namespace, s.name, w.last_success_at, s.created_at, w.misses
FROM schedules AS s
JOIN schedule_watch AS w ON w.schedule_id = s.id
WHERE s.must_succeed_within IS NOT NULL
