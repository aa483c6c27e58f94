-- All SQL of the PostgreSQL store. Each block's name is the PostgresStore method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: lock_migrations
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema}

-- name: create_migrations_table
CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)

-- name: migrations_table_exists
SELECT to_regclass(%(table)s) IS NOT NULL AS present

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version

-- name: record_migration
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)

-- name: db_now
SELECT clock_timestamp() AS now

-- name: notify
-- Inside a caller's transaction: sent when, and only if, it commits.
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: notify_after_commit
-- After the store's own commit, as a transaction of its own. PostgreSQL holds one global lock
-- from a notifying transaction's pre-commit to its end, WAL flush included, so notifying commits
-- run one at a time; this one skips the flush (a lost hint costs latency, never work: workers
-- re-check anyway) and holds that lock for microseconds. (Its transaction only: the setting
-- ends with it.)
SELECT set_config('synchronous_commit', 'off', true) AS flush, pg_notify(%(channel)s, %(payload)s)

-- name: ensure_namespace
INSERT INTO namespaces (name, created_at) VALUES (%(name)s, %(now)s)
ON CONFLICT (name) DO NOTHING

-- name: namespace_exists
SELECT 1 FROM namespaces WHERE name = %(name)s

-- name: list_namespaces
-- By name, after %(after)s, at most %(limit)s (NULL: all), only those of %(only)s (NULL: every
-- one): a walk of the primary key from the cursor on.
SELECT name FROM namespaces
WHERE name > %(after)s AND (%(only)s::text[] IS NULL OR name = ANY (%(only)s::text[]))
ORDER BY name
LIMIT %(limit)s

-- name: lock_namespaces
-- Capped creations of namespaces run one at a time (per schema): the count of the next one,
-- a later statement, sees the rows of the one before (see duetime.store.room).
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: namespace_room
-- How many namespaces there are (counted no further than the cap) and which of %(names)s are
-- new, read after lock_namespaces.
SELECT (SELECT count(*) FROM (SELECT 1 FROM namespaces LIMIT %(up_to)s) held) AS held,
    ARRAY(SELECT given.name FROM unnest(%(names)s::text[]) AS given (name)
          WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE namespaces.name = given.name))
        AS new

-- name: lock_namespace_row
-- A namespace's row, locked until the transaction ends, before counting what it holds of a
-- capped collection (schedules, rules): two creations at once cannot both take the last place,
-- as the count, a later statement, sees the rows of the transaction that held the lock before
-- (a count in the same statement as the lock would read the snapshot taken before the wait).
-- NO KEY UPDATE: timers written meanwhile, whose key-share lock it leaves alone, never wait.
SELECT 1 FROM namespaces WHERE name = %(namespace)s FOR NO KEY UPDATE

-- name: timer_batch
-- The rows of a scheduling batch, in input order (n), from one array per column (sent in binary:
-- psycopg's text format for arrays costs ~10x more client CPU). A column other than key, payload
-- and due time comes as one value when it is the same for the whole batch, or empty when it is
-- NULL throughout (migration 0013, rows.timer_batch_params). Included by insert_timer,
-- insert_fresh_timers and upsert_timer.
unnest(
    batch_column(%(namespaces)b::text[], %(rows)s::integer), %(keys)b::text[],
    batch_column(%(types)b::text[], %(rows)s::integer), %(payloads)b::text[],
    batch_column(%(subjects)b::text[], %(rows)s::integer),
    batch_column(%(correlation_ids)b::text[], %(rows)s::integer), %(due_ats)b::timestamptz[],
    batch_column(%(locals)b::timestamp[], %(rows)s::integer),
    batch_column(%(timezones)b::text[], %(rows)s::integer),
    batch_column(%(disambiguations)b::text[], %(rows)s::integer),
    batch_column(%(expires_afters)b::interval[], %(rows)s::integer),
    batch_column(%(max_attempts)b::integer[], %(rows)s::integer),
    batch_column(%(producers)b::text[], %(rows)s::integer),
    batch_column(%(trace_contexts)b::text[], %(rows)s::integer),
    batch_column(%(priorities)b::smallint[], %(rows)s::integer)
) WITH ORDINALITY AS new (
    namespace, key, type, payload, subject, correlation_id, due_at, local, timezone,
    disambiguation, expires_after, max_attempts, producer, trace_context, priority, n
)

-- name: written_columns
-- What insert_timer, insert_fresh_timers and upsert_timer return for each row they write
-- (rows.WRITTEN_COLUMNS): every column the statement decides, where the rest (type, payload,
-- due time, options) are stored as sent. Decoding every column of every row was a fifth of the
-- client's time a timer.
id, namespace, key, version, status, attempts, registered_at, updated_at, run_at, fired_at,
completed_at, last_error, lease_owner, lease_expires_at, destination

-- name: insert_timer
-- A whole batch in one statement (timer_batch), in input order, which the ids follow. The key
-- is taken first, in timer_keys (migration 0012), under a new timer id; a key that exists
-- already is left alone and its timer comes back missing from the result.
WITH new AS (
    SELECT * FROM
    -- include: timer_batch
),
keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id)
    SELECT namespace, key, nextval('timers_id_seq') FROM new ORDER BY n
    ON CONFLICT (namespace, key) DO NOTHING
    RETURNING namespace, key, timer_id
)
INSERT INTO timers (
    id, namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority
) OVERRIDING SYSTEM VALUE
SELECT keyed.timer_id, new.namespace, new.key, type, payload::jsonb, subject, correlation_id,
       due_at, due_at, local, timezone, disambiguation, expires_after, 'scheduled', max_attempts,
       %(now)s, %(now)s, producer, trace_context, priority
