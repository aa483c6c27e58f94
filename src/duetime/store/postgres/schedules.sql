-- All SQL of the PostgreSQL store's schedules (PostgresSchedules). Each block's name is the
-- method that runs it. Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: insert_schedules
-- A batch in one statement (arrays, one element a schedule); a name already taken (or given
-- twice) is left out and comes back missing. Only id and name come back: the caller has the
-- rest.
INSERT INTO schedules (
    namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at, catch_up,
    on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, created_at,
    updated_at, overlap, catch_up_grace, calendar, must_succeed_within, pause_after_failures,
    run_window
)
SELECT namespace, name, type, payload::jsonb, subject, cron, every, timezone, start_at, end_at,
    catch_up, on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, %(now)s,
    %(now)s, overlap, catch_up_grace, calendar, must_succeed_within, pause_after_failures,
    run_window
FROM unnest(
    %(namespaces)b::text[], %(names)b::text[], %(types)b::text[], %(payloads)b::text[],
    %(subjects)b::text[], %(crons)b::text[], %(everys)b::interval[], %(timezones)b::text[],
    %(start_ats)b::timestamptz[], %(end_ats)b::timestamptz[], %(catch_ups)b::text[],
    %(on_gaps)b::text[], %(on_overlaps)b::text[], %(actives)b::boolean[],
    %(max_attempts)b::integer[], %(next_ats)b::timestamptz[], %(after_ats)b::timestamptz[],
    %(anchor_ats)b::timestamptz[], %(overlaps)b::text[], %(catch_up_graces)b::interval[],
    %(calendars)b::text[], %(must_succeed_withins)b::interval[],
    %(pause_after_failures)b::integer[], %(run_windows)b::interval[]
) WITH ORDINALITY AS s (
    namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at, catch_up,
    on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, overlap,
    catch_up_grace, calendar, must_succeed_within, pause_after_failures, run_window, n
)
ORDER BY n
ON CONFLICT (namespace, name) DO NOTHING
RETURNING id, name

-- name: schedule_room
-- How many schedules the namespace holds (counted no further than %(up_to)s, so the check costs
-- what the cap allows, not what a namespace may have grown to) and how many of %(names)s exist
-- already: new ones must stay within the cap.
SELECT (SELECT count(*) FROM (SELECT 1 FROM schedules WHERE namespace = %(namespace)s
                              LIMIT %(up_to)s) held) AS held,
    (SELECT count(*) FROM schedules
     WHERE namespace = %(namespace)s AND name = ANY (%(names)s::text[])) AS present

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
    after_at = %(after_at)s, anchor_at = %(anchor_at)s, overlap = %(overlap)s,
    catch_up_grace = %(catch_up_grace)s, calendar = %(calendar)s, updated_at = %(now)s,
    must_succeed_within = %(must_succeed_within)s,
    pause_after_failures = %(pause_after_failures)s, watched_from = %(watched_from)s,
    run_window = %(run_window)s,
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
-- Every schedule is due ahead of its next occurrence, with an overlap policy or without (one
-- behind an unfinished occurrence is made waiting: see migration 0021).
SELECT * FROM schedules
WHERE namespace = %(namespace)s AND active AND next_at <= %(horizon)s
ORDER BY next_at
LIMIT %(limit)s

-- name: lock_due_schedules
-- As due_schedules, but only what planning reads (model.schedules.DueSchedule: the rule and
-- the position, not the payload). The rows another worker is materialising right now (or
-- whose buffered occurrence an ending one is releasing) are skipped, not waited on.
SELECT id, version, name, cron, every, timezone, start_at, end_at, on_gap, on_overlap,
    anchor_at, catch_up, catch_up_grace, overlap, next_at, after_at, last_at, calendar,
    run_window
FROM schedules
WHERE namespace = %(namespace)s AND active AND next_at <= %(horizon)s
ORDER BY next_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: lock_due_window
-- lock_due_schedules within a range of ids, in id order: a backlog walked in the table's order
-- (see Materializer.tick). The due rows of a backlog lie all over the table and its indexes in
-- next_at order; a window's rows share their pages, and their new versions and index entries
-- go in next to one another: a million materialised with about a quarter less server CPU.
-- Only the range is a condition an index can serve: the rest is one expression (IS TRUE), so
-- the planner cannot AND the range with every due row of schedules_due, window after window.
SELECT id, version, name, cron, every, timezone, start_at, end_at, on_gap, on_overlap,
    anchor_at, catch_up, catch_up_grace, overlap, next_at, after_at, last_at, calendar,
    run_window
