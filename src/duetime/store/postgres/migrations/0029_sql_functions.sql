-- Scheduling from SQL: schedule, emit, cancel and schedule_many as functions of the schema, so a
-- trigger, a psql session or a service in any language stores timers in its own transaction.
--
-- Each function checks what the Python path checks (the same limits, each error naming its
-- field), writes the rows the Python path writes (timer_keys first, then timers, under the same
-- sequence), and wakes workers with the same NOTIFY (channel duetime_<schema>, payload the
-- earliest due instant in epoch microseconds, or '' for "re-read"), sent only if the caller
-- commits. What PostgreSQL cannot decide as duetime does is left to duetime: a local wall time
-- is stored with its zone and a held run_at (9999-01-01, outside every instant a timer may be
-- due at), which no claim reaches, until a worker resolves it with its own tz data (or ends it
-- dead, saying why). A timer is never early for a zone PostgreSQL knows differently.
--
-- Errors: SQLSTATE 22023 (invalid_parameter_value), 22004 (null_value_not_allowed), 22001
-- (string_data_right_truncation: too long, too large), 22007 (invalid_datetime_format), 23505
-- (unique_violation: on_conflict 'error' and the key exists), 42501 (insufficient_privilege: a
-- namespace the role was not granted), P0002 (no_data_found: cancel of an unknown key), 55000
-- (object_not_in_prerequisite_state: cancel of a timer that is no longer pending). The message
-- starts with the field ("key: ..."), the DETAIL is "field: <name>", and the error's column
-- name is the field.
--
-- The helpers (sql_*) run only inside the public functions, whose pinned search_path they use:
-- a SET clause of their own made every call switch the path and back, a third of a call's cost.
--
-- Permissions: the public functions run as the schema's owner (SECURITY DEFINER), so a role
-- needs EXECUTE on them and USAGE on the schema, and no right on any table. Which namespaces a
-- role may write is sql_grants; the schema owner's members (and superusers) may write any.
-- The caller is session_user: the role that logged in.

-- The held timers, for the materialiser to find without walking every pending local-form
-- timer (an index of the rows held now only: none once they are resolved).
CREATE INDEX timers_held ON timers (id) WHERE run_at = '9999-01-01 00:00:00+00';

CREATE TABLE sql_grants (
    role name NOT NULL,
    namespace text NOT NULL,
    granted_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (role, namespace)
);

COMMENT ON TABLE sql_grants IS
    'the namespaces each database role may use through the SQL functions (duetime sql grant)';

-- An error naming its field, at the start of the message, in the DETAIL and as the column.
CREATE FUNCTION sql_refuse(field text, message text, code text DEFAULT '22023') RETURNS void
LANGUAGE plpgsql
AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = field || ': ' || message,
        DETAIL = 'field: ' || field, COLUMN = field,
        HINT = 'duetime''s SQL functions take the fields of schedule() in Python; see docs/sql.md';
END
$$;

-- The caller may use the namespace (granted, or a member of the schema's owner), and it exists.
CREATE FUNCTION sql_allow(ns text, field text DEFAULT 'namespace') RETURNS void
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF ns IS NULL THEN
        PERFORM sql_refuse(field, 'a namespace is required', '22004');
    END IF;
    IF NOT pg_has_role(session_user,
            (SELECT nspowner FROM pg_namespace WHERE nspname = current_schema()), 'USAGE')
       AND NOT EXISTS (
            SELECT 1 FROM sql_grants g JOIN pg_roles r ON r.rolname = g.role
            WHERE g.namespace = ns AND pg_has_role(session_user, r.oid, 'USAGE')) THEN
        PERFORM sql_refuse(field, format('role %I may not use namespace %L (see duetime sql grant)',
            session_user, ns), '42501');
    END IF;
    IF NOT EXISTS (SELECT 1 FROM namespaces WHERE name = ns) THEN
        PERFORM sql_refuse(field, format('%L does not exist: create it first', ns));
    END IF;
END
$$;

-- A name a caller gives (key, subject, correlation id): not blank, not too long, and no control
-- characters (C0 with tab, DEL, C1, U+2028, U+2029), as duetime.validation.check_identifier_text.
CREATE FUNCTION sql_identifier(field text, value text, most integer) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    IF value ~ '^\s*$' THEN
        PERFORM sql_refuse(field, 'must not be empty');
    END IF;
    IF char_length(value) > most THEN
        PERFORM sql_refuse(field,
            format('is %s characters; at most %s', char_length(value), most), '22001');
    END IF;
    IF value ~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]' THEN
        PERFORM sql_refuse(field, 'must not contain control characters');
    END IF;
    RETURN value;
END
$$;

-- How deep arrays and objects nest in a JSON value (0 for a scalar).
CREATE FUNCTION sql_json_depth(value jsonb) RETURNS integer
LANGUAGE sql IMMUTABLE
AS $$
    WITH RECURSIVE walk (v, d) AS (
        SELECT value, 1 WHERE jsonb_typeof(value) IN ('object', 'array')
        UNION ALL
        SELECT child.v, walk.d + 1 FROM walk CROSS JOIN LATERAL (
            SELECT e.value FROM jsonb_each(
                CASE WHEN jsonb_typeof(walk.v) = 'object' THEN walk.v END) AS e
            UNION ALL
            SELECT a FROM jsonb_array_elements(
                CASE WHEN jsonb_typeof(walk.v) = 'array' THEN walk.v END) AS a
        ) AS child (v)
        WHERE jsonb_typeof(child.v) IN ('object', 'array')
    )
    SELECT coalesce(max(d), 0) FROM walk
$$;