FROM new JOIN keyed ON keyed.namespace = new.namespace AND keyed.key = new.key
ORDER BY new.n
RETURNING
    -- include: written_columns

-- name: insert_fresh_timers
-- As insert_timer, for a batch whose keys the store generated (every NewTimer.key None): no
-- stored timer can hold one, so the keys go in without ON CONFLICT,
-- whose speculative insertion (look for the key, insert, confirm) cost more than the plain
-- insert itself, and the ids are drawn as the rows are read, in input order, with no join of
-- the keys back to the batch. Should a generated key exist after all, the primary key of
-- timer_keys refuses the batch.
WITH new AS (
    SELECT new.*, nextval('timers_id_seq') AS id FROM
    -- include: timer_batch
),
keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id) SELECT namespace, key, id FROM new
)
INSERT INTO timers (
    id, namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority
) OVERRIDING SYSTEM VALUE
SELECT id, namespace, key, type, payload::jsonb, subject, correlation_id, due_at, due_at, local,
       timezone, disambiguation, expires_after, 'scheduled', max_attempts, %(now)s, %(now)s,
       producer, trace_context, priority
FROM new
ORDER BY n
RETURNING
    -- include: written_columns

-- name: upsert_timer
-- As insert_timer; an existing pending timer takes the new values (version + 1), any other
-- existing timer — and a pending one whose every column would stay as it is (the same request
-- again: kept, not updated, and no write) — is left alone and comes back missing from the
-- result. The trace context is not compared (the same request from another trace is still the
-- same request), but an update takes the new one. The key row of an
-- existing timer is locked (ON CONFLICT ... DO UPDATE, its value unchanged) so that a timer a
-- concurrent batch made is updated after that batch commits, as a conflict on the timer's own
-- row would be; a timer this statement's snapshot cannot see yet (made by a batch that
-- committed while this one waited for its key) comes back in "unseen", and the caller runs
-- those requests again in a new statement, which sees it.
WITH new AS (
    SELECT * FROM
    -- include: timer_batch
),
keyed AS (
    INSERT INTO timer_keys AS k (namespace, key, timer_id)
    SELECT namespace, key, nextval('timers_id_seq') FROM new ORDER BY n
    ON CONFLICT (namespace, key) DO UPDATE SET timer_id = k.timer_id
    RETURNING k.namespace, k.key, k.timer_id, k.xmax = 0 AS made
),
created AS (
    INSERT INTO timers (
        id, namespace, key, type, payload, subject, correlation_id, due_at, run_at, local,
        timezone, disambiguation, expires_after, status, max_attempts, registered_at,
        updated_at, producer, trace_context, priority
    ) OVERRIDING SYSTEM VALUE
    SELECT keyed.timer_id, new.namespace, new.key, type, payload::jsonb, subject,
           correlation_id, due_at, due_at, local, timezone, disambiguation, expires_after,
           'scheduled', max_attempts, %(now)s, %(now)s, producer, trace_context, priority
    FROM new JOIN keyed ON keyed.namespace = new.namespace AND keyed.key = new.key
    WHERE keyed.made
    ORDER BY new.n
    RETURNING
        -- include: written_columns
),
updated AS (
    UPDATE timers
    SET type = new.type,
        payload = new.payload::jsonb,
        subject = new.subject,
        correlation_id = new.correlation_id,
        due_at = new.due_at,
        run_at = new.due_at,
        local = new.local,
        timezone = new.timezone,
        disambiguation = new.disambiguation,
        expires_after = new.expires_after,
        max_attempts = new.max_attempts,
        updated_at = %(now)s,
        producer = new.producer,
        trace_context = new.trace_context,
        priority = new.priority,
        version = timers.version + 1
    FROM new JOIN keyed ON keyed.namespace = new.namespace AND keyed.key = new.key
    WHERE NOT keyed.made AND timers.id = keyed.timer_id
      AND timers.status IN ('scheduled', 'retrying')
      AND (timers.type, timers.payload, timers.subject, timers.correlation_id, timers.due_at,
           timers.run_at, timers.local, timers.timezone, timers.disambiguation,
           timers.expires_after, timers.max_attempts, timers.producer, timers.priority)
          IS DISTINCT FROM (new.type, new.payload::jsonb, new.subject, new.correlation_id,
           new.due_at, new.due_at, new.local, new.timezone, new.disambiguation,
           new.expires_after, new.max_attempts, new.producer, new.priority)
    RETURNING timers.*
)
SELECT *, false AS unseen FROM created
UNION ALL
SELECT
    -- include: written_columns
    , false
FROM updated
UNION ALL
SELECT keyed.timer_id, keyed.namespace, keyed.key, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
    NULL, NULL, NULL, NULL, NULL, true
FROM keyed
WHERE NOT keyed.made AND NOT EXISTS (SELECT FROM timers WHERE id = keyed.timer_id)

-- name: get_timers
-- The timers of a batch of keys. A key archived since the caller's insert conflicted with it is
-- found in the history; when a key has both (reused after archiving), the hot row comes last.
SELECT found.* FROM (
    SELECT timers.*, 1 AS hot
    FROM unnest(%(namespaces)s::text[], %(keys)s::text[]) AS wanted (namespace, key)
    JOIN timer_keys ON timer_keys.namespace = wanted.namespace AND timer_keys.key = wanted.key
    JOIN timers ON timers.id = timer_keys.timer_id
    UNION ALL
    SELECT timer_history.*, 0 FROM timer_history
    JOIN unnest(%(namespaces)s::text[], %(keys)s::text[]) AS wanted (namespace, key)
        USING (namespace, key)
) AS found
ORDER BY hot, id

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

