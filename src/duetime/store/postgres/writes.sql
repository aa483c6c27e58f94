-- Writing timers in the PostgreSQL store (writes.py, write_pipeline.py). Each block's name is the
-- method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

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
    trace_context, priority
) OVERRIDING SYSTEM VALUE
SELECT id, namespace, key, type, payload::jsonb, subject, correlation_id, due_at, due_at, local,
       timezone, disambiguation, expires_after, 'scheduled', max_attempts, %(now)s, %(now)s,
       producer, trace_context, priority
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