-- A payload within the limits of duetime.validation.encode_payload: at most max_payload_bytes
-- (meta 'sql.max_payload_bytes', by default 262144) of jsonb's text, nested at most 64 deep, no
-- integer of more than 4300 digits. (jsonb's text puts a space after each ':' and ',', so it
-- is a little longer than the compact text Python measures: never a payload over the limit.)
CREATE FUNCTION sql_payload(field text, payload jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    text_ text := coalesce(payload, 'null'::jsonb)::text;
    most integer := coalesce(
        (SELECT value::integer FROM meta WHERE key = 'sql.max_payload_bytes'), 262144);
BEGIN
    IF octet_length(text_) > most THEN
        PERFORM sql_refuse(field,
            format('is %s bytes as JSON; the limit is %s', octet_length(text_), most), '22001');
    END IF;
    IF length(text_) - length(translate(text_, '[{', '')) > 64
       AND sql_json_depth(payload) > 64 THEN
        PERFORM sql_refuse(field, 'nests arrays and objects deeper than 64 levels');
    END IF;
    IF length(text_) > 4300 AND EXISTS (
        SELECT 1 FROM jsonb_path_query(payload, 'strict $.**') AS n (v)
        WHERE jsonb_typeof(v) = 'number' AND v::text ~ '^-?[0-9]+$'
          AND length(ltrim(v::text, '-')) > 4300) THEN
        PERFORM sql_refuse(field, 'holds an integer of more than 4300 digits, which a worker '
            'cannot read back (Python''s limit on integer text)');
    END IF;
    RETURN coalesce(payload, 'null'::jsonb);
END
$$;

-- An instant as "at" takes it: a timestamptz, or ISO 8601 text with an offset or Z. A naive
-- timestamp, or text without an offset, is refused: which zone was meant is not known.
CREATE FUNCTION sql_instant(field text, value anycompatible) RETURNS timestamptz
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    kind regtype := pg_typeof(value);
    given text;
    instant timestamptz;
BEGIN
    IF value IS NULL THEN
        RETURN NULL;
    END IF;
    IF kind = 'timestamp with time zone'::regtype THEN
        instant := value;
    ELSIF kind = 'timestamp without time zone'::regtype THEN
        PERFORM sql_refuse(field, format('%s has no UTC offset; give a timestamptz, or local '
            'with timezone', value), '22007');
    ELSIF kind IN ('text'::regtype, 'character varying'::regtype, 'unknown'::regtype) THEN
        given := btrim(value::text);
        IF given !~* '^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?' THEN
            PERFORM sql_refuse(field, format('%L is not an ISO 8601 timestamp such as '
                '''2025-03-15T13:00:00Z''', left(given, 50)), '22007');
        END IF;
        IF given !~* '(Z|[+-]\d{2}(:?\d{2})?)$' THEN
            PERFORM sql_refuse(field, format('%s has no UTC offset; add one or use local with '
                'timezone', left(given, 50)), '22007');
        END IF;
        BEGIN
            instant := given::timestamptz;
        EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
            PERFORM sql_refuse(field, format('%L does not exist', left(given, 50)), '22007');
        END;
    ELSE
        PERFORM sql_refuse(field, format('must be a timestamptz or ISO 8601 text, not %s', kind));
    END IF;
    IF NOT instant >= '1970-01-01 00:00:00+00' OR NOT instant < '9000-01-01 00:00:00+00' THEN
        PERFORM sql_refuse(field, format('%s is out of range (1970..8999 UTC)', instant));
    END IF;
    RETURN instant;
END
$$;

-- The time part of a drawn key (the milliseconds of ``at``, 12 hex digits).
CREATE FUNCTION sql_key_prefix(at timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$
    SELECT lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint & 281474976710655), 12, '0')
$$;

-- A key for a caller who gave none, laid out as duetime.validation.generate_key makes them:
-- 12 hex digits of the time in milliseconds, then 20 random hex digits (80 bits of one
-- gen_random_uuid, whose version and variant bits are left out).
CREATE FUNCTION sql_new_key() RETURNS text
LANGUAGE sql VOLATILE
AS $$
    SELECT sql_key_prefix(clock_timestamp())
        || encode(substr(u, 1, 6), 'hex') || encode(substr(u, 11, 4), 'hex')
    FROM (SELECT uuid_send(gen_random_uuid()) AS u) AS drawn
$$;

-- The keys of a batch, drawn at once: the time part, then 20 hex digits of md5(seed, n) for a
-- seed drawn once a batch from gen_random_uuid (the strong source, once, where once a key cost
-- more than writing the timer); distinct for distinct n, and as unpredictable as the seed.
CREATE FUNCTION sql_batch_key(prefix text, seed text, n bigint) RETURNS text
LANGUAGE sql IMMUTABLE
AS $$ SELECT prefix || left(md5(seed || ':' || n), 20) $$;