-- name: next_run_at
-- Walk the pending index in run_at order and stop at the first row. The always-true bound on
-- run_at puts both index columns in the index condition, as in claim_due: without it, a table
-- that was never analysed gets a bitmap scan of every pending row of the namespace plus a sort.
SELECT run_at FROM timers
WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
  AND run_at <= 'infinity'
  AND (%(types)s::text[] IS NULL
      OR (destination IS NULL
          AND (type = ANY (%(types)s::text[]) OR type LIKE ANY (%(patterns)s::text[])))
      OR destination = ANY (%(destinations)s::text[])
      OR (destination = 'handler' AND type = ANY (%(handler_types)s::text[])))
ORDER BY run_at
LIMIT 1

-- name: claim_in_order
-- Sent before claim_due, in its transaction: the due rows are read by walking the pending index
-- in run_at order, never sorted. On a large table that was never analysed the planner's guess
-- of the due rows is tiny, and without this it reads every due row with a bitmap scan and sorts
-- them (seconds with 500,000 due) to keep 100; generic or custom, the walk takes milliseconds.
-- Each locked row is then updated through one lookup of its ctid, never by hashing the whole
-- table (which a custom plan for a large batch of an analysed table does).
-- And the prepared statement's generic plan is used, not one planned anew at every call (which
-- PostgreSQL keeps doing on an analysed table): both reach the rows the same way
-- (tests/store/test_postgres_plan.py), and planning was about one part in twenty of the
-- server's time per job.
-- The claim commits without waiting for its WAL to reach the disk. A claim is the one write that
-- may be lost: if the server crashes before the flush (a fraction of a second), the timers are
-- pending again after its restart and run again, which at-least-once delivery allows, as it
-- allows a re-run after a crash during the handler; every outcome is committed durably, and
-- its flush carries the claim's WAL with it. At 10 million pending the flush of the pages a
-- claim first touched after a checkpoint was a fifth of the claim's time.
SELECT set_config('enable_sort', 'off', true) AS enable_sort,
       set_config('enable_hashjoin', 'off', true) AS hashjoin,
       set_config('enable_mergejoin', 'off', true) AS mergejoin,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS generic,
       set_config('synchronous_commit', 'off', true) AS async_commit

