-- Managing schedules from SQL: add_schedule, pause_schedule, resume_schedule, remove_schedule.
--
-- A schedule's rule (cron, interval, RFC 5545 RRULE) and its occurrences are duetime's to
-- read: PostgreSQL has neither its cron and RRULE parsers nor its tz data. So each function
-- checks in SQL what SQL can (the namespace and the caller's grant, the name, type, payload,
-- subject, limits and option values, and the rule's syntax), and stores a request, in the
-- caller's transaction; a worker applies it once the caller has committed, through the same
-- code as the Python API (the full checks, the caps, revisions, the audit log), and records
-- the outcome on the request: applied (created, updated, kept, paused, resumed, removed) or
-- failed with the reason. A request is never lost: one that fails a later check stays, failed,
-- with its reason, readable with schedule_request(). Errors are as in migration 0029.

CREATE TABLE sql_schedule_requests (
    id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    name text NOT NULL,
    action text NOT NULL CHECK (action IN ('define', 'pause', 'resume', 'remove')),
    request jsonb,
    on_conflict text NOT NULL DEFAULT 'update',
    requested_by text NOT NULL,
    requested_at timestamptz NOT NULL,
    status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'applied', 'failed')),
    outcome text,
    applied_at timestamptz
);

CREATE INDEX sql_schedule_requests_pending ON sql_schedule_requests (id)
    WHERE status = 'pending';

COMMENT ON TABLE sql_schedule_requests IS
    'schedule changes made from SQL, applied by a worker after the caller commits';