FROM schedules
WHERE id >= %(first_id)s AND id < %(stop_id)s
  AND (namespace = %(namespace)s AND active AND next_at <= %(horizon)s) IS TRUE
ORDER BY id
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: schedule_ids
-- The range of ids a backlog's windows walk (the primary key's two ends).
SELECT min(id) AS first_id, max(id) AS last_id FROM schedules

-- name: occurrence_states
-- For the due schedules with an overlap policy (their rows locked by lock_due_schedules): has
-- each an unfinished occurrence, and one buffered (run_at 9000-01-01, see migration 0016)?
SELECT schedule_id,
    bool_or(run_at < '9000-01-01 00:00:00+00') AS unfinished,
    bool_or(run_at >= '9000-01-01 00:00:00+00') AS buffered
FROM timers
WHERE schedule_id = ANY (%(schedule_ids)s::bigint[])
  AND status IN ('scheduled', 'running', 'retrying')
GROUP BY schedule_id

-- name: release_buffered
-- The first occurrence parked (buffered or waiting) with nothing unfinished before it (the
-- earlier one ended without the release trigger: it was made before the schedule had a
-- policy) runs now, or at its instant if that is still to come: never early. Any behind it
-- wait for its end.
UPDATE timers
SET run_at = greatest(due_at, %(now)s), last_error = NULL, updated_at = %(now)s,
    version = version + 1
WHERE id IN (
    SELECT DISTINCT ON (schedule_id) id FROM timers
    WHERE schedule_id = ANY (%(schedule_ids)s::bigint[]) AND status = 'scheduled'
      AND run_at = '9000-01-01 00:00:00+00'
    ORDER BY schedule_id, due_at
)

-- name: next_schedule_at
-- The next occurrence of a schedule without an overlap policy, and of one with (each index
-- serves one of them).
SELECT
    (SELECT next_at FROM schedules
     WHERE namespace = %(namespace)s AND active AND overlap = 'allow'
       AND next_at <= 'infinity'
     ORDER BY next_at
     LIMIT 1) AS next_at,
    (SELECT next_at FROM schedules
     WHERE namespace = %(namespace)s AND active AND overlap <> 'allow'
       AND next_at <= 'infinity'
     ORDER BY next_at
     LIMIT 1) AS gated_at