-- name: claim_due
-- One statement: lock the due rows (skipping those another node is claiming) and mark them
-- running under this node's lease. The attempt this opens lives on the timer row (number =
-- attempts, node = lease_owner, started = updated_at) until it ends, when finish, rescue or
-- fan_out write its one attempts row; list_attempts shows it meanwhile. The node's subscriptions
-- filter the rows the pending index yields (types NULL: every row): events (no destination) of
-- a type it takes, exact or by LIKE pattern; deliveries to a destination it serves ('handler' =
-- routes.HANDLER: only for types it has a handler for). Rows no one takes are left to
-- sweep_unsubscribed. The filter is plain ORs, no CASE, so a generic plan still estimates few
-- rows.
-- Each locked row is updated where the lock found it (by ctid: no second walk down the primary
-- key, about a fifth of the statement with 10 million pending). A row another transaction
-- changed after this statement's snapshot was taken is locked in its new version, which the
-- snapshot cannot see: it is then left out of this claim (and unlocked at its commit), never
-- claimed twice.
-- Priority (migration 0019): the urgent due rows (priority above 0) are locked first, highest
-- first, through timers_urgent, which holds only pending urgent rows: while every timer is
-- normal that is a probe of an empty index. The normal rows then fill what is left of the
-- limit, walked through timers_pending in run_at order as before (its rows of priority 0: an
-- urgent row the first part left is over the limit or locked by another claim).
WITH urgent AS (
    SELECT ctid FROM timers
    WHERE namespace = %(namespace)s
      AND priority > 0 AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND
      -- include: claim_subscribed
    ORDER BY priority DESC, run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
normal AS (
    SELECT ctid FROM timers
    WHERE namespace = %(namespace)s
      AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND priority = 0
      AND
      -- include: claim_subscribed
    ORDER BY run_at
    LIMIT %(limit)s - (SELECT count(*) FROM urgent)
    FOR UPDATE SKIP LOCKED
),
due AS (
    -- (at most %(limit)s rows already: the LIMIT tells the planner so, for the update's join)
    SELECT ctid FROM urgent UNION ALL SELECT ctid FROM normal
    LIMIT %(limit)s
),
claimed AS (
    -- include: claim_mark
)
SELECT * FROM claimed

-- name: claim_subscribed
-- The node's subscriptions (claim_params), as claim_due, claim_ruled and next_run_ruled filter
-- the pending rows.
(%(types)s::text[] IS NULL
    OR (destination IS NULL
        AND (type = ANY (%(types)s::text[]) OR type LIKE ANY (%(patterns)s::text[])))
    OR destination = ANY (%(destinations)s::text[])
    OR (destination = 'handler' AND type = ANY (%(handler_types)s::text[])))

-- name: rule_destination
-- Of the deliveries (rows with a destination), a destination's rule takes those to %(dest)s
-- alone; every other rule, and the claim of the rows no rule governs, leaves alone those to the
-- destinations with rules of their own (%(dest_excluded)s).
((%(dest)s::text IS NULL OR destination = %(dest)s::text)
    AND (destination IS NULL OR NOT destination = ANY (%(dest_excluded)s::text[])))

-- name: claim_mark
-- What a claim does to the rows of its CTE due (claim_due, claim_ruled).
UPDATE timers
SET status = 'running',
    attempts = timers.attempts + 1,
    lease_owner = %(node_id)s,
    lease_expires_at = %(lease_until)s,
    claimed_at = %(now)s,
    updated_at = %(now)s,
    claim_token = %(claim_token)s
FROM due
WHERE timers.ctid = due.ctid
-- Not what the claim just set, nor the namespace: the caller knows those
-- (rows.claimed_timer_rows). The payload comes as JSON text, decoded row by row by the caller
-- (rows.claimed_rows): one value Python cannot read must not fail the whole claim's fetch.
-- fired_at is not the claim's to set: it is the first attempt's true start, which the outcome
-- brings (NULL until one is known).
RETURNING timers.id, timers.key, timers.type, timers.payload::text AS payload, timers.subject,
    timers.correlation_id, timers.due_at, timers.run_at, timers.local, timers.timezone,
    timers.disambiguation, timers.expires_after, timers.attempts, timers.max_attempts,
    timers.registered_at, timers.fired_at, timers.completed_at, timers.last_error,
    timers.destination, timers.producer, timers.trace_context, timers.priority

-- name: claim_ruled
-- claim_due under flow control (duetime.model.limits): only the types LIKE %(only)s and none of
-- those LIKE one of %(excluded)s (more specific limits, pauses). A limit's claim runs with the
-- limit's row locked (lock_limit) and takes at most what the limit allows; the claim of the
-- types no rule governs passes '%%' and every governed pattern. Held-back rows stay pending, in
-- the index, and are stepped over.
-- Urgent rows first, as in claim_due.
WITH urgent AS (
    SELECT ctid FROM timers
    WHERE namespace = %(namespace)s
      AND priority > 0 AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
      AND
      -- include: rule_destination
      AND
      -- include: claim_subscribed
    ORDER BY priority DESC, run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
normal AS (
    SELECT ctid FROM timers
    WHERE namespace = %(namespace)s
      AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND priority = 0
      AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
      AND
      -- include: rule_destination
      AND
      -- include: claim_subscribed
    ORDER BY run_at
    LIMIT %(limit)s - (SELECT count(*) FROM urgent)
    FOR UPDATE SKIP LOCKED
),
due AS (
    -- (at most %(limit)s rows already: the LIMIT tells the planner so, for the update's join)
    SELECT ctid FROM urgent UNION ALL SELECT ctid FROM normal
    LIMIT %(limit)s
),
claimed AS (
    -- include: claim_mark
)
SELECT * FROM claimed

-- name: claim_partitioned
-- claim_ruled for a limit with partition_by: at most %(concurrency)s running per partition key
-- (the subject, or the payload field %(field)s), counting the running rows of each key through
-- the index of leased rows. The oldest %(scan)s due rows are the candidates, ranked within
-- their key after those running; the oldest that fit are locked and marked. (A backlog of one
-- key beyond the scan holds the others back until it shrinks: see docs/flow-control.md.)
WITH running AS (
    SELECT CASE WHEN %(field)s::text IS NULL THEN subject ELSE payload ->> %(field)s::text END
            AS part,
        count(*) AS n
    FROM timers
    WHERE lease_expires_at IS NOT NULL AND lease_expires_at >= '-infinity'
      AND namespace = %(namespace)s
      AND type LIKE %(only)s AND NOT type LIKE ANY (%(shadows)s::text[])
      AND
      -- include: rule_destination
    GROUP BY 1
),
candidates AS (
    SELECT ctid, run_at,
        CASE WHEN %(field)s::text IS NULL THEN subject ELSE payload ->> %(field)s::text END
            AS part
    FROM timers
    WHERE namespace = %(namespace)s
      AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
      AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
      AND
      -- include: rule_destination
      AND
      -- include: claim_subscribed
    ORDER BY run_at
    LIMIT %(scan)s
),
ranked AS (
    SELECT c.ctid, c.run_at,
        row_number() OVER (PARTITION BY c.part ORDER BY c.run_at) + coalesce(r.n, 0) AS place
    FROM candidates c LEFT JOIN running r ON r.part IS NOT DISTINCT FROM c.part
),
due AS (
    SELECT ctid FROM timers
    WHERE ctid = ANY (ARRAY(
            SELECT ctid FROM ranked WHERE place <= %(concurrency)s ORDER BY run_at
            LIMIT %(limit)s))
      AND status IN ('scheduled', 'retrying')
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    -- include: claim_mark
)
SELECT * FROM claimed

-- name: next_run_ruled
-- next_run_at under flow control: the types a claim_ruled with the same only/excluded takes.
SELECT run_at FROM timers
WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
  AND run_at <= 'infinity'
  AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
  AND
  -- include: rule_destination
  AND
  -- include: claim_subscribed
ORDER BY run_at
LIMIT 1

-- name: lock_limit
-- A limit's row, locked until its claim's transaction ends: claims of the types it governs run
-- one at a time on every node (other claims do not wait), and read the database's clock.
SELECT concurrency, rate_count, rate_period_us, burst, partition_by, tat,
    clock_timestamp() AS db_now
FROM flow_limits
WHERE namespace = %(namespace)s AND pattern = %(pattern)s
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)
FOR UPDATE

-- name: count_leased
-- Attempts running now of the types a limit governs, through the index of leased rows.
SELECT count(*) FROM timers
WHERE lease_expires_at IS NOT NULL AND lease_expires_at >= '-infinity'
  AND namespace = %(namespace)s
  AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
  AND
  -- include: rule_destination

-- name: spend_tokens
UPDATE flow_limits SET tat = %(tat)s WHERE namespace = %(namespace)s AND pattern = %(pattern)s

-- name: held_by_rule
-- What a rule holds back now: due rows of its types (limits ls).
SELECT count(*) AS held, min(run_at) AS oldest FROM timers
WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
  AND run_at <= %(now)s
  AND type LIKE %(only)s AND NOT type LIKE ANY (%(excluded)s::text[])
  AND
  -- include: rule_destination

-- name: list_limits
SELECT * FROM flow_limits WHERE namespace = %(namespace)s ORDER BY pattern

-- name: limit_room
-- Whether the pattern has a row already, and how many rules of types the namespace holds (a
-- new one must stay within the cap; a destination's rate is configuration, not counted). Read
-- after lock_namespace_row, in the same transaction.
SELECT EXISTS (SELECT 1 FROM flow_limits
               WHERE namespace = %(namespace)s AND pattern = %(pattern)s) AS present,
    (SELECT count(*) FROM flow_limits
     WHERE namespace = %(namespace)s AND destination IS NULL) AS rules

-- name: count_by_type
-- What every rule of a namespace holds (limits ls), in one statement whatever the number of
-- rules: attempts running (through the index of leased rows) and due rows waiting, per type
-- and destination (the rules are matched to the types in Python, duetime.model.limits.tally).
SELECT type, destination, sum(running)::bigint AS running, sum(held)::bigint AS held,
    min(oldest) AS oldest
FROM (
    SELECT type, destination, count(*) AS running, 0 AS held, NULL::timestamptz AS oldest
    FROM timers
    WHERE lease_expires_at IS NOT NULL AND lease_expires_at >= '-infinity'
      AND namespace = %(namespace)s
    GROUP BY type, destination
    UNION ALL
    SELECT type, destination, 0, count(*), min(run_at) FROM timers
    WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
      AND run_at <= %(now)s
    GROUP BY type, destination
) counted
GROUP BY type, destination

-- name: put_limit
-- A limit replaces the pattern's previous one; a pause and the rate's state stay.
INSERT INTO flow_limits (namespace, pattern, concurrency, rate_count, rate_period_us, burst,
    partition_by, destination, updated_at)
VALUES (%(namespace)s, %(pattern)s, %(concurrency)s, %(rate_count)s, %(rate_period_us)s,
    %(burst)s, %(partition_by)s, %(destination)s, %(now)s)
ON CONFLICT (namespace, pattern) DO UPDATE
SET concurrency = excluded.concurrency, rate_count = excluded.rate_count,
    rate_period_us = excluded.rate_period_us, burst = excluded.burst,
    partition_by = excluded.partition_by, destination = excluded.destination,
    updated_at = excluded.updated_at
RETURNING *

-- name: remove_limit
UPDATE flow_limits
SET concurrency = NULL, rate_count = NULL, rate_period_us = NULL, burst = NULL,
    partition_by = NULL, tat = NULL, updated_at = %(now)s
WHERE namespace = %(namespace)s AND pattern = %(pattern)s
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)
RETURNING *

-- name: set_paused
INSERT INTO flow_limits (namespace, pattern, paused, updated_at)
VALUES (%(namespace)s, %(pattern)s, %(paused)s, %(now)s)
ON CONFLICT (namespace, pattern) DO UPDATE
SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING *

-- name: prune_limits
-- A row that neither limits nor pauses anything any more goes.
DELETE FROM flow_limits
WHERE namespace = %(namespace)s AND pattern = %(pattern)s
  AND NOT paused AND concurrency IS NULL AND rate_count IS NULL

-- name: finish_by_lookup
-- Sent before finish and fan_out, in their transaction: each outcome reaches its timer by one
-- primary-key probe; without this, a custom plan for a large batch may hash or scan the whole
-- table instead (the cost model prices a probe as a random disk read, and before an ANALYZE it
-- knows nothing of the table). The generic plan is used, as in claim_in_order.
SELECT set_config('enable_hashjoin', 'off', true) AS hashjoin,
       set_config('enable_mergejoin', 'off', true) AS mergejoin,
       set_config('enable_seqscan', 'off', true) AS seqscan,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS generic

-- name: finish
-- The owner's outcomes, fenced by (id, attempt, owner, running): rows that are no longer the
-- owner's are left alone and come back missing from the result (lost). Each ended attempt's
-- row is written (see claim_due); one released unstarted leaves none, and neither does a first
-- attempt that completes its timer (nearly every attempt): done_by names its node, and with
-- claimed_at (its claim's instant), fired_at (its start, which this outcome writes) and
-- completed_at it is the attempt's row,
-- which list_attempts, list_deliveries and archive_timers read from there (migration 0011).
-- (Arrays go in binary, as in insert_timer.)
-- Each outcome reaches its row by one primary-key probe (the update's nested loop over the
-- batch: see finish_by_lookup), and the fence is the update's own condition, which PostgreSQL
-- checks again on the newest version when it had to wait for the row (a heartbeat committed
-- meanwhile): no separate lock of each row first, which cost a WAL record an outcome. The
-- planner is never asked to join the batch with "this node's running rows", whose estimate
-- after an ANALYZE of a quiet table is one row and which it would then read once per outcome
-- (batch × running). The attempt's claim instant is the row's updated_at as this statement's
-- snapshot sees it (the LATERAL, a read): nothing but the claim sets it while the timer runs;
-- its start is the one the worker reports (NULL: not known). (Not by
-- ctid: a heartbeat committed while the lock was awaited leaves a version this statement's
-- snapshot cannot see, and the outcome would be lost.)
WITH f AS (
    -- outcomes, errors and run_ats may come empty (rows.FinishBatch): unnest pads them with
    -- NULLs, and a NULL outcome is done.
    SELECT timer_id, attempt, coalesce(outcome, 'done') AS outcome, error, run_at, traceback,
        claim_token, started_at AS began_at
    FROM unnest(
        %(timer_ids)b::bigint[], %(attempts)b::integer[], %(outcomes)b::text[],
        %(errors)b::text[], %(run_ats)b::timestamptz[], %(tracebacks)b::text[],
        %(claim_tokens)b::bigint[], %(started_ats)b::timestamptz[]
    ) AS f (
        timer_id, attempt, outcome, error, run_at, traceback, claim_token, started_at
    )
),
mine AS (
    -- claimed_at: the claim's instant (the row's updated_at while it runs); started_at: when
    -- the handler began, as the worker reported it (NULL when not given: not known).
    SELECT f.*, t.claimed_at, f.began_at AS started_at
    FROM f CROSS JOIN LATERAL (
        SELECT updated_at AS claimed_at FROM timers WHERE id = f.timer_id
    ) AS t
),
finished AS (
    UPDATE timers
    SET status = CASE f.outcome
            WHEN 'retry' THEN 'retrying'
            WHEN 'snoozed' THEN 'scheduled'
            WHEN 'released' THEN
                CASE WHEN timers.attempts > 1 THEN 'retrying' ELSE 'scheduled' END
            ELSE f.outcome
        END,
        run_at = CASE WHEN f.outcome IN ('retry', 'snoozed') THEN f.run_at ELSE timers.run_at END,
        last_error = CASE
            WHEN f.outcome = 'done' THEN NULL
            WHEN f.outcome IN ('snoozed', 'released') THEN timers.last_error
            ELSE f.error
        END,
        completed_at = CASE
            WHEN f.outcome IN ('done', 'dead', 'cancelled', 'expired') THEN %(now)s
            ELSE timers.completed_at
        END,
        max_attempts = timers.max_attempts + CASE WHEN f.outcome = 'snoozed' THEN 1 ELSE 0 END,
        attempts = timers.attempts - CASE WHEN f.outcome = 'released' THEN 1 ELSE 0 END,
        -- the first start known (a released attempt never started): the timer's firing
        fired_at = CASE
            WHEN f.outcome = 'released' AND timers.attempts <= 1 THEN NULL
            WHEN f.outcome = 'released' THEN timers.fired_at
            ELSE coalesce(timers.fired_at, f.started_at)
        END,
        updated_at = %(now)s,
        lease_owner = NULL,
        lease_expires_at = NULL,
        done_by = CASE
            -- its start becomes fired_at and its claim's instant stays in claimed_at
            WHEN f.outcome = 'done' AND f.attempt = 1 AND timers.fired_at IS NULL
                AND timers.claimed_at = f.claimed_at
                -- an earlier version opened the attempt's row at the claim: close that one
                AND NOT EXISTS (SELECT FROM attempts WHERE timer_id = f.timer_id AND number = 1)
                THEN %(node_id)s::text
        END
    FROM mine AS f
    WHERE timers.id = f.timer_id AND timers.attempts = f.attempt
      AND timers.lease_owner = %(node_id)s AND timers.status = 'running'
      AND (f.claim_token IS NULL OR timers.claim_token = f.claim_token)
    RETURNING timers.id, f.attempt, f.outcome, f.error, f.claimed_at, f.started_at,
        timers.done_by, f.traceback
),
ended AS (
    INSERT INTO attempts (
        timer_id, number, node_id, claimed_at, started_at, finished_at, outcome, error, traceback
    )
    SELECT id, attempt, %(node_id)s, claimed_at, started_at, %(now)s, outcome, error, traceback
    FROM finished
    WHERE outcome <> 'released' AND done_by IS NULL
    ON CONFLICT (timer_id, number) DO UPDATE SET
        node_id = excluded.node_id, claimed_at = excluded.claimed_at,
        started_at = excluded.started_at,
        finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error,
        traceback = excluded.traceback
)
-- One row: NULL when every outcome applied (the common case, nothing to decode), else the ids
-- of those that did (the rest were fenced out: lost).
SELECT CASE WHEN count(*) = cardinality(%(timer_ids)b::bigint[]) THEN NULL
            ELSE coalesce(array_agg(id), '{}') END AS applied
FROM finished

-- name: give_back_claim
-- The rows of a claim (by its token) that could not be read after it committed, back as they
-- were before it: pending, the attempt not counted.
UPDATE timers
SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'scheduled' END,
    attempts = attempts - 1,
    lease_owner = NULL, lease_expires_at = NULL, claim_token = NULL, updated_at = %(now)s
WHERE lease_owner = %(node_id)s AND claim_token = %(claim_token)s AND status = 'running'
RETURNING id

-- name: rescue
-- Leases that ran out: the attempt is lost; the timer retries, or is dead when out of
-- attempts. Rows another node is rescuing (or finishing) right now are skipped, not waited on.
-- The lost attempt's start was never reported: it has none (its claim's instant is kept).
WITH expired AS (
    SELECT id, lease_owner, updated_at AS claimed_at FROM timers
    WHERE status = 'running' AND lease_expires_at < %(now)s
    ORDER BY id
    FOR UPDATE SKIP LOCKED
),
rescued AS (
    UPDATE timers
    SET status = CASE WHEN timers.attempts >= timers.max_attempts THEN 'dead' ELSE 'retrying' END,
        completed_at = CASE WHEN timers.attempts >= timers.max_attempts THEN %(now)s END,
        run_at = %(now)s,
        last_error = 'lease expired: node ' || timers.lease_owner || ' stopped renewing it',
        updated_at = %(now)s,
        lease_owner = NULL,
        lease_expires_at = NULL
    FROM expired
    WHERE timers.id = expired.id
    RETURNING timers.id, timers.attempts, timers.last_error, expired.lease_owner,
        expired.claimed_at
),
ended AS (
    INSERT INTO attempts (
        timer_id, number, node_id, claimed_at, started_at, finished_at, outcome, error
    )
    SELECT id, attempts, lease_owner, claimed_at, NULL, %(now)s, 'lost', last_error
    FROM rescued
    ON CONFLICT (timer_id, number) DO UPDATE SET
        node_id = excluded.node_id, claimed_at = excluded.claimed_at,
        started_at = excluded.started_at,
        finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
)
SELECT id FROM rescued ORDER BY id

-- name: expire_leases_of
UPDATE timers SET lease_expires_at = %(now)s
WHERE lease_owner = %(node_id)s AND status = 'running' AND lease_expires_at > %(now)s

-- name: register_node
INSERT INTO nodes (
    id, host, pid, role, started_at, heartbeat_at, in_flight, subscriptions, clock_offset_ms
)
VALUES (
    %(id)s, %(host)s, %(pid)s, %(role)s, %(started_at)s, %(heartbeat_at)s, %(in_flight)s,
    %(subscriptions)s, %(clock_offset_ms)s
)
ON CONFLICT (id) DO UPDATE SET
    heartbeat_at = excluded.heartbeat_at, subscriptions = excluded.subscriptions,
    clock_offset_ms = excluded.clock_offset_ms

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = %(now)s, in_flight = %(in_flight)s,
    clock_offset_ms = coalesce(%(clock_offset_ms)s, clock_offset_ms)
WHERE id = %(node_id)s

-- name: extend_leases
-- Locks the node's rows in id order, as finish does, so the two never deadlock. Rows locked by
-- a transactional handler still running are skipped: rescue skips them too, so they stay ours.
-- Each row is renewed only under the claim the node holds it by (its token, NULL: any): a
-- heartbeat of a claim the database forgot never keeps alive the claim that replaced it.
UPDATE timers SET lease_expires_at = %(lease_until)s
FROM (
    SELECT id FROM timers
    WHERE lease_owner = %(node_id)s AND status = 'running' AND id = ANY(%(held)s::bigint[])
      AND EXISTS (
          SELECT FROM unnest(%(held)s::bigint[], %(tokens)s::bigint[]) AS h (id, claim_token)
          WHERE h.id = timers.id
            AND (h.claim_token IS NULL OR h.claim_token = timers.claim_token)
      )
    ORDER BY id
    FOR UPDATE SKIP LOCKED
) AS mine
WHERE timers.id = mine.id AND timers.status = 'running'

-- name: deregister_node
DELETE FROM nodes WHERE id = %(node_id)s

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at

-- name: lock_attempt
-- A transactional handler's fence: the row stays locked until its transaction ends, so neither
-- rescue nor another node can take the attempt while the handler's writes are in flight.
-- Heartbeats skip locked rows, so the lease left now (ms) is all the time the transaction has.
SELECT id,
       coalesce(ceil(1000 * extract(epoch FROM lease_expires_at - clock_timestamp())), 0)::bigint
           AS lease_left_ms
FROM timers
WHERE id = %(timer_id)s AND attempts = %(attempt)s AND lease_owner = %(node_id)s
  AND status = 'running'
  AND (%(claim_token)s::bigint IS NULL OR claim_token = %(claim_token)s::bigint)
FOR UPDATE

-- name: limit_transaction
-- The server ends a transaction that sits idle, or runs one statement, longer than this (SET
-- LOCAL: until it ends). Ending it releases the row lock, so rescue can take the attempt.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true) AS idle,
       set_config('statement_timeout', %(ms)s, true) AS statement

-- name: current_search_path
SELECT current_setting('search_path') AS search_path

-- name: set_search_path
SELECT set_config('search_path', %(search_path)s, true) AS search_path

-- name: outbox_enter
-- The outbox's first statement in a caller's transaction: the caller's own search_path (put
-- back after), and whether the transaction may write at all (SET TRANSACTION READ ONLY,
-- default_transaction_read_only, a standby's).
SELECT current_setting('search_path') AS search_path,
       current_setting('transaction_read_only') = 'on' AS read_only

-- name: reach
-- Where a connection leads: its database, and duetime's table of timers there (by oid, so a
-- schema of the same name in another database, or restored from a dump, is told apart); with
-- whether its role may read the server's identity, use the schema and write the timers. Read
-- from the catalogs, which every role may read (to_regclass fails on a schema it may not use).
WITH timers AS (
    SELECT n.oid AS schema_oid, c.oid AS timers_oid
    FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'timers'
    WHERE n.nspname = %(schema)s::text
)
SELECT current_database() AS database,
       (SELECT oid FROM pg_database WHERE datname = current_database()) AS database_oid,
       current_setting('port') AS port,
       (SELECT timers_oid FROM timers) AS timers_oid,
       has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AS sees_server,
       coalesce((SELECT has_schema_privilege(schema_oid, 'USAGE') FROM timers), false)
           AS uses_schema,
       coalesce((SELECT has_table_privilege(timers_oid, 'INSERT, UPDATE') FROM timers), false)
           AS writes_timers

