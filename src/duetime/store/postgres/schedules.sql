-- All SQL of the PostgreSQL store's schedules (PostgresSchedules). Each block's name is the
-- method that runs it. Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: insert_schedule
INSERT INTO schedules (
    namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at, catch_up,
    on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, created_at,
    updated_at
) VALUES (
    %(namespace)s, %(name)s, %(type)s, %(payload)s, %(subject)s, %(cron)s, %(every)s,
    %(timezone)s, %(start_at)s, %(end_at)s, %(catch_up)s, %(on_gap)s, %(on_overlap)s,
    %(active)s, %(max_attempts)s, %(next_at)s, %(after_at)s, %(anchor_at)s, %(now)s, %(now)s
)
ON CONFLICT (namespace, name) DO NOTHING
RETURNING *

-- name: get_schedule
SELECT * FROM schedules WHERE namespace = %(namespace)s AND name = %(name)s

-- name: list_schedules
SELECT * FROM schedules
WHERE namespace = %(namespace)s
  AND (%(subject)s::text IS NULL OR subject = %(subject)s::text)
  AND (%(type)s::text IS NULL OR type = %(type)s::text)
  AND (%(active)s::boolean IS NULL OR active = %(active)s::boolean)
  AND name > %(after_name)s
ORDER BY name
LIMIT %(limit)s

-- name: save_schedule
UPDATE schedules
SET type = %(type)s, payload = %(payload)s, subject = %(subject)s, cron = %(cron)s,
    every = %(every)s, timezone = %(timezone)s, start_at = %(start_at)s, end_at = %(end_at)s,
    catch_up = %(catch_up)s, on_gap = %(on_gap)s, on_overlap = %(on_overlap)s,
    active = %(active)s, max_attempts = %(max_attempts)s, next_at = %(next_at)s,
    after_at = %(after_at)s, anchor_at = %(anchor_at)s, updated_at = %(now)s,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s
RETURNING *

-- name: release_occurrences
-- Occurrences materialised ahead of time and not fired: made again from the revised schedule.
DELETE FROM timers
WHERE schedule_id = %(schedule_id)s AND status = 'scheduled' AND attempts = 0
  AND due_at > %(after)s

-- name: delete_schedule
DELETE FROM schedules WHERE namespace = %(namespace)s AND name = %(name)s RETURNING *

-- name: cancel_occurrences
UPDATE timers SET status = 'cancelled', completed_at = %(now)s, updated_at = %(now)s
WHERE schedule_id = %(schedule_id)s AND status IN ('scheduled', 'retrying')

-- name: due_schedules
SELECT * FROM schedules
WHERE namespace = %(namespace)s AND active AND next_at <= %(horizon)s
ORDER BY next_at
LIMIT %(limit)s

-- name: lock_due_schedules
-- The rows another worker is materialising right now are skipped, not waited on.
SELECT * FROM schedules
WHERE namespace = %(namespace)s AND active AND next_at <= %(horizon)s
ORDER BY next_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: next_schedule_at
SELECT next_at FROM schedules
WHERE namespace = %(namespace)s AND active AND next_at <= 'infinity'
ORDER BY next_at
LIMIT 1

-- name: advance_schedules
-- Returns the ids whose version still matched (the others were changed meanwhile: skipped).
UPDATE schedules
SET next_at = advance.next_at, after_at = advance.after_at, last_at = advance.last_at,
    version = schedules.version + 1
FROM unnest(
    %(ids)s::bigint[], %(versions)s::bigint[], %(next_ats)s::timestamptz[],
    %(after_ats)s::timestamptz[], %(last_ats)s::timestamptz[]
) AS advance (id, version, next_at, after_at, last_at)
WHERE schedules.id = advance.id AND schedules.version = advance.version
RETURNING schedules.id

-- name: insert_occurrences
-- Idempotent by key (taken in timer_keys first, as in insert_timer). A key left cancelled
-- (never fired) by a deleted schedule of the same name is taken over by the new one. A
-- schedule's occurrences are made by one node at a time (lock_due_schedules), so no other
-- statement makes the same keys meanwhile.
WITH t AS (
    SELECT * FROM unnest(
        %(namespaces)s::text[], %(keys)s::text[], %(types)s::text[], %(payloads)s::text[],
        %(subjects)s::text[], %(due_ats)s::timestamptz[], %(max_attempts)s::integer[],
        %(schedule_ids)s::bigint[]
    ) WITH ORDINALITY AS t (
        namespace, key, type, payload, subject, due_at, max_attempts, schedule_id, n
    )
),
keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id)
    SELECT namespace, key, nextval('timers_id_seq') FROM t ORDER BY n
    ON CONFLICT (namespace, key) DO NOTHING
    RETURNING namespace, key, timer_id
),
created AS (
    INSERT INTO timers (
        id, namespace, key, type, payload, subject, due_at, run_at, disambiguation, status,
        max_attempts, registered_at, updated_at, schedule_id
    ) OVERRIDING SYSTEM VALUE
    SELECT keyed.timer_id, t.namespace, t.key, type, payload::jsonb, subject, due_at, due_at,
        'compatible', 'scheduled', max_attempts, %(now)s, %(now)s, schedule_id
    FROM t JOIN keyed ON keyed.namespace = t.namespace AND keyed.key = t.key
    ORDER BY t.n
    RETURNING due_at
),
-- The keys that were there before (this statement's snapshot does not see the ones keyed
-- just made).
taken AS (
    UPDATE timers
    SET type = t.type, payload = t.payload::jsonb, subject = t.subject, due_at = t.due_at,
        run_at = t.due_at, status = 'scheduled', max_attempts = t.max_attempts,
        completed_at = NULL, updated_at = %(now)s, schedule_id = t.schedule_id,
        version = timers.version + 1
    FROM t JOIN timer_keys ON timer_keys.namespace = t.namespace AND timer_keys.key = t.key
    WHERE timers.id = timer_keys.timer_id
      AND timers.status = 'cancelled' AND timers.attempts = 0
      AND timers.schedule_id IS DISTINCT FROM t.schedule_id
    RETURNING timers.due_at
)
SELECT due_at FROM created
UNION ALL
SELECT due_at FROM taken

-- name: schedules_after
SELECT * FROM schedules WHERE id > %(after_id)s AND cron IS NOT NULL ORDER BY id
LIMIT %(limit)s

-- name: pending_local_timers
SELECT * FROM timers
WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying') AND id > %(after_id)s
ORDER BY id
LIMIT %(limit)s

-- name: reresolve_timers
UPDATE timers
SET due_at = change.new_due_at,
    run_at = CASE WHEN timers.run_at = change.old_due_at THEN change.new_due_at
        ELSE timers.run_at END,
    updated_at = %(now)s
FROM unnest(
    %(ids)s::bigint[], %(old_due_ats)s::timestamptz[], %(new_due_ats)s::timestamptz[]
) AS change (id, old_due_at, new_due_at)
WHERE timers.id = change.id AND timers.due_at = change.old_due_at
  AND timers.local IS NOT NULL AND timers.status IN ('scheduled', 'retrying')

-- name: get_meta
SELECT value FROM meta WHERE key = %(key)s

-- name: set_meta
INSERT INTO meta (key, value, updated_at) VALUES (%(key)s, %(value)s, %(now)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
