-- Writing timers in the PostgreSQL store (writes.py, write_pipeline.py). Each block's name is the
-- method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: timer_batch
-- The rows of a scheduling batch, in input order (n), from one array per column (sent in binary:
-- psycopg's text format for arrays costs ~10x more client CPU). A column other than key, payload
-- and due time comes as one value when it is the same for the whole batch, or empty when it is
-- NULL throughout (migration 0013, rows.timer_batch_params). run_offset is the hashed offset into
-- a timer's run window (migration 0033), NULL without one: run_at is due_at plus it. Included by
-- insert_timer, insert_fresh_timers and upsert_timer.
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
    batch_column(%(priorities)b::smallint[], %(rows)s::integer),
    %(run_offsets)b::interval[], %(run_windows)b::interval[], %(spreads)b::text[]
) WITH ORDINALITY AS new (
    namespace, key, type, payload, subject, correlation_id, due_at, local, timezone,
    disambiguation, expires_after, max_attempts, producer, trace_context, priority, run_offset,
    run_window, spread, n
)

-- name: written_columns
-- What insert_timer and upsert_timer return for each row they write
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
    trace_context, priority, run_window, spread
) OVERRIDING SYSTEM VALUE
SELECT keyed.timer_id, new.namespace, new.key, type, payload::jsonb, subject, correlation_id,
       due_at, due_at + coalesce(run_offset, interval '0'), local, timezone, disambiguation,
       expires_after, 'scheduled', max_attempts, %(now)s, %(now)s, producer, trace_context,
       priority, run_window, spread
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
-- timer_keys refuses the batch. It returns each row's id and key only (rows.FRESH_COLUMNS):
-- every other column of a new row is known before (rows.fresh_timer_rows).
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
    trace_context, priority, run_window, spread
) OVERRIDING SYSTEM VALUE
SELECT id, namespace, key, type, payload::jsonb, subject, correlation_id, due_at,
       due_at + coalesce(run_offset, interval '0'), local, timezone, disambiguation,
       expires_after, 'scheduled', max_attempts, %(now)s, %(now)s, producer, trace_context,
       priority, run_window, spread
FROM new
ORDER BY n
RETURNING id, key

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
-- those requests again in a new statement, which sees it. An evenly spread timer's run_at is
-- its group's (spreads.sql), not compared: the same request again is kept. (Written compactly:
-- psycopg caches only statements up to 4 KiB, tests/unit/test_queries.py.)
WITH new AS (
    SELECT *, due_at + coalesce(run_offset, '0') AS run_at FROM
    -- include: timer_batch
),
keyed AS (
    INSERT INTO timer_keys AS k (namespace, key, timer_id)
    SELECT namespace, key, nextval('timers_id_seq') FROM new ORDER BY n
    ON CONFLICT (namespace, key) DO UPDATE SET timer_id = k.timer_id
    RETURNING namespace, key, timer_id, xmax = 0 AS made
),
created AS (
    INSERT INTO timers (
        id, namespace, key, type, payload, subject, correlation_id, due_at, run_at, local,
        timezone, disambiguation, expires_after, status, max_attempts, registered_at,
        updated_at, producer, trace_context, priority, run_window, spread
    ) OVERRIDING SYSTEM VALUE
    SELECT timer_id, namespace, key, type, payload::jsonb, subject, correlation_id, due_at,
    run_at, local, timezone, disambiguation, expires_after, 'scheduled', max_attempts,
    %(now)s, %(now)s, producer, trace_context, priority, run_window, spread
    FROM new JOIN keyed USING (namespace, key)
    WHERE made
    ORDER BY n
    RETURNING
        -- include: written_columns
),
updated AS (
    UPDATE timers AS t
    SET (type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, max_attempts, updated_at, producer, trace_context,
    priority, run_window, spread, version)
    = (new.type, new.payload::jsonb, new.subject, new.correlation_id, new.due_at, new.run_at,
    new.local, new.timezone, new.disambiguation, new.expires_after, new.max_attempts,
    %(now)s, new.producer, new.trace_context, new.priority, new.run_window, new.spread,
    t.version + 1)
    FROM new JOIN keyed USING (namespace, key)
    WHERE NOT made AND t.id = timer_id AND t.status IN ('scheduled', 'retrying')
    AND (t.type, t.payload, t.subject, t.correlation_id, t.due_at, t.run_at, t.local,
    t.timezone, t.disambiguation, t.expires_after, t.max_attempts, t.producer,
    t.priority, t.run_window, t.spread)
    IS DISTINCT FROM (new.type, new.payload::jsonb, new.subject, new.correlation_id,
    new.due_at, CASE WHEN new.spread = 'even' AND t.spread = 'even' THEN t.run_at
    ELSE new.run_at END, new.local, new.timezone, new.disambiguation, new.expires_after,
    new.max_attempts, new.producer, new.priority, new.run_window, new.spread)
    RETURNING t.*
)
SELECT *, false AS unseen FROM created
UNION ALL
SELECT
    -- include: written_columns
    , false
FROM updated
UNION ALL
SELECT timer_id, namespace, key, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
NULL, NULL, true
FROM keyed
WHERE NOT made AND NOT EXISTS (SELECT FROM timers WHERE id = timer_id)

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