-- name: server_identity
-- The cluster's identifier, made by initdb: two servers never share it (a standby does).
SELECT system_identifier::text AS system_identifier FROM pg_control_system()

-- name: fan_out
-- Owners hand claimed events on: each event still theirs (fenced, and reached, as in finish) is
-- marked done, its attempt written as fanned_out with a note, and one delivery row per
-- destination inserted with the event's content, due when the event was; a key that exists
-- already is kept as it is (the keys are taken in timer_keys first, as in insert_timer).
-- The attempt started when the fan-out began (%(now)s), and so did the event's firing when no
-- attempt before had a known start.
WITH f AS (
    SELECT * FROM unnest(
        %(timer_ids)s::bigint[], %(attempts)s::integer[], %(notes)s::text[],
        %(claim_tokens)s::bigint[]
    ) AS f (timer_id, attempt, note, claim_token)
),
mine AS (
    SELECT f.*, t.claimed_at, %(now)s::timestamptz AS started_at
    FROM f CROSS JOIN LATERAL (
        SELECT updated_at AS claimed_at FROM timers WHERE id = f.timer_id
    ) AS t
),
roots AS (
    UPDATE timers
    SET status = 'done', completed_at = %(now)s, updated_at = %(now)s, last_error = NULL,
        lease_owner = NULL, lease_expires_at = NULL,
        fired_at = coalesce(timers.fired_at, %(now)s)
    FROM mine
    WHERE timers.id = mine.timer_id AND timers.attempts = mine.attempt
      AND timers.lease_owner = %(node_id)s AND timers.status = 'running'
      AND (mine.claim_token IS NULL OR timers.claim_token = mine.claim_token)
    RETURNING timers.*, mine.note, mine.claimed_at AS claim_instant, mine.started_at
),
ended AS (
    INSERT INTO attempts (
        timer_id, number, node_id, claimed_at, started_at, finished_at, outcome, error
    )
    SELECT id, attempts, %(node_id)s, claim_instant, started_at, %(now)s, 'fanned_out', note
    FROM roots
    ON CONFLICT (timer_id, number) DO UPDATE SET
        node_id = excluded.node_id, claimed_at = excluded.claimed_at,
        started_at = excluded.started_at,
        finished_at = excluded.finished_at, outcome = excluded.outcome, error = excluded.error
),
d AS (
    SELECT * FROM unnest(%(root_ids)s::bigint[], %(keys)s::text[], %(destinations)s::text[])
        WITH ORDINALITY AS d (timer_id, key, destination, n)
),
keyed AS (
    INSERT INTO timer_keys (namespace, key, timer_id)
    SELECT roots.namespace, d.key, nextval('timers_id_seq')
    FROM d JOIN roots ON roots.id = d.timer_id
    ORDER BY d.n
    ON CONFLICT (namespace, key) DO NOTHING
    RETURNING namespace, key, timer_id
),
created AS (
    INSERT INTO timers (
        id, namespace, key, type, payload, subject, correlation_id, due_at, run_at,
        expires_after, status, max_attempts, registered_at, updated_at, destination, producer,
        trace_context, priority
    ) OVERRIDING SYSTEM VALUE
    SELECT keyed.timer_id, roots.namespace, d.key, roots.type, roots.payload, roots.subject,
        roots.correlation_id, roots.due_at, roots.run_at, roots.expires_after, 'scheduled',
        roots.max_attempts, roots.registered_at, %(now)s, d.destination, roots.producer,
        roots.trace_context, roots.priority
    FROM d
    JOIN roots ON roots.id = d.timer_id
    JOIN keyed ON keyed.namespace = roots.namespace AND keyed.key = d.key
    ORDER BY d.n
)
SELECT id, run_at FROM roots