-- name: by_index
-- Before lock_due_schedules and advance_schedules, in their transaction: the due rows are
-- read in next_at order from schedules_due, and a batch's rows found through the primary key.
-- At the default random_page_cost (4, a spinning disk's) the planner joins a batch of a few
-- thousand (or one on a table whose statistics are old) by a sequential scan of all the
-- schedules: a cost growing with the table. On a table never analysed (a million schedules
-- just added, autovacuum not yet round) it read every due row by a bitmap scan and sorted
-- them, for each batch of a backlog. (Turning sequential scans off instead made it walk whole
-- indexes inside nested loops.)
SET LOCAL random_page_cost = 1.1

-- name: advance_moved
-- Included by advance_fresh and advance_schedules: move each schedule whose version still
-- matches (the others were changed meanwhile: skipped, their occurrences not made).
UPDATE schedules
SET next_at = advance.next_at, after_at = advance.after_at, last_at = advance.last_at,
    version = schedules.version + 1
FROM unnest(
    %(ids)b::bigint[], %(versions)b::bigint[], %(next_ats)b::timestamptz[],
    %(after_ats)b::timestamptz[], %(last_ats)b::timestamptz[]
) AS advance (id, version, next_at, after_at, last_at)
WHERE schedules.id = advance.id AND schedules.version = advance.version
RETURNING schedules.id, schedules.namespace, schedules.type, schedules.payload,
    schedules.subject, schedules.max_attempts, schedules.run_window

-- name: advance_occurrences
-- Included by advance_fresh and advance_schedules: the occurrences of the schedules moved,
-- each timer taking type, payload, subject and max_attempts from its schedule's row.
SELECT advanced.namespace, o.key, advanced.type, advanced.payload, advanced.subject,
    o.due_at, advanced.max_attempts, advanced.id AS schedule_id, o.n,
    coalesce(o.status, 'scheduled') AS status, coalesce(o.run_at, o.due_at) AS run_at,
    o.error, o.overlap, advanced.run_window
FROM unnest(
    %(schedule_ids)b::bigint[], %(keys)b::text[], %(due_ats)b::timestamptz[],
    %(statuses)b::text[], %(run_ats)b::timestamptz[], %(errors)b::text[],
    %(overlaps)b::text[]
) WITH ORDINALITY AS o (schedule_id, key, due_at, status, run_at, error, overlap, n)
JOIN advanced ON advanced.id = o.schedule_id

-- name: advance_fresh
-- advance_schedules without its care for keys that exist: every occurrence's key goes into
-- timer_keys without ON CONFLICT and its timer id is drawn as the row is read, in batch order,
-- so no join of the keys back to the batch is needed. (The planner estimates one row for each
-- CTE of advance_schedules and joins its keys back by a nested loop: a batch of 500 spent 34
-- of its 52 ms there, growing with the square of the batch.) A key that exists already
-- refuses the whole statement; the store then runs advance_schedules, under a savepoint.
WITH advanced AS (
    -- include: advance_moved
),
t AS (
    SELECT occurrence.*, nextval('timers_id_seq') AS id
    FROM (
        -- include: advance_occurrences
        ORDER BY o.n
    ) AS occurrence
),
keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id) SELECT namespace, key, id FROM t
),
created AS (
    INSERT INTO timers (
        id, namespace, key, type, payload, subject, due_at, run_at, disambiguation, status,
        max_attempts, registered_at, updated_at, schedule_id, last_error, completed_at, overlap,
        run_window, spread
    ) OVERRIDING SYSTEM VALUE
    SELECT id, namespace, key, type, payload, subject, due_at, run_at, 'compatible', status,
        max_attempts, %(now)s, %(now)s, schedule_id, error,
        CASE WHEN status = 'cancelled' THEN %(now)s END, overlap, run_window,
        CASE WHEN run_window IS NOT NULL THEN 'hash' END
    FROM t
    ORDER BY n
    RETURNING run_at, status
)
SELECT
    coalesce((SELECT array_agg(id) FROM advanced), '{}') AS advanced,
    (SELECT count(*) FROM created) AS created,
    (SELECT min(run_at) FROM created
     WHERE status = 'scheduled' AND run_at < '9000-01-01 00:00:00+00') AS earliest

-- name: advance_schedules
-- A batch in one statement: move each schedule whose version still matches (the others were
-- changed meanwhile: skipped, their occurrences not made), and insert the occurrences of those
-- moved, each timer taking type, payload, subject and max_attempts from its schedule's row.
-- Idempotent by key (taken in timer_keys first, as in insert_timer). A key left cancelled
-- (never fired) by a deleted schedule of the same name is taken over by the new one. A
-- schedule's occurrences are made by one node at a time (lock_due_schedules), so no other
-- statement makes the same keys meanwhile. An occurrence of a schedule with an overlap policy
-- may be made skipped (cancelled, with the reason) or buffered (run_at 9000-01-01, with the
-- reason); the arrays of statuses, run_ats, errors and overlaps are empty when every
-- occurrence simply fires (unnest pads them with NULLs: scheduled at due_at). Returns the ids
-- moved, how many timers were made, and the earliest run_at of those that will run.
WITH advanced AS (
    -- include: advance_moved
),
t AS (
    -- include: advance_occurrences
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
        max_attempts, registered_at, updated_at, schedule_id, last_error, completed_at, overlap,
        run_window, spread
    ) OVERRIDING SYSTEM VALUE
    SELECT keyed.timer_id, t.namespace, t.key, type, payload, subject, due_at, run_at,
        'compatible', status, max_attempts, %(now)s, %(now)s, schedule_id, error,
        CASE WHEN status = 'cancelled' THEN %(now)s END, overlap, run_window,
        CASE WHEN run_window IS NOT NULL THEN 'hash' END
    FROM t JOIN keyed ON keyed.namespace = t.namespace AND keyed.key = t.key
    ORDER BY t.n
    RETURNING run_at, status
),
-- The keys that were there before (this statement's snapshot does not see the ones keyed
-- just made).
taken AS (
    UPDATE timers
    SET type = t.type, payload = t.payload, subject = t.subject, due_at = t.due_at,
        run_at = t.run_at, status = t.status, max_attempts = t.max_attempts,
        completed_at = CASE WHEN t.status = 'cancelled' THEN %(now)s END, last_error = t.error,
        updated_at = %(now)s, schedule_id = t.schedule_id, overlap = t.overlap,
        run_window = t.run_window, spread = CASE WHEN t.run_window IS NOT NULL THEN 'hash' END,
        version = timers.version + 1
    FROM t JOIN timer_keys ON timer_keys.namespace = t.namespace AND timer_keys.key = t.key
    WHERE timers.id = timer_keys.timer_id
      AND timers.status = 'cancelled' AND timers.attempts = 0
      AND timers.schedule_id IS DISTINCT FROM t.schedule_id
    RETURNING timers.run_at, timers.status
),
made AS (
    SELECT run_at, status FROM created
    UNION ALL
    SELECT run_at, status FROM taken
)
SELECT
    coalesce((SELECT array_agg(id) FROM advanced), '{}') AS advanced,
    (SELECT count(*) FROM made) AS created,
    (SELECT min(run_at) FROM made
     WHERE status = 'scheduled' AND run_at < '9000-01-01 00:00:00+00') AS earliest

