-- All SQL of the SQLite store's schedules (SqliteSchedules). Each block's name is the method
-- that runs it. Instants are integer microseconds since the epoch, UTC.

-- name: insert_schedule
-- Run for a batch (executemany, one prepared statement); a name already taken is left out.
INSERT INTO schedules (
    namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at, catch_up,
    on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, created_at,
    updated_at, overlap, catch_up_grace, calendar, must_succeed_within, pause_after_failures,
    watched_from, run_window
) VALUES (
    :namespace, :name, :type, :payload, :subject, :cron, :every, :timezone, :start_at, :end_at,
    :catch_up, :on_gap, :on_overlap, :active, :max_attempts, :next_at, :after_at, :anchor_at,
    :now, :now, :overlap, :catch_up_grace, :calendar, :must_succeed_within,
    :pause_after_failures, :watched_from, :run_window
)
ON CONFLICT (namespace, name) DO NOTHING

-- name: last_schedule_id
-- The largest id given so far (AUTOINCREMENT: a new row's is larger). Under the write lock,
-- the rows after it are the ones this transaction inserts.
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'schedules'), 0)

-- name: schedules_made_after
SELECT id, name FROM schedules WHERE id > :after ORDER BY id

-- name: schedule_room
-- How many schedules the namespace holds (counted no further than :up_to, so the check costs
-- what the cap allows, not what a namespace may have grown to) and how many of :names (a JSON
-- array) exist already: new ones must stay within the cap.
SELECT (SELECT count(*) FROM (SELECT 1 FROM schedules WHERE namespace = :namespace
                              LIMIT :up_to)) AS held,
    (SELECT count(*) FROM schedules
     WHERE namespace = :namespace AND name IN (SELECT value FROM json_each(:names))) AS present

-- name: get_schedule
SELECT * FROM schedules WHERE namespace = :namespace AND name = :name

-- name: list_schedules
SELECT * FROM schedules
WHERE namespace = :namespace
  AND (:subject IS NULL OR subject = :subject)
  AND (:type IS NULL OR type = :type)
  AND (:active IS NULL OR active = :active)
  AND name > :after_name
ORDER BY name
LIMIT :limit

-- name: save_schedule
UPDATE schedules
SET type = :type, payload = :payload, subject = :subject, cron = :cron, every = :every,
    timezone = :timezone, start_at = :start_at, end_at = :end_at, catch_up = :catch_up,
    on_gap = :on_gap, on_overlap = :on_overlap, active = :active, max_attempts = :max_attempts,
    next_at = :next_at, after_at = :after_at, anchor_at = :anchor_at, overlap = :overlap,
    catch_up_grace = :catch_up_grace, calendar = :calendar, updated_at = :now,
    must_succeed_within = :must_succeed_within, pause_after_failures = :pause_after_failures,
    watched_from = :watched_from, run_window = :run_window, version = version + 1
WHERE id = :id AND version = :version
RETURNING *

-- name: release_occurrences
-- Occurrences materialised ahead of time and not fired: made again from the revised schedule.
DELETE FROM timers
WHERE schedule_id = :schedule_id AND status = 'scheduled' AND attempts = 0 AND due_at > :after

-- name: delete_schedule
DELETE FROM schedules WHERE namespace = :namespace AND name = :name RETURNING *

-- name: cancel_occurrences
UPDATE timers SET status = 'cancelled', completed_at = :now, updated_at = :now
WHERE schedule_id = :schedule_id AND status IN ('scheduled', 'retrying')

-- name: due_schedules
-- Every schedule is due ahead of its next occurrence, with an overlap policy or without (one
-- behind an unfinished occurrence is made waiting: see migration 0012).
SELECT * FROM schedules
WHERE namespace = :namespace AND active = 1 AND next_at <= :horizon
ORDER BY next_at
LIMIT :limit

-- name: due_rows
-- As due_schedules, but only what planning reads (model.schedules.DueSchedule: the rule and
-- the position, not the payload).
SELECT id, version, name, cron, every, timezone, start_at, end_at, on_gap, on_overlap,
    anchor_at, catch_up, catch_up_grace, overlap, next_at, after_at, last_at, calendar,
    run_window
FROM schedules
WHERE namespace = :namespace AND active = 1 AND next_at <= :horizon
ORDER BY next_at
LIMIT :limit

-- name: due_window
-- due_rows within a range of ids, in id order: a backlog walked in the table's order (see
-- Materializer.tick), a window's rows on neighbouring pages, not one page each.
SELECT id, version, name, cron, every, timezone, start_at, end_at, on_gap, on_overlap,
    anchor_at, catch_up, catch_up_grace, overlap, next_at, after_at, last_at, calendar,
    run_window