-- name: sweep_unsubscribed
-- Of the oldest pending rows overdue by the grace (at most %(limit)s, so a backlog never makes
-- it a long scan: rows no one takes stay at the old end of the index, where the next sweep
-- finds them), those no live node's subscriptions take (the claim_due filter is not true) are
-- dead, with the reason. Rows another node is claiming right now are skipped.
WITH oldest AS (
    SELECT id, type, destination FROM timers
    WHERE namespace = %(namespace)s
      AND status IN ('scheduled', 'retrying')
      AND run_at < %(before)s
    ORDER BY run_at
    LIMIT %(limit)s
),
stranded AS (
    SELECT id FROM timers
    WHERE id IN (
        SELECT id FROM oldest
        WHERE (%(types)s::text[] IS NULL
            OR (destination IS NULL
                AND (type = ANY (%(types)s::text[]) OR type LIKE ANY (%(patterns)s::text[])))
            OR destination = ANY (%(destinations)s::text[])
            OR (destination = 'handler' AND type = ANY (%(handler_types)s::text[]))
        ) IS NOT TRUE
    )
      AND status IN ('scheduled', 'retrying')
    FOR UPDATE SKIP LOCKED
)
UPDATE timers
SET status = 'dead', completed_at = %(now)s, updated_at = %(now)s,
    last_error = CASE WHEN timers.destination IS NULL
        THEN 'no subscriber for type ' || timers.type
        ELSE 'no node serves destination ' || timers.destination || ' (type ' || timers.type || ')'
    END