-- name: schedules_after
SELECT * FROM schedules
WHERE id > %(after_id)s AND (cron IS NOT NULL OR calendar IS NOT NULL)
ORDER BY id
LIMIT %(limit)s

-- name: pending_local_timers
SELECT * FROM timers
WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying') AND id > %(after_id)s
ORDER BY id
LIMIT %(limit)s

-- name: reresolve_timers
-- Move each timer still at its old instant, and record each move in the timer's history.
WITH moved AS (
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
    RETURNING timers.id, timers.local, timers.timezone, change.old_due_at, change.new_due_at
)
INSERT INTO timer_moves (timer_id, moved_at, reason, local, timezone, from_at, to_at)
SELECT id, %(now)s, %(reason)s, local, timezone, old_due_at, new_due_at FROM moved

-- name: list_timer_moves
SELECT * FROM timer_moves WHERE timer_id = %(timer_id)s ORDER BY moved_at, from_at

-- name: get_meta
SELECT value FROM meta WHERE key = %(key)s

-- name: set_meta
INSERT INTO meta (key, value, updated_at) VALUES (%(key)s, %(value)s, %(now)s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at

-- name: reseal_schedules_scan
-- A rotation's batch of schedules (resealing.py), by id.
SELECT id, namespace, payload::text AS payload, NULL::text AS last_error FROM schedules
WHERE id > %(after)s ORDER BY id LIMIT %(limit)s

-- name: reseal_schedule_payload
-- Only over the value read: a schedule changed meanwhile keeps its change.
UPDATE schedules SET payload = %(new)s::jsonb WHERE id = %(id)s AND payload = %(old)s::jsonb

-- name: held_local_timers
-- Local-form timers the SQL functions stored with their instant held (migration 0029), which
-- duetime resolves with its own tz data: a walk of timers_local_pending.
SELECT * FROM timers
WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying')
  AND run_at = '9999-01-01 00:00:00+00'
ORDER BY id
LIMIT %(limit)s

-- name: release_local_timers
UPDATE timers
SET due_at = given.due_at, run_at = given.due_at, updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(due_ats)s::timestamptz[]) AS given (id, due_at)
WHERE timers.id = given.id AND timers.run_at = '9999-01-01 00:00:00+00'
  AND timers.status IN ('scheduled', 'retrying')

-- name: fail_local_timers
-- A held timer whose wall time or zone duetime refuses ends dead, saying why: never lost.
UPDATE timers
SET status = 'dead', last_error = given.error, completed_at = %(now)s, updated_at = %(now)s
FROM unnest(%(ids)s::bigint[], %(errors)s::text[]) AS given (id, error)
WHERE timers.id = given.id AND timers.run_at = '9999-01-01 00:00:00+00'
  AND timers.status IN ('scheduled', 'retrying')