-- A schedule name as duetime.schedules.check_schedule_name reads it.
CREATE FUNCTION sql_schedule_name(value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        PERFORM sql_refuse('name', 'a schedule name is required, e.g. ''birthday:user-42''',
            '22004');
    END IF;
    IF char_length(value) > 200 THEN
        PERFORM sql_refuse('name', format('is %s characters; at most 200', char_length(value)),
            '22001');
    END IF;
    IF value !~ '^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*$' THEN
        PERFORM sql_refuse('name', format('%L is not a schedule name: letters, digits and '
            '_ . : @ + = - (starting with a letter, digit or ''_'')', left(value, 50)));
    END IF;
    RETURN value;
END
$$;

-- Store a request and wake the workers once the caller commits.
CREATE FUNCTION sql_schedule_request(
    p_namespace text, p_name text, p_action text, p_request jsonb, p_on_conflict text
) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT
AS $$
DECLARE
    made bigint;
BEGIN
    INSERT INTO sql_schedule_requests (namespace, name, action, request, on_conflict,
        requested_by, requested_at)
    VALUES (p_namespace, p_name, p_action, p_request, p_on_conflict, 'sql:' || session_user,
        clock_timestamp())
    RETURNING id INTO made;
    PERFORM sql_wake(NULL, true);
    RETURN made;
END
$$;

-- add_schedule: exactly one of cron, every and rrule; the request's id, applied after commit.
CREATE FUNCTION add_schedule(
    namespace text,
    name text,
    type text,
    payload jsonb DEFAULT 'null',
    cron text DEFAULT NULL,
    every interval DEFAULT NULL,
    rrule text DEFAULT NULL,
    dtstart timestamp DEFAULT NULL,
    timezone text DEFAULT 'UTC',
    start_at timestamptz DEFAULT NULL,
    end_at timestamptz DEFAULT NULL,
    subject text DEFAULT NULL,
    max_attempts integer DEFAULT NULL,
    catch_up text DEFAULT 'latest',
    overlap text DEFAULT 'allow',
    on_conflict text DEFAULT 'update',
    OUT request_id bigint, OUT schedule_name text, OUT status text
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    rules integer := num_nonnulls(add_schedule.cron, add_schedule.every, add_schedule.rrule);
    fields integer;
BEGIN
    PERFORM sql_allow(add_schedule.namespace);
    schedule_name := sql_schedule_name(add_schedule.name);
    IF add_schedule.type IS NULL OR add_schedule.type = '' THEN
        PERFORM sql_refuse('type', 'an event type is required, e.g. ''birthday.greeting''',
            '22004');
    END IF;
    IF char_length(add_schedule.type) > 200
       OR add_schedule.type !~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$' THEN
        PERFORM sql_refuse('type', format('%L is not an event type: letters, digits and '
            '_ . : / - (at most 200)', left(add_schedule.type, 50)));
    END IF;
    PERFORM sql_payload('payload', add_schedule.payload);
    IF rules = 0 THEN
        PERFORM sql_refuse('cron', 'one of cron, every or rrule is required', '22004');
    ELSIF rules > 1 THEN
        PERFORM sql_refuse(CASE WHEN add_schedule.cron IS NULL THEN 'rrule'
            WHEN add_schedule.every IS NULL THEN 'rrule' ELSE 'every' END,
            'cron, every and rrule are exclusive: give only one');
    END IF;
    IF add_schedule.cron IS NOT NULL THEN
        -- The syntax only: five (or six, with seconds) fields of a cron's characters, or a
        -- nickname; what the fields mean is checked by duetime as it applies the request.
        fields := cardinality(regexp_split_to_array(btrim(add_schedule.cron), '\s+'));
        IF char_length(add_schedule.cron) > 200
           OR NOT (add_schedule.cron ~* '^\s*@(yearly|annually|monthly|weekly|daily|midnight|hourly)\s*$'
               OR (fields BETWEEN 5 AND 6
                   AND btrim(add_schedule.cron) ~* '^[0-9A-Z*?/,#LW-]+(\s+[0-9A-Z*?/,#LW-]+)*$')) THEN
            PERFORM sql_refuse('cron', format('%L is not a cron expression: five fields '
                '(minute hour day month weekday), six with seconds, or @daily and the like',
                left(add_schedule.cron, 60)));
        END IF;
    END IF;
    IF add_schedule.every IS NOT NULL AND (add_schedule.every <= interval '0'
        OR add_schedule.every > interval '36500 days') THEN
        PERFORM sql_refuse('every', 'must be a positive interval of at most 100 years');
    END IF;
    IF add_schedule.rrule IS NOT NULL AND (char_length(add_schedule.rrule) > 2000
        OR add_schedule.rrule !~* '^(RRULE:)?([A-Z]+=[^;]+;)*[A-Z]+=[^;]+;?$'
        OR add_schedule.rrule !~* '(^|[:;])FREQ=') THEN
        PERFORM sql_refuse('rrule', format('%L is not an RFC 5545 recurrence rule such as '
            '''FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1''', left(add_schedule.rrule, 60)));
    END IF;
    IF add_schedule.rrule IS NOT NULL AND add_schedule.dtstart IS NULL THEN
        PERFORM sql_refuse('dtstart', 'is required with rrule (a local time, e.g. '
            '2027-01-29 17:00)', '22004');
    END IF;
    IF add_schedule.rrule IS NULL AND add_schedule.dtstart IS NOT NULL THEN
        PERFORM sql_refuse('dtstart', 'only with rrule (an RFC 5545 recurrence rule)');
    END IF;
    IF add_schedule.timezone IS NULL
       OR add_schedule.timezone !~ '^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$'
       OR char_length(add_schedule.timezone) > 64 THEN
        PERFORM sql_refuse('timezone', format('%L is not an IANA timezone name',
            left(add_schedule.timezone, 70)));
    END IF;
    IF add_schedule.start_at IS NOT NULL AND add_schedule.end_at IS NOT NULL
       AND add_schedule.end_at <= add_schedule.start_at THEN
        PERFORM sql_refuse('end_at', 'must be after start_at');
    END IF;
    PERFORM sql_identifier('subject', add_schedule.subject, 255);
    IF add_schedule.max_attempts IS NOT NULL
       AND (add_schedule.max_attempts < 1 OR add_schedule.max_attempts > 1000) THEN
        PERFORM sql_refuse('max_attempts', 'must be between 1 and 1000');
    END IF;
    IF add_schedule.catch_up IS NULL OR add_schedule.catch_up NOT IN ('latest', 'all', 'none')
    THEN
        PERFORM sql_refuse('catch_up', 'must be one of latest, all, none');
    END IF;
    IF add_schedule.overlap IS NULL
       OR add_schedule.overlap NOT IN ('allow', 'skip', 'buffer_one') THEN
        PERFORM sql_refuse('overlap', 'must be one of allow, skip, buffer_one');
    END IF;
    IF add_schedule.on_conflict IS NULL
       OR add_schedule.on_conflict NOT IN ('update', 'keep', 'error') THEN
        PERFORM sql_refuse('on_conflict', 'must be one of update, keep, error');
    END IF;
    request_id := sql_schedule_request(add_schedule.namespace, schedule_name, 'define',
        jsonb_strip_nulls(jsonb_build_object(
            'name', schedule_name, 'type', add_schedule.type,
            'cron', add_schedule.cron,
            'every', extract(epoch FROM add_schedule.every),
            'rrule', add_schedule.rrule,
            'dtstart', to_char(add_schedule.dtstart, 'YYYY-MM-DD"T"HH24:MI:SS'),
            'timezone', add_schedule.timezone,
            'start_at', to_char(add_schedule.start_at AT TIME ZONE 'UTC',
                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'end_at', to_char(add_schedule.end_at AT TIME ZONE 'UTC',
                'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'subject', add_schedule.subject, 'max_attempts', add_schedule.max_attempts,
            'catch_up', add_schedule.catch_up, 'overlap', add_schedule.overlap))
        || jsonb_build_object('payload', coalesce(add_schedule.payload, 'null'::jsonb)),
        add_schedule.on_conflict);
    status := 'pending';
END
$$;

-- pause_schedule, resume_schedule, remove_schedule: a request naming the schedule.
CREATE FUNCTION sql_schedule_change(ns text, schedule text, action text,
    OUT request_id bigint, OUT schedule_name text, OUT status text)
LANGUAGE plpgsql SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM sql_allow(ns);
    schedule_name := sql_schedule_name(schedule);
    request_id := sql_schedule_request(ns, schedule_name, action, NULL, 'update');
    status := 'pending';
END
$$;

CREATE FUNCTION pause_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ SELECT * FROM sql_schedule_change(namespace, name, 'pause') $$;

CREATE FUNCTION resume_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ SELECT * FROM sql_schedule_change(namespace, name, 'resume') $$;

CREATE FUNCTION remove_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ SELECT * FROM sql_schedule_change(namespace, name, 'remove') $$;

-- schedule_request: what became of a request (pending, applied or failed, and how).
CREATE FUNCTION schedule_request(namespace text, request_id bigint,
    OUT status text, OUT outcome text, OUT applied_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
BEGIN
    PERFORM sql_allow(schedule_request.namespace);
    SELECT r.status, r.outcome, r.applied_at INTO status, outcome, applied_at
    FROM sql_schedule_requests r
    WHERE r.id = schedule_request.request_id AND r.namespace = schedule_request.namespace;
    IF status IS NULL THEN
        PERFORM sql_refuse('request_id', format('no request %s in namespace %L',
            schedule_request.request_id, schedule_request.namespace), 'P0002');
    END IF;
END
$$;

REVOKE EXECUTE ON FUNCTION
    sql_schedule_name(text), sql_schedule_request(text, text, text, jsonb, text),
    add_schedule(text, text, text, jsonb, text, interval, text, timestamp, text, timestamptz,
        timestamptz, text, integer, text, text, text),
    sql_schedule_change(text, text, text), pause_schedule(text, text),
    resume_schedule(text, text), remove_schedule(text, text), schedule_request(text, bigint)
FROM PUBLIC;