-- One timer checked and written; "where" prefixes each field's name (a batch's "[3].").
-- The answer is what the Python API's PutResult says: the timer, its key, and whether it was
-- created, updated or kept; due_at is its instant (NULL while a local time awaits duetime).
CREATE FUNCTION sql_put(
    where_ text, p_namespace text, p_type text, p_payload jsonb, p_at timestamptz,
    p_delay interval, p_local timestamp, p_timezone text, p_disambiguation text, p_key text,
    p_subject text, p_correlation_id text, p_max_attempts integer, p_expires_after interval,
    p_priority integer, p_on_conflict text, p_now timestamptz,
    OUT timer_id bigint, OUT timer_key text, OUT action text, OUT due_at timestamptz
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_due timestamptz;
    v_run timestamptz;
    v_id bigint;
    v_max integer;
    forms integer := num_nonnulls(p_at, p_delay, p_local);
BEGIN
    IF p_on_conflict IS NULL OR p_on_conflict NOT IN ('update', 'keep', 'error') THEN
        PERFORM sql_refuse(where_ || 'on_conflict', 'must be one of update, keep, error');
    END IF;
    IF forms = 0 THEN
        PERFORM sql_refuse(where_ || 'at', 'one of at, delay or local is required', '22004');
    ELSIF forms > 1 THEN
        PERFORM sql_refuse(where_ || CASE WHEN p_at IS NULL THEN 'local' ELSE
            CASE WHEN p_delay IS NULL THEN 'local' ELSE 'delay' END END,
            'at, delay and local are exclusive: give only one');
    END IF;
    IF p_disambiguation IS NULL
       OR p_disambiguation NOT IN ('compatible', 'earlier', 'later', 'reject') THEN
        PERFORM sql_refuse(where_ || 'disambiguation',
            format('must be one of ''compatible'', ''earlier'', ''later'', ''reject'', not %L',
                p_disambiguation));
    END IF;
    IF p_timezone IS NOT NULL AND p_local IS NULL THEN
        PERFORM sql_refuse(where_ || 'timezone',
            'is read only with local (an instant or a delay names no zone here)');
    END IF;
    IF p_at IS NOT NULL THEN
        v_due := p_at;
        v_run := p_at;
    ELSIF p_delay IS NOT NULL THEN
        IF p_delay < interval '0' THEN
            PERFORM sql_refuse(where_ || 'delay', 'must not be negative');
        END IF;
        -- In UTC, as duetime adds a delay that names no zone (a day is 24 hours, a month the
        -- calendar's), whatever the session's TimeZone.
        v_due := (p_now AT TIME ZONE 'UTC' + p_delay) AT TIME ZONE 'UTC';
        IF v_due >= '9000-01-01 00:00:00+00' THEN
            PERFORM sql_refuse(where_ || 'delay', 'ends after 8999 (out of range)');
        END IF;
        v_run := v_due;
    ELSE
        IF p_timezone IS NULL THEN
            PERFORM sql_refuse(where_ || 'timezone',
                'is required with local (an IANA name such as ''Asia/Tokyo'')', '22004');
        END IF;
        IF p_timezone !~ '^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$'
           OR char_length(p_timezone) > 64 THEN
            PERFORM sql_refuse(where_ || 'timezone',
                format('%L is not an IANA timezone name', left(p_timezone, 70)));
        END IF;
        IF p_timezone !~ '/' AND p_timezone <> 'UTC' THEN
            PERFORM sql_refuse(where_ || 'timezone',
                format('%L is not an IANA Area/City name', p_timezone));
        END IF;
        IF NOT (p_local >= '1970-01-01' AND p_local < '9000-01-01') THEN
            PERFORM sql_refuse(where_ || 'local',
                format('%s is out of range (1970..8999)', p_local));
        END IF;
        -- Held until duetime resolves the wall time with its own tz data (see the header).
        v_due := NULL;
        v_run := '9999-01-01 00:00:00+00';
    END IF;
    v_max := coalesce(p_max_attempts,
        (SELECT value::integer FROM meta WHERE key = 'sql.max_attempts'), 20);
    IF v_max < 1 OR v_max > 1000 THEN
        PERFORM sql_refuse(where_ || 'max_attempts', 'must be between 1 and 1000');
    END IF;
    IF p_key IS NULL THEN
        timer_key := sql_new_key();
    ELSE
        timer_key := sql_identifier(where_ || 'key', p_key, 255);
    END IF;
    IF p_type IS NULL OR p_type = '' THEN
        PERFORM sql_refuse(where_ || 'type',
            'an event type is required, e.g. ''birthday.greeting''', '22004');
    END IF;
    IF char_length(p_type) > 200 OR p_type !~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$' THEN
        PERFORM sql_refuse(where_ || 'type', format('%L is not an event type: letters, digits '
            'and _ . : / - (at most 200)', left(p_type, 50)));
    END IF;
    p_payload := sql_payload(where_ || 'payload', p_payload);
    PERFORM sql_identifier(where_ || 'subject', p_subject, 255);
    PERFORM sql_identifier(where_ || 'correlation_id', p_correlation_id, 255);
    IF p_expires_after IS NOT NULL AND (p_expires_after <= interval '0'
        OR p_expires_after > interval '36500 days') THEN
        PERFORM sql_refuse(where_ || 'expires_after',
            'must be a positive duration of at most 100 years');
    END IF;
    IF p_priority IS NOT NULL AND (p_priority < 0 OR p_priority > 9) THEN
        PERFORM sql_refuse(where_ || 'priority', 'must be between 0 and 9 (9 the most urgent)');
    END IF;
    -- If the due time was a local one, a provisional instant for readers until it is resolved.
    due_at := v_due;
    v_due := coalesce(v_due, v_run);

    INSERT INTO timer_keys (namespace, key, timer_id)
    VALUES (p_namespace, timer_key, nextval('timers_id_seq'))
    ON CONFLICT (namespace, key) DO NOTHING
    RETURNING timer_keys.timer_id INTO v_id;
    IF v_id IS NOT NULL THEN
        INSERT INTO timers (
            id, namespace, key, type, payload, subject, correlation_id, due_at, run_at, local,
            timezone, disambiguation, expires_after, status, max_attempts, registered_at,
            updated_at, producer, priority
        ) OVERRIDING SYSTEM VALUE
        VALUES (v_id, p_namespace, timer_key, p_type, p_payload, p_subject, p_correlation_id,
            v_due, v_run, p_local, p_timezone, p_disambiguation, p_expires_after, 'scheduled',
            v_max, p_now, p_now, 'sql:' || session_user, coalesce(p_priority, 0));
        timer_id := v_id;
        action := 'created';
        RETURN;
    END IF;
    IF p_on_conflict = 'error' THEN
        PERFORM sql_refuse(where_ || 'key', format('%L exists in namespace %L', timer_key,
            p_namespace), '23505');
    END IF;
    -- The key row locked as the Python upsert locks it: a concurrent writer of the same key
    -- goes first or second, never both at once.
    SELECT k.timer_id INTO v_id FROM timer_keys k
    WHERE k.namespace = p_namespace AND k.key = timer_key
    FOR NO KEY UPDATE;
    timer_id := v_id;
    IF p_on_conflict = 'update' THEN
        UPDATE timers
        SET type = p_type, payload = p_payload, subject = p_subject,
            correlation_id = p_correlation_id, due_at = v_due, run_at = v_run, local = p_local,
            timezone = p_timezone, disambiguation = p_disambiguation,
            expires_after = p_expires_after, max_attempts = v_max, updated_at = p_now,
            producer = 'sql:' || session_user, priority = coalesce(p_priority, 0),
            version = timers.version + 1
        WHERE timers.id = v_id AND timers.status IN ('scheduled', 'retrying')
          AND (timers.type, timers.payload, timers.subject, timers.correlation_id,
               timers.due_at, timers.run_at, timers.local, timers.timezone,
               timers.disambiguation, timers.expires_after, timers.max_attempts,
               timers.priority)
              IS DISTINCT FROM (p_type, p_payload, p_subject, p_correlation_id, v_due, v_run,
               p_local, p_timezone, p_disambiguation, p_expires_after, v_max,
               coalesce(p_priority, 0)::smallint);
        IF FOUND THEN
            action := 'updated';
            RETURN;
        END IF;
    END IF;
    action := 'kept';
    SELECT CASE WHEN t.run_at < '9000-01-01 00:00:00+00' THEN t.due_at END INTO due_at
    FROM timers t WHERE t.id = v_id;
END
$$;

-- Wake every worker of this schema once the caller commits (as duetime.store.postgres.notices):
-- the earliest instant written, or '' (re-read) when a local time awaits resolution.
CREATE FUNCTION sql_wake(earliest timestamptz, unresolved boolean) RETURNS void
LANGUAGE sql
AS $$
    SELECT pg_notify('duetime_' || current_schema(),
        CASE WHEN unresolved OR earliest IS NULL THEN ''
             ELSE (floor(extract(epoch FROM earliest) * 1000000))::bigint::text END)
$$;

-- schedule: one timer; "at" is a timestamptz or ISO 8601 text with an offset.
CREATE FUNCTION schedule(
    namespace text,
    type text,
    payload jsonb DEFAULT 'null',
    "at" anycompatible DEFAULT NULL::timestamptz,
    delay interval DEFAULT NULL,
    "local" timestamp DEFAULT NULL,
    timezone text DEFAULT NULL,
    disambiguation text DEFAULT 'compatible',
    key text DEFAULT NULL,
    subject text DEFAULT NULL,
    correlation_id text DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    expires_after interval DEFAULT NULL,
    priority integer DEFAULT NULL,
    on_conflict text DEFAULT 'update',
    OUT timer_id bigint, OUT timer_key text, OUT action text, OUT due_at timestamptz
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
DECLARE
    r record;
BEGIN
    PERFORM sql_allow(schedule.namespace);
    SELECT * INTO r FROM sql_put('', schedule.namespace, schedule.type, schedule.payload,
        sql_instant('at', schedule."at"), schedule.delay, schedule."local", schedule.timezone,
        schedule.disambiguation, schedule.key, schedule.subject, schedule.correlation_id,
        schedule.max_attempts, schedule.expires_after, schedule.priority, schedule.on_conflict,
        clock_timestamp());
    IF r.action <> 'kept' THEN
        PERFORM sql_wake(r.due_at, r.due_at IS NULL);
    END IF;
    timer_id := r.timer_id;
    timer_key := r.timer_key;
    action := r.action;
    due_at := r.due_at;
END
$$;

-- emit: an event now, kept (never updated) if its key exists, as AsyncApp.emit.
CREATE FUNCTION emit(
    namespace text,
    type text,
    payload jsonb DEFAULT 'null',
    key text DEFAULT NULL,
    subject text DEFAULT NULL,
    correlation_id text DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    priority integer DEFAULT NULL,
    OUT timer_id bigint, OUT timer_key text, OUT action text, OUT due_at timestamptz
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
DECLARE
    r record;
BEGIN
    PERFORM sql_allow(emit.namespace);
    SELECT * INTO r FROM sql_put('', emit.namespace, emit.type, emit.payload, NULL,
        interval '0', NULL, NULL, 'compatible', emit.key, emit.subject, emit.correlation_id,
        emit.max_attempts, NULL, emit.priority, 'keep', clock_timestamp());
    IF r.action <> 'kept' THEN
        PERFORM sql_wake(r.due_at, false);
    END IF;
    timer_id := r.timer_id;
    timer_key := r.timer_key;
    action := r.action;
    due_at := r.due_at;
END
$$;

-- The common batch, checked and written as a set: every element an object of only type,
-- payload, at (ISO 8601 text with an offset, years 1971-7999, days up to the 28th) or delay
-- (seconds), key, subject, max_attempts and priority, each plainly valid; keys distinct, and
-- given only when on_conflict is keep or error. Such a batch meets every check of sql_put (this
-- predicate is narrower: an element it does not take goes through sql_put, which names the
-- field of the first bad one), and is written in three statements instead of three a timer.
CREATE FUNCTION sql_simple_batch(timers jsonb, on_conflict text, most integer) RETURNS boolean
LANGUAGE sql IMMUTABLE
AS $$
    -- The patterns are matched once a distinct value (a batch's types and instants repeat),
    -- and a payload's text only where it is long enough to break a limit: matching every
    -- element was most of what checking a batch cost.
    WITH items AS MATERIALIZED (
        SELECT item, CASE WHEN item ? 'payload' THEN (item -> 'payload')::text END AS payload
        FROM jsonb_array_elements(timers) AS e (item)
    )
    SELECT coalesce((
        SELECT bool_and(
            jsonb_typeof(item) = 'object'
            AND item - ARRAY['type', 'payload', 'at', 'delay', 'key', 'subject', 'max_attempts',
                'priority'] = '{}'::jsonb
            AND jsonb_typeof(item -> 'type') = 'string'
            AND ((jsonb_typeof(item -> 'at') = 'string' AND NOT item ? 'delay')
                 OR (jsonb_typeof(item -> 'delay') = 'number' AND NOT item ? 'at'
                     AND (item -> 'delay')::numeric BETWEEN 0 AND 999999999))
            AND (payload IS NULL OR (octet_length(payload) <= most
                 AND (octet_length(payload) < 130
                      OR length(payload) - length(translate(payload, '[{', '')) <= 64)
                 AND (octet_length(payload) < 255 OR payload !~ '[0-9]{255}')))
            AND (NOT item ? 'key' OR (jsonb_typeof(item -> 'key') = 'string'
                 AND char_length(item ->> 'key') <= 255 AND (item ->> 'key') !~ '^\s*$'
                 AND (item ->> 'key') !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (NOT item ? 'subject' OR (jsonb_typeof(item -> 'subject') = 'string'
                 AND char_length(item ->> 'subject') <= 255 AND (item ->> 'subject') !~ '^\s*$'
                 AND (item ->> 'subject') !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (NOT item ? 'max_attempts' OR (jsonb_typeof(item -> 'max_attempts') = 'number'
                 AND (item -> 'max_attempts')::numeric BETWEEN 1 AND 1000
                 AND scale((item -> 'max_attempts')::numeric) = 0))
            AND (NOT item ? 'priority' OR (jsonb_typeof(item -> 'priority') = 'number'
                 AND (item -> 'priority')::numeric BETWEEN 0 AND 9
                 AND scale((item -> 'priority')::numeric) = 0))
        ) AND count(item -> 'key') = count(DISTINCT item ->> 'key')
          AND (on_conflict IN ('keep', 'error') OR count(item -> 'key') = 0)
        FROM items
    ) AND (
        SELECT bool_and(char_length(type) <= 200 AND type ~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$')
        FROM (SELECT DISTINCT item ->> 'type' AS type FROM items) AS types
    ) AND (
        SELECT coalesce(bool_and(at ~ ('^(197[1-9]|19[89][0-9]|[2-7][0-9]{3})-(0[1-9]|1[0-2])-'
            '(0[1-9]|1[0-9]|2[0-8])[T ]([01][0-9]|2[0-3]):[0-5][0-9]'
            '(:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-4]):?[0-5][0-9])$')), true)
        FROM (SELECT DISTINCT item ->> 'at' AS at FROM items WHERE item ? 'at') AS ats
    ), false)
$$;

-- A batch sql_simple_batch took with no key given, written as insert_fresh_timers writes one
-- (writes.sql): the keys drawn here cannot exist, so they go in without ON CONFLICT, whose
-- speculative insertion cost more than the insert itself, and the ids are drawn as the rows
-- are read. Should a drawn key exist after all, the primary key of timer_keys refuses the batch.
CREATE FUNCTION sql_put_fresh(
    p_namespace text, timers jsonb, p_now timestamptz, p_default_attempts integer
) RETURNS TABLE (n bigint, timer_id bigint, timer_key text, action text, due_at timestamptz)
LANGUAGE sql
AS $$
    WITH drawn AS MATERIALIZED (
        SELECT sql_key_prefix(clock_timestamp()) AS prefix, gen_random_uuid()::text AS seed
    ),
    new AS MATERIALIZED (
        SELECT e.n, nextval('timers_id_seq') AS id,
            sql_batch_key(drawn.prefix, drawn.seed, e.n) AS key,
            e.item ->> 'type' AS type,
            coalesce(e.item -> 'payload', 'null'::jsonb) AS payload,
            e.item ->> 'subject' AS subject,
            CASE WHEN e.item ? 'at' THEN (e.item ->> 'at')::timestamptz
                ELSE (p_now AT TIME ZONE 'UTC'
                      + make_interval(secs => (e.item ->> 'delay')::double precision))
                     AT TIME ZONE 'UTC' END AS due,
            coalesce((e.item ->> 'max_attempts')::integer, p_default_attempts) AS max_attempts,
            coalesce((e.item ->> 'priority')::smallint, 0::smallint) AS priority
        FROM jsonb_array_elements(timers) WITH ORDINALITY AS e (item, n) CROSS JOIN drawn
    ),
    keyed AS (
        INSERT INTO timer_keys (namespace, key, timer_id)
        SELECT p_namespace, new.key, new.id FROM new
    ),
    made AS (
        INSERT INTO timers (
            id, namespace, key, type, payload, subject, due_at, run_at, status, max_attempts,
            registered_at, updated_at, producer, priority
        ) OVERRIDING SYSTEM VALUE
        SELECT new.id, p_namespace, new.key, new.type, new.payload, new.subject, new.due,
            new.due, 'scheduled', new.max_attempts, p_now, p_now, 'sql:' || session_user,
            new.priority
        FROM new ORDER BY new.n
    )
    SELECT new.n, new.id, new.key, 'created', new.due FROM new ORDER BY new.n
$$;

-- A batch sql_simple_batch took, written as insert_timer writes one (writes.sql): keys first,
-- then the timers under the ids the keys were given, in input order. A key that exists is left
-- alone and answered "kept" with its timer (NULL: a timer this statement cannot see, made by a
-- transaction that committed while it waited for the key).
CREATE FUNCTION sql_put_batch(
    p_namespace text, timers jsonb, p_now timestamptz, p_default_attempts integer
) RETURNS TABLE (n bigint, timer_id bigint, timer_key text, action text, due_at timestamptz)
LANGUAGE sql
AS $$
    WITH drawn AS MATERIALIZED (
        SELECT sql_key_prefix(clock_timestamp()) AS prefix, gen_random_uuid()::text AS seed
    ),
    new AS MATERIALIZED (
        SELECT e.n, coalesce(e.item ->> 'key', sql_batch_key(drawn.prefix, drawn.seed, e.n))
                AS key,
            e.item ->> 'type' AS type,
            coalesce(e.item -> 'payload', 'null'::jsonb) AS payload,
            e.item ->> 'subject' AS subject,
            CASE WHEN e.item ? 'at' THEN (e.item ->> 'at')::timestamptz
                ELSE (p_now AT TIME ZONE 'UTC'
                      + make_interval(secs => (e.item ->> 'delay')::double precision))
                     AT TIME ZONE 'UTC' END AS due,
            coalesce((e.item ->> 'max_attempts')::integer, p_default_attempts) AS max_attempts,
            coalesce((e.item ->> 'priority')::smallint, 0::smallint) AS priority
        FROM jsonb_array_elements(timers) WITH ORDINALITY AS e (item, n) CROSS JOIN drawn
    ),
    keyed AS (
        INSERT INTO timer_keys (namespace, key, timer_id)
        SELECT p_namespace, new.key, nextval('timers_id_seq') FROM new ORDER BY new.n
        ON CONFLICT (namespace, key) DO NOTHING
        RETURNING timer_keys.key, timer_keys.timer_id
    ),
    made AS (
        INSERT INTO timers (
            id, namespace, key, type, payload, subject, due_at, run_at, status, max_attempts,
            registered_at, updated_at, producer, priority
        ) OVERRIDING SYSTEM VALUE
        SELECT keyed.timer_id, p_namespace, new.key, new.type, new.payload, new.subject,
            new.due, new.due, 'scheduled', new.max_attempts, p_now, p_now,
            'sql:' || session_user, new.priority
        FROM new JOIN keyed ON keyed.key = new.key
        ORDER BY new.n
        RETURNING timers.id, timers.key
    )
    SELECT new.n, coalesce(made.id, old.id), new.key,
        CASE WHEN made.id IS NULL THEN 'kept' ELSE 'created' END,
        CASE WHEN made.id IS NULL THEN old.due ELSE new.due END
    FROM new
    LEFT JOIN made ON made.key = new.key
    LEFT JOIN LATERAL (
        SELECT t.id, CASE WHEN t.run_at < '9000-01-01 00:00:00+00' THEN t.due_at END AS due
        FROM timer_keys k JOIN timers t ON t.id = k.timer_id
        WHERE made.id IS NULL AND k.namespace = p_namespace AND k.key = new.key
    ) AS old ON true
    ORDER BY new.n
$$;

-- schedule_many: a JSON array of objects with schedule's fields ("at" ISO 8601 text with an
-- offset, "delay" seconds or an ISO 8601 duration, "local" a wall time), all stored or none;
-- one row an element, in order, and one wake-up for the batch.
CREATE FUNCTION schedule_many(namespace text, timers jsonb, on_conflict text DEFAULT 'update')
RETURNS TABLE (timer_id bigint, timer_key text, action text, due_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    item jsonb;
    n integer := 0;
    where_ text;
    now_ timestamptz := clock_timestamp();
    earliest timestamptz;
    unresolved boolean := false;
    wrote boolean := false;
    r record;
    unknown text;
BEGIN
    PERFORM sql_allow(schedule_many.namespace);
    IF jsonb_typeof(timers) IS DISTINCT FROM 'array' THEN
        PERFORM sql_refuse('timers', 'must be a JSON array of timers');
    END IF;
    IF sql_simple_batch(timers, schedule_many.on_conflict, coalesce(
            (SELECT value::integer FROM meta WHERE key = 'sql.max_payload_bytes'), 262144)) THEN
        FOR r IN SELECT * FROM sql_put_fresh(schedule_many.namespace, timers, now_, coalesce(
                (SELECT value::integer FROM meta WHERE key = 'sql.max_attempts'), 20))
            WHERE NOT jsonb_path_exists(timers, '$[*].key')
            UNION ALL
            SELECT * FROM sql_put_batch(schedule_many.namespace, timers, now_, coalesce(
                (SELECT value::integer FROM meta WHERE key = 'sql.max_attempts'), 20))
            WHERE jsonb_path_exists(timers, '$[*].key')
        LOOP
            IF r.timer_id IS NULL OR (r.action = 'kept' AND schedule_many.on_conflict = 'error')
            THEN  -- (the element's name is made only for an error: formatting it for every
                  -- row was a fifth of a batch's cost)
                where_ := CASE WHEN jsonb_array_length(timers) = 1 THEN ''
                    ELSE format('[%s].', r.n - 1) END;
                IF r.timer_id IS NULL THEN
                    RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = where_
                        || 'key: written by another transaction meanwhile; retry';
                END IF;
                PERFORM sql_refuse(where_ || 'key', format('%L exists in namespace %L',
                    r.timer_key, schedule_many.namespace), '23505');
            END IF;
            IF r.action = 'created' THEN
                wrote := true;
                IF earliest IS NULL OR r.due_at < earliest THEN
                    earliest := r.due_at;
                END IF;
            END IF;
            timer_id := r.timer_id;
            timer_key := r.timer_key;
            action := r.action;
            due_at := r.due_at;
            RETURN NEXT;
        END LOOP;
        IF wrote THEN
            PERFORM sql_wake(earliest, false);
        END IF;
        RETURN;
    END IF;
    FOR item IN SELECT value FROM jsonb_array_elements(timers) LOOP
        where_ := CASE WHEN jsonb_array_length(timers) = 1 THEN '' ELSE format('[%s].', n) END;
        IF jsonb_typeof(item) <> 'object' THEN
            PERFORM sql_refuse(rtrim(where_, '.'), 'must be a JSON object');
        END IF;
        SELECT k INTO unknown FROM jsonb_object_keys(item) AS k
        WHERE k NOT IN ('type', 'payload', 'at', 'delay', 'local', 'timezone', 'disambiguation',
            'key', 'subject', 'correlation_id', 'max_attempts', 'expires_after', 'priority')
        LIMIT 1;
        IF unknown IS NOT NULL THEN
            PERFORM sql_refuse(where_ || unknown, 'is not a known field');
        END IF;
        SELECT * INTO r FROM sql_put(where_, schedule_many.namespace,
            sql_json_text(where_ || 'type', item -> 'type'),
            item -> 'payload',
            sql_instant(where_ || 'at', sql_json_text(where_ || 'at', item -> 'at')),
            sql_json_span(where_ || 'delay', item -> 'delay'),
            sql_json_wall(where_ || 'local', item -> 'local'),
            sql_json_text(where_ || 'timezone', item -> 'timezone'),
            coalesce(sql_json_text(where_ || 'disambiguation', item -> 'disambiguation'),
                'compatible'),
            sql_json_text(where_ || 'key', item -> 'key'),
            sql_json_text(where_ || 'subject', item -> 'subject'),
            sql_json_text(where_ || 'correlation_id', item -> 'correlation_id'),
            sql_json_count(where_ || 'max_attempts', item -> 'max_attempts'),
            sql_json_span(where_ || 'expires_after', item -> 'expires_after'),
            sql_json_count(where_ || 'priority', item -> 'priority'),
            schedule_many.on_conflict, now_);
        IF r.action <> 'kept' THEN
            wrote := true;
            IF r.due_at IS NULL THEN
                unresolved := true;
            ELSIF earliest IS NULL OR r.due_at < earliest THEN
                earliest := r.due_at;
            END IF;
        END IF;
        timer_id := r.timer_id;
        timer_key := r.timer_key;
        action := r.action;
        due_at := r.due_at;
        RETURN NEXT;
        n := n + 1;
    END LOOP;
    IF wrote THEN
        PERFORM sql_wake(earliest, unresolved);
    END IF;
END
$$;

-- schedule_columns: schedule_many's batch as arrays of columns, one element a timer (the
-- form a driver sends without building JSON: typed values, nothing to parse). A column not
-- given is NULL for every timer; each given must have as many elements as types. Each timer
-- takes an instant (ats) or a delay (delays). A batch whose every timer is plainly valid is
-- checked with one query and written as a set; any other goes through sql_put timer by timer,
-- which names the field of the first bad one ("[3].key").
CREATE FUNCTION schedule_columns(
    namespace text,
    types text[],
    payloads jsonb[] DEFAULT NULL,
    "ats" anycompatiblearray DEFAULT NULL::timestamptz[],
    delays interval[] DEFAULT NULL,
    keys text[] DEFAULT NULL,
    subjects text[] DEFAULT NULL,
    max_attempts integer[] DEFAULT NULL,
    priorities integer[] DEFAULT NULL,
    on_conflict text DEFAULT 'update'
)
RETURNS TABLE (timer_id bigint, timer_key text, action text, due_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    rows_ integer := coalesce(cardinality(types), 0);
    now_ timestamptz := clock_timestamp();
    most integer := coalesce(
        (SELECT value::integer FROM meta WHERE key = 'sql.max_payload_bytes'), 262144);
    attempts integer := coalesce(
        (SELECT value::integer FROM meta WHERE key = 'sql.max_attempts'), 20);
    earliest timestamptz;
    wrote boolean := false;
    simple boolean;
    where_ text;
    r record;
    i integer;
    prefix text := sql_key_prefix(now_);
    seed text := gen_random_uuid()::text;
    ats timestamptz[];
BEGIN
    PERFORM sql_allow(schedule_columns.namespace);
    -- timestamptz[] as it is; text[] element by element as "at" reads text (an offset
    -- required); timestamp[] (no zone: which one was meant?) or anything else refused.
    IF schedule_columns."ats" IS NULL THEN
        ats := NULL;
    ELSIF pg_typeof(schedule_columns."ats") = 'timestamp with time zone[]'::regtype THEN
        ats := schedule_columns."ats";
    ELSIF pg_typeof(schedule_columns."ats") IN ('text[]'::regtype, 'unknown'::regtype) THEN
        ats := ARRAY(SELECT sql_instant(CASE WHEN cardinality(schedule_columns."ats") = 1
                THEN 'at' ELSE format('[%s].at', u.n - 1) END, u.v)
            FROM unnest(schedule_columns."ats"::text[]) WITH ORDINALITY AS u (v, n)
            ORDER BY u.n);
    ELSIF pg_typeof(schedule_columns."ats") = 'timestamp without time zone[]'::regtype THEN
        PERFORM sql_refuse('ats', 'has no UTC offset: give timestamptz[] (or ISO 8601 text '
            'with an offset)', '22007');
    ELSE
        PERFORM sql_refuse('ats', format('must be timestamptz[], not %s',
            pg_typeof(schedule_columns."ats")));
    END IF;
    IF types IS NULL THEN
        PERFORM sql_refuse('types', 'an array of event types is required', '22004');
    END IF;
    IF cardinality(payloads) <> rows_ OR cardinality(ats) <> rows_
       OR cardinality(delays) <> rows_ OR cardinality(keys) <> rows_
       OR cardinality(subjects) <> rows_ OR cardinality(max_attempts) <> rows_
       OR cardinality(priorities) <> rows_ THEN
        PERFORM sql_refuse('types', format('%s timers, but another column has a different '
            'number of elements: give each column one element a timer', rows_));
    END IF;
    IF schedule_columns.on_conflict IS NULL
       OR schedule_columns.on_conflict NOT IN ('update', 'keep', 'error') THEN
        PERFORM sql_refuse('on_conflict', 'must be one of update, keep, error');
    END IF;
    SELECT coalesce(bool_and(
            c.type IS NOT NULL AND num_nonnulls(c.at, c.delay) = 1
            AND (c.at IS NULL OR (c.at >= '1970-01-01 00:00:00+00'
                                  AND c.at < '9000-01-01 00:00:00+00'))
            AND (c.delay IS NULL OR (c.delay >= interval '0' AND c.delay < interval '3650 days'))
            AND (c.payload IS NULL OR (octet_length(c.text_) <= most
                 AND (octet_length(c.text_) < 130
                      OR length(c.text_) - length(translate(c.text_, '[{', '')) <= 64)
                 AND (octet_length(c.text_) < 255 OR c.text_ !~ '[0-9]{255}')))
            AND (c.key IS NULL OR (char_length(c.key) <= 255 AND c.key !~ '^\s*$'
                 AND c.key !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (c.subject IS NULL OR (char_length(c.subject) <= 255
                 AND c.subject !~ '^\s*$'
                 AND c.subject !~ '[\x01-\x1f\x7f-\x9f\u2028\u2029]'))
            AND (c.attempts IS NULL OR c.attempts BETWEEN 1 AND 1000)
            AND (c.priority IS NULL OR c.priority BETWEEN 0 AND 9)
        ) AND count(c.key) = count(DISTINCT c.key)
          AND (schedule_columns.on_conflict IN ('keep', 'error') OR count(c.key) = 0), false)
        AND (SELECT coalesce(bool_and(char_length(t) <= 200
                 AND t ~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$'), false)
             FROM (SELECT DISTINCT t FROM unnest(types) AS t) AS distinct_types)
    INTO simple
    FROM (SELECT u.*, u.payload::text AS text_
          FROM unnest(types, payloads, ats, delays, keys, subjects, max_attempts, priorities)
              AS u (type, payload, at, delay, key, subject, attempts, priority)) AS c;
    IF NOT simple THEN
        FOR i IN 1 .. rows_ LOOP
            where_ := CASE WHEN rows_ = 1 THEN '' ELSE format('[%s].', i - 1) END;
            SELECT * INTO r FROM sql_put(where_, schedule_columns.namespace, types[i],
                payloads[i], ats[i], delays[i], NULL, NULL, 'compatible', keys[i], subjects[i],
                NULL, max_attempts[i], NULL, priorities[i], schedule_columns.on_conflict, now_);
            IF r.action <> 'kept' THEN
                wrote := true;
                IF earliest IS NULL OR r.due_at < earliest THEN
                    earliest := r.due_at;
                END IF;
            END IF;
            timer_id := r.timer_id;
            timer_key := r.timer_key;
            action := r.action;
            due_at := r.due_at;
            RETURN NEXT;
        END LOOP;
    ELSIF keys IS NULL THEN
        -- Every key drawn here: written as insert_fresh_timers writes (see sql_put_fresh).
        RETURN QUERY
            WITH new AS MATERIALIZED (
                SELECT c.n, nextval('timers_id_seq') AS id,
                    sql_batch_key(prefix, seed, c.n) AS key, c.type,
                    coalesce(c.payload, 'null'::jsonb) AS payload, c.subject,
                    coalesce(c.at, (now_ AT TIME ZONE 'UTC' + c.delay) AT TIME ZONE 'UTC') AS due,
                    coalesce(c.attempts, attempts) AS attempts,
                    coalesce(c.priority, 0)::smallint AS priority
                FROM unnest(types, payloads, ats, delays, subjects, max_attempts, priorities)
                    WITH ORDINALITY AS c (type, payload, at, delay, subject, attempts, priority, n)
            ),
            keyed AS (
                INSERT INTO timer_keys AS k (namespace, key, timer_id)
                SELECT schedule_columns.namespace, new.key, new.id FROM new
            ),
            made AS (
                INSERT INTO timers AS t (
                    id, namespace, key, type, payload, subject, due_at, run_at, status,
                    max_attempts, registered_at, updated_at, producer, priority
                ) OVERRIDING SYSTEM VALUE
                SELECT new.id, schedule_columns.namespace, new.key, new.type, new.payload,
                    new.subject, new.due, new.due, 'scheduled', new.attempts, now_, now_,
                    'sql:' || session_user, new.priority
                FROM new ORDER BY new.n
            )
            SELECT new.id, new.key, 'created'::text, new.due FROM new ORDER BY new.n;
        IF rows_ > 0 THEN
            wrote := true;
            earliest := (SELECT min(coalesce(c.at,
                (now_ AT TIME ZONE 'UTC' + c.delay) AT TIME ZONE 'UTC'))
                FROM unnest(ats, delays) AS c (at, delay));
        END IF;
    ELSE
        FOR r IN
            WITH new AS MATERIALIZED (
                SELECT c.n, coalesce(c.key, sql_batch_key(prefix, seed, c.n)) AS key, c.type,
                    coalesce(c.payload, 'null'::jsonb) AS payload, c.subject,
                    coalesce(c.at, (now_ AT TIME ZONE 'UTC' + c.delay) AT TIME ZONE 'UTC') AS due,
                    coalesce(c.attempts, attempts) AS attempts,
                    coalesce(c.priority, 0)::smallint AS priority
                FROM unnest(types, payloads, ats, delays, keys, subjects, max_attempts,
                    priorities) WITH ORDINALITY
                    AS c (type, payload, at, delay, key, subject, attempts, priority, n)
            ),
            keyed AS (
                INSERT INTO timer_keys AS k (namespace, key, timer_id)
                SELECT schedule_columns.namespace, new.key, nextval('timers_id_seq')
                FROM new ORDER BY new.n
                ON CONFLICT ON CONSTRAINT timer_keys_pkey DO NOTHING  -- (namespace, key)
                RETURNING k.key, k.timer_id
            ),
            made AS (
                INSERT INTO timers AS t (
                    id, namespace, key, type, payload, subject, due_at, run_at, status,
                    max_attempts, registered_at, updated_at, producer, priority
                ) OVERRIDING SYSTEM VALUE
                SELECT keyed.timer_id, schedule_columns.namespace, new.key, new.type,
                    new.payload, new.subject, new.due, new.due, 'scheduled', new.attempts,
                    now_, now_, 'sql:' || session_user, new.priority
                FROM new JOIN keyed ON keyed.key = new.key
                ORDER BY new.n
                RETURNING t.id, t.key
            )
            SELECT new.n, coalesce(made.id, old.id) AS id, new.key,
                CASE WHEN made.id IS NULL THEN 'kept' ELSE 'created' END AS made_action,
                CASE WHEN made.id IS NULL THEN old.due ELSE new.due END AS due
            FROM new
            LEFT JOIN made ON made.key = new.key
            LEFT JOIN LATERAL (
                SELECT t.id, CASE WHEN t.run_at < '9000-01-01 00:00:00+00' THEN t.due_at END
                    AS due
                FROM timer_keys k JOIN timers t ON t.id = k.timer_id
                WHERE made.id IS NULL AND k.namespace = schedule_columns.namespace
                  AND k.key = new.key
            ) AS old ON true
            ORDER BY new.n
        LOOP
            IF r.id IS NULL OR (r.made_action = 'kept'
                                AND schedule_columns.on_conflict = 'error') THEN
                where_ := CASE WHEN rows_ = 1 THEN '' ELSE format('[%s].', r.n - 1) END;
                IF r.id IS NULL THEN
                    RAISE EXCEPTION USING ERRCODE = '40001', MESSAGE = where_
                        || 'key: written by another transaction meanwhile; retry';
                END IF;
                PERFORM sql_refuse(where_ || 'key', format('%L exists in namespace %L',
                    r.key, schedule_columns.namespace), '23505');
            END IF;
            IF r.made_action = 'created' THEN
                wrote := true;
                IF earliest IS NULL OR r.due < earliest THEN
                    earliest := r.due;
                END IF;
            END IF;
            timer_id := r.id;
            timer_key := r.key;
            action := r.made_action;
            due_at := r.due;
            RETURN NEXT;
        END LOOP;
    END IF;
    IF wrote THEN
        PERFORM sql_wake(earliest, false);
    END IF;
END
$$;

-- A batch element's text field (a JSON string, or absent/null).
CREATE FUNCTION sql_json_text(field text, value jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL OR value = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) = 'number' AND field ~ 'subject$' THEN
        RETURN value #>> '{}';  -- a numeric subject (a user id) reads as its text, as in Python
    END IF;
    IF jsonb_typeof(value) <> 'string' THEN
        PERFORM sql_refuse(field, format('must be a string, not %s', jsonb_typeof(value)));
    END IF;
    RETURN value #>> '{}';
END
$$;

-- A batch element's whole number (3.0 is 3, as JSON reads it).
CREATE FUNCTION sql_json_count(field text, value jsonb) RETURNS integer
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL OR value = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) <> 'number' OR value::numeric <> trunc(value::numeric)
       OR abs(value::numeric) > 2147483647 THEN
        PERFORM sql_refuse(field, 'must be a whole number');
    END IF;
    RETURN value::numeric::integer;
END
$$;

-- A batch element's span: seconds, or an ISO 8601 duration ('PT5M', 'P1DT2H').
CREATE FUNCTION sql_json_span(field text, value jsonb) RETURNS interval
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    text_ text;
BEGIN
    IF value IS NULL OR value = 'null'::jsonb THEN
        RETURN NULL;
    END IF;
    IF jsonb_typeof(value) = 'number' THEN
        IF abs(value::numeric) > 3153600000 THEN
            PERFORM sql_refuse(field, 'is out of range (at most 100 years)');
        END IF;
        RETURN make_interval(secs => value::numeric::double precision);
    END IF;
    text_ := sql_json_text(field, value);
    IF text_ !~ '^P(\d+Y)?(\d+M)?(\d+W)?(\d+D)?(T(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$'
       OR text_ ~ '^PT?$' OR text_ ~ 'T$' THEN
        PERFORM sql_refuse(field, format('%L is not a duration: seconds, or ISO 8601 like '
            '''PT1H''', left(text_, 50)));
    END IF;
    RETURN text_::interval;
END
$$;

-- A batch element's wall time: 'YYYY-MM-DDTHH:MM[:SS[.ffffff]]', without an offset.
CREATE FUNCTION sql_json_wall(field text, value jsonb) RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE
AS $$
DECLARE
    text_ text := sql_json_text(field, value);
BEGIN
    IF text_ IS NULL THEN
        RETURN NULL;
    END IF;
    IF text_ !~ '^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?$' THEN
        PERFORM sql_refuse(field, format('%L is not a wall-clock time like '
            '''2025-03-15T09:00'' (no UTC offset: the zone is timezone)', left(text_, 50)));
    END IF;
    BEGIN
        RETURN text_::timestamp;
    EXCEPTION WHEN datetime_field_overflow OR invalid_datetime_format THEN
        PERFORM sql_refuse(field, format('%L does not exist', text_), '22007');
    END;
    RETURN NULL;
END
$$;

-- cancel: a pending timer by key, as AsyncApp.cancel (unknown: P0002; no longer pending: 55000).
CREATE FUNCTION cancel(namespace text, key text, OUT timer_id bigint, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    now_ timestamptz := clock_timestamp();
    found_id bigint;
    found_status text;
BEGIN
    PERFORM sql_allow(cancel.namespace);
    IF cancel.key IS NULL THEN
        PERFORM sql_refuse('key', 'a key is required', '22004');
    END IF;
    PERFORM sql_identifier('key', cancel.key, 319);
    SELECT t.id, t.status INTO found_id, found_status
    FROM timer_keys k JOIN timers t ON t.id = k.timer_id
    WHERE k.namespace = cancel.namespace AND k.key = cancel.key
    FOR NO KEY UPDATE OF t;
    IF found_id IS NULL THEN
        PERFORM sql_refuse('key', format('no timer %L in namespace %L', cancel.key,
            cancel.namespace), 'P0002');
    END IF;
    IF found_status NOT IN ('scheduled', 'retrying') THEN
        PERFORM sql_refuse('key', format('timer %L is %s: only a scheduled or retrying timer '
            'can be cancelled', cancel.key, found_status), '55000');
    END IF;
    UPDATE timers AS t SET status = 'cancelled', completed_at = now_, updated_at = now_
    WHERE t.id = found_id;
    timer_id := found_id;
    status := 'cancelled';
END
$$;

REVOKE EXECUTE ON FUNCTION
    sql_refuse(text, text, text), sql_allow(text, text), sql_identifier(text, text, integer),
    sql_json_depth(jsonb), sql_payload(text, jsonb), sql_instant(text, anycompatible),
    sql_new_key(), sql_key_prefix(timestamptz), sql_batch_key(text, text, bigint),
    sql_wake(timestamptz, boolean), sql_json_text(text, jsonb),
    sql_json_count(text, jsonb), sql_json_span(text, jsonb), sql_json_wall(text, jsonb),
    sql_simple_batch(jsonb, text, integer), sql_put_batch(text, jsonb, timestamptz, integer),
    sql_put_fresh(text, jsonb, timestamptz, integer),
    sql_put(text, text, text, jsonb, timestamptz, interval, timestamp, text, text, text, text,
        text, integer, interval, integer, text, timestamptz),
    schedule(text, text, jsonb, anycompatible, interval, timestamp, text, text, text, text, text,
        integer, interval, integer, text),
    emit(text, text, jsonb, text, text, text, integer, integer),
    schedule_many(text, jsonb, text), cancel(text, text),
    schedule_columns(text, text[], jsonb[], anycompatiblearray, interval[], text[], text[],
        integer[], integer[], text)
FROM PUBLIC;