FROM schedules NOT INDEXED
WHERE id >= :first_id AND id < :stop_id
  AND namespace = :namespace AND active = 1 AND next_at <= :horizon
ORDER BY id
LIMIT :limit

-- name: schedule_ids
-- The range of ids a backlog's windows walk.
SELECT min(id), max(id) FROM schedules

-- name: backlog_checkpoint
-- Through a materialising backlog: checkpoint once the WAL holds 40,000 pages (160 MB), not
-- 1,000 (SQLite's default). A batch of 5,000 due schedules spread over a million dirties 10,000
-- to 15,000 pages (each row its own page of schedules and of three timer indexes); checkpointed
-- every few batches, a page changed by several is written to the database once.
PRAGMA wal_autocheckpoint = 40000

-- name: usual_checkpoint
-- The rest of the time: SQLite's default cadence (1,000 pages, 4 MB).
PRAGMA wal_autocheckpoint = 1000

-- name: occurrence_states
-- For the due schedules with an overlap policy (:ids a JSON array): has each an unfinished
-- occurrence, and one buffered (run_at 9000-01-01, see migration 0007)?
SELECT schedule_id,
    max(run_at < 221845392000000000) AS unfinished,
    max(run_at >= 221845392000000000) AS buffered
FROM timers
WHERE schedule_id IN (SELECT value FROM json_each(:ids))
  AND status IN ('scheduled', 'running', 'retrying')
GROUP BY schedule_id

-- name: release_buffered
-- The first occurrence parked (buffered or waiting) with nothing unfinished before it (the
-- earlier one ended without the release trigger: it was made before the schedule had a
-- policy) runs now, or at its instant if that is still to come: never early. Any behind it
-- wait for its end.
UPDATE timers
SET run_at = max(due_at, :now), last_error = NULL, updated_at = :now, version = version + 1
WHERE id IN (
    SELECT (SELECT id FROM timers AS parked
            WHERE parked.schedule_id = ids.value AND parked.status = 'scheduled'
              AND parked.run_at = 221845392000000000
            ORDER BY parked.due_at
            LIMIT 1)
    FROM json_each(:ids) AS ids
)

-- name: next_schedule_at
-- The next occurrence of a schedule without an overlap policy, and of one with (each index
-- serves one of them).
SELECT
    (SELECT next_at FROM schedules
     WHERE namespace = :namespace AND active = 1 AND overlap = 'allow' AND next_at IS NOT NULL
     ORDER BY next_at
     LIMIT 1),
    (SELECT next_at FROM schedules
     WHERE namespace = :namespace AND active = 1 AND overlap <> 'allow'
       AND next_at IS NOT NULL
     ORDER BY next_at
     LIMIT 1)

-- name: hear_releases
-- On this process's own connection only (TEMP): an occurrence released by the end of an
-- earlier one (migration 0012's trigger) wakes the workers, as a stored timer does.
-- duetime_released is a function of that connection; other connections have neither.
CREATE TEMP TRIGGER IF NOT EXISTS timers_released_wakeup
AFTER UPDATE OF status ON main.timers
FOR EACH ROW
WHEN NEW.overlap IN ('skip', 'buffer_one')
    AND OLD.run_at < 221845392000000000
    AND OLD.status IN ('scheduled', 'running', 'retrying')
    AND NEW.status IN ('done', 'dead', 'cancelled', 'expired')
BEGIN
    SELECT duetime_released(NEW.updated_at);
END

-- name: advance_schedules
-- :batch is a JSON array of [id, version, next_at, after_at, last_at]; returns the ids whose
-- version still matched (the others were changed meanwhile: skipped).
UPDATE schedules
SET next_at = advance.next_at, after_at = advance.after_at, last_at = advance.last_at,
    version = schedules.version + 1
FROM (
    SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS version,
        json_extract(value, '$[2]') AS next_at, json_extract(value, '$[3]') AS after_at,
        json_extract(value, '$[4]') AS last_at
    FROM json_each(:batch)
) AS advance
WHERE schedules.id = advance.id AND schedules.version = advance.version
RETURNING schedules.id

-- name: insert_occurrences
-- One statement for a batch's timers: :batch is a JSON array of [schedule id, key, due_at,
-- status, run_at, error, overlap]; :now the instant. One statement, not one a timer: run once
-- a timer, a batch of 5,000 at a million schedules wrote about 150 MB to a temporary file (the
-- statements' journals; PRAGMA temp_store = MEMORY removed it too), one writes none. Each
-- timer takes type, payload, subject and max_attempts from its schedule's row (found by id:
-- CROSS JOIN keeps the batch the outer loop). Idempotent by key. A key left cancelled (never
-- fired) by a deleted schedule of the same name is taken over by the new one. An occurrence of
-- a schedule with an overlap policy may be made skipped (cancelled, with the reason) or
-- buffered (run_at 9000-01-01, with the reason). (WHERE true: an upsert after a join needs it.)
INSERT INTO timers (
    namespace, key, type, payload, subject, due_at, run_at, disambiguation, status,
    max_attempts, registered_at, updated_at, schedule_id, last_error, completed_at, overlap,
    run_window, spread
)
SELECT s.namespace, o.key, s.type, s.payload, s.subject, o.due_at, o.run_at, 'compatible',
    o.status, s.max_attempts, :now, :now, s.id, o.error,
    CASE WHEN o.status = 'cancelled' THEN :now END, o.overlap, s.run_window,
    CASE WHEN s.run_window IS NOT NULL THEN 'hash' END
FROM (
    SELECT json_extract(value, '$[0]') AS schedule_id, json_extract(value, '$[1]') AS key,
        json_extract(value, '$[2]') AS due_at, json_extract(value, '$[3]') AS status,
        json_extract(value, '$[4]') AS run_at, json_extract(value, '$[5]') AS error,
        json_extract(value, '$[6]') AS overlap
    FROM json_each(:batch)
) AS o
CROSS JOIN schedules AS s ON s.id = o.schedule_id
WHERE true
ON CONFLICT (namespace, key) DO UPDATE SET
    type = excluded.type, payload = excluded.payload, subject = excluded.subject,
    due_at = excluded.due_at, run_at = excluded.run_at, status = excluded.status,
    max_attempts = excluded.max_attempts, completed_at = excluded.completed_at,
    last_error = excluded.last_error, updated_at = excluded.updated_at,
    schedule_id = excluded.schedule_id, overlap = excluded.overlap,
    run_window = excluded.run_window, spread = excluded.spread, version = timers.version + 1
WHERE timers.status = 'cancelled' AND timers.attempts = 0
  AND timers.schedule_id IS NOT excluded.schedule_id

-- name: schedules_after
SELECT * FROM schedules
WHERE id > :after_id AND (cron IS NOT NULL OR calendar IS NOT NULL)
ORDER BY id
LIMIT :limit

-- name: pending_local_timers
SELECT * FROM timers
WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying') AND id > :after_id
ORDER BY id
LIMIT :limit

-- name: reresolve_timer
UPDATE timers
SET due_at = :new_due_at,
    run_at = CASE WHEN run_at = :old_due_at THEN :new_due_at ELSE run_at END,
    updated_at = :now
WHERE id = :id AND due_at = :old_due_at AND local IS NOT NULL
  AND status IN ('scheduled', 'retrying')

-- name: record_timer_move
-- The move reresolve_timer just made, with the wall time and zone the timer kept.
INSERT INTO timer_moves (timer_id, moved_at, reason, local, timezone, from_at, to_at)
SELECT id, :now, :reason, local, timezone, :old_due_at, :new_due_at FROM timers WHERE id = :id

-- name: list_timer_moves
SELECT * FROM timer_moves WHERE timer_id = :timer_id ORDER BY moved_at, rowid

-- name: get_meta
SELECT value FROM meta WHERE key = :key

-- name: set_meta
INSERT INTO meta (key, value, updated_at) VALUES (:key, :value, :now)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at

-- name: reseal_schedules_scan
-- A rotation's batch of schedules (resealing.py), by id.
SELECT id, namespace, payload, NULL AS last_error FROM schedules
WHERE id > :after ORDER BY id LIMIT :limit

-- name: reseal_schedule_payload
-- Only over the value read: a schedule changed meanwhile keeps its change.
UPDATE schedules SET payload = :new WHERE id = :id AND payload = :old

-- name: release_local_timer
-- (Nothing holds a SQLite timer today: the SQL functions are PostgreSQL's. Kept so the part
-- means the same on both backends.)
UPDATE timers
SET due_at = :due_at, run_at = :due_at, updated_at = :now
WHERE id = :id AND run_at = :held_at AND status IN ('scheduled', 'retrying')

-- name: fail_local_timer
UPDATE timers
SET status = 'dead', last_error = :error, completed_at = :now, updated_at = :now
WHERE id = :id AND run_at = :held_at AND status IN ('scheduled', 'retrying')