FROM stranded
WHERE timers.id = stranded.id
RETURNING timers.id

-- name: unsubscribed_types
-- The pending rows no live node's subscriptions take (the claim_due filter is not true), by
-- type, most first: what waits for a subscriber, as the overview shows it.
SELECT type, count(*) AS count FROM timers
WHERE namespace = %(namespace)s AND status IN ('scheduled', 'retrying')
  AND
  -- include: claim_subscribed
  IS NOT TRUE
GROUP BY type
ORDER BY count DESC, type
LIMIT %(limit)s

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

-- name: walk_in_index_order
-- For the rest of the transaction: the batch statements and the event log walk timers_events
-- (a bulk action's batch, timers_listing or timers_dead) in its order and stop at their LIMIT. Without statistics, or with skewed ones, the planner
-- prefers a bitmap scan of the namespace's whole range and a sort — done again for every batch
-- or page, so a backlog of n rows would cost n²; here it is not offered those.
SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)

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

-- name: change_marker
-- The next transaction id of the cluster: it moves whenever any transaction writes, here or in
-- another database of the same server, so it is a "maybe changed" signal, read in no time.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS marker

-- name: limit_statements
-- A REST request's statements end after its statement_timeout (duetime.budgets); LOCAL: the
-- setting ends with the transaction, so the pooled connection goes back as it was.
SELECT set_config('statement_timeout', %(timeout)s, true)
