-- Schedules from SQL written in the caller's transaction: add_schedule, pause_schedule,
-- resume_schedule and remove_schedule now change the schedules table itself and answer what
-- the Python API answers (created, updated, kept, paused, resumed, removed, and the schedule),
-- instead of a request for a worker to apply later (migration 0030).
--
-- What SQL cannot decide as duetime does (what a cron or RRULE means, the zone's tz data, the
-- first occurrence) is left to duetime: a schedule whose next occurrence must be found is
-- written with next_at held at 9999-01-01 (after every instant due_schedules' horizon reaches,
-- so nothing is materialised from it), and a worker checks the row with the Python API's own
-- rules and plans its next occurrence (app/sql_planning.py). A definition that fails that check
-- is never lost: the schedule goes back to the definition it had (or, new, stays paused), and
-- its request records the reason (schedule_request()). Requests stored by migration 0030's
-- functions and not yet applied (schedule_version NULL) are still applied the old way.
--
-- The settings the Python path takes from the app's settings (max_payload_bytes, max_attempts,
-- max_schedules) are meta rows sql.<setting>, written from the settings each time an app opens
-- the store (duetime.store.postgres.sql_access.keep_settings).

ALTER TABLE sql_schedule_requests
    ADD COLUMN schedule_version bigint,
    ADD COLUMN previous jsonb;

COMMENT ON COLUMN sql_schedule_requests.schedule_version IS
    'the version of the schedule row the request wrote (NULL: a request of migration 0030, '
    'applied by a worker)';
COMMENT ON COLUMN sql_schedule_requests.previous IS
    'the schedule row as it was planned before the request, restored if the request fails';

-- An integer setting of the app's (meta sql.<name>), or its default.
CREATE FUNCTION sql_setting(name text, fallback integer) RETURNS integer
LANGUAGE sql STABLE
AS $$ SELECT coalesce((SELECT value::integer FROM meta WHERE key = 'sql.' || name), fallback) $$;

-- An event type as duetime.validation.check_type reads it.
CREATE FUNCTION sql_type(field text, value text) RETURNS text
LANGUAGE plpgsql IMMUTABLE
AS $$
BEGIN
    IF value IS NULL OR value = '' THEN
        PERFORM sql_refuse(field, 'an event type is required, e.g. ''birthday.greeting''',
            '22004');
    END IF;
    IF char_length(value) > 200 OR value !~ '^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$' THEN
        PERFORM sql_refuse(field, format('%L is not an event type: letters, digits and '
            '_ . : / - (at most 200)', left(value, 50)));
    END IF;
    RETURN value;
END
$$;

-- The schedule as the functions answer it: Schedule.to_dict's fields (next_at NULL, planned
-- false, while a worker has still to find its next occurrence).
CREATE FUNCTION sql_schedule_view(s schedules) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT jsonb_build_object(
        'id', s.id, 'namespace', s.namespace, 'name', s.name, 'type', s.type,
        'payload', s.payload, 'subject', s.subject, 'cron', s.cron,
        'every', extract(epoch FROM s.every), 'rrule', s.calendar::jsonb ->> 'rrule',
        'dtstart', s.calendar::jsonb ->> 'dtstart', 'timezone', s.timezone,
        'start_at', s.start_at, 'end_at', s.end_at, 'catch_up', s.catch_up,
        'catch_up_grace', extract(epoch FROM s.catch_up_grace), 'overlap', s.overlap,
        'on_gap', s.on_gap, 'on_overlap', s.on_overlap, 'active', s.active,
        'max_attempts', s.max_attempts,
        'next_at', CASE WHEN s.next_at < '9000-01-01 00:00:00+00' THEN s.next_at END,
        'planned', s.next_at IS DISTINCT FROM '9999-01-01 00:00:00+00',
        'last_at', s.last_at, 'created_at', s.created_at, 'updated_at', s.updated_at,
        'version', s.version)
$$;

-- What a failed check restores: the row as last planned (when it is held, the previous of the
-- request that held it).
CREATE FUNCTION sql_schedule_previous(s schedules) RETURNS jsonb
LANGUAGE sql STABLE
AS $$
    SELECT CASE WHEN s.next_at IS DISTINCT FROM '9999-01-01 00:00:00+00' THEN to_jsonb(s)
        ELSE (SELECT r.previous FROM sql_schedule_requests r
              WHERE r.namespace = s.namespace AND r.name = s.name
                AND r.schedule_version = s.version
              ORDER BY r.id DESC LIMIT 1) END
$$;

-- A change made: its request row (pending while a worker has still to check and plan it, and
-- then the workers are woken once the caller commits), and the audit log's entry.
CREATE FUNCTION sql_schedule_record(
    p_namespace text, p_name text, p_action text, p_request jsonb, p_on_conflict text,
    p_outcome text, p_pending boolean, s schedules, p_previous jsonb, p_now timestamptz,
    p_audit text, p_target jsonb
) RETURNS bigint
LANGUAGE plpgsql
AS $$
DECLARE
    made bigint;
BEGIN
    INSERT INTO sql_schedule_requests (namespace, name, action, request, on_conflict,
        requested_by, requested_at, status, outcome, applied_at, schedule_version, previous)
    VALUES (p_namespace, p_name, p_action, p_request, p_on_conflict, 'sql:' || session_user,
        p_now, CASE WHEN p_pending THEN 'pending' ELSE 'applied' END, p_outcome,
        CASE WHEN p_pending THEN NULL ELSE p_now END, s.version, p_previous)
    RETURNING id INTO made;
    IF p_pending THEN
        PERFORM sql_wake(NULL, true);
    END IF;
    IF p_audit IS NOT NULL THEN
        INSERT INTO audit_log (namespace, at, actor, via, action, target, count)
        VALUES (p_namespace, p_now, 'python:sql:' || session_user, 'python', p_audit,
            p_target, 1);
    END IF;
    RETURN made;
END
$$;

-- add_schedule's checks (those of migration 0030's add_schedule): the definition as a JSON
-- object of ScheduleRequest's fields.
CREATE FUNCTION sql_schedule_definition(
    p_name text, p_type text, p_payload jsonb, p_cron text, p_every interval, p_rrule text,
    p_dtstart timestamp, p_timezone text, p_start_at timestamptz, p_end_at timestamptz,
    p_subject text, p_max_attempts integer, p_catch_up text, p_overlap text, p_on_conflict text
) RETURNS jsonb
LANGUAGE plpgsql STABLE
AS $$
DECLARE
    rules integer := num_nonnulls(p_cron, p_every, p_rrule);
    fields integer;
BEGIN
    PERFORM sql_schedule_name(p_name);
    PERFORM sql_type('type', p_type);
    PERFORM sql_payload('payload', p_payload);
    IF rules = 0 THEN
        PERFORM sql_refuse('cron', 'one of cron, every or rrule is required', '22004');
    ELSIF rules > 1 THEN
        PERFORM sql_refuse(CASE WHEN p_cron IS NULL OR p_every IS NULL THEN 'rrule'
            ELSE 'every' END, 'cron, every and rrule are exclusive: give only one');
    END IF;
    IF p_cron IS NOT NULL THEN
        -- The syntax only: five (or six, with seconds) fields of a cron's characters, or a
        -- nickname; what the fields mean is checked by duetime as it plans the schedule.
        fields := cardinality(regexp_split_to_array(btrim(p_cron), '\s+'));
        IF char_length(p_cron) > 200
           OR NOT (p_cron ~* '^\s*@(yearly|annually|monthly|weekly|daily|midnight|hourly)\s*$'
               OR (fields BETWEEN 5 AND 6
                   AND btrim(p_cron) ~* '^[0-9A-Z*?/,#LW-]+(\s+[0-9A-Z*?/,#LW-]+)*$')) THEN
            PERFORM sql_refuse('cron', format('%L is not a cron expression: five fields '
                '(minute hour day month weekday), six with seconds, or @daily and the like',
                left(p_cron, 60)));
        END IF;
    END IF;
    IF p_every IS NOT NULL AND (p_every <= interval '0' OR p_every > interval '36500 days') THEN
        PERFORM sql_refuse('every', 'must be a positive interval of at most 100 years');
    END IF;
    IF date_part('month', p_every) <> 0 OR date_part('year', p_every) <> 0 THEN
        PERFORM sql_refuse('every', format('%s: months and years vary in length; give days, '
            'hours, minutes or seconds, or a cron or rrule', p_every));
    END IF;
    IF p_rrule IS NOT NULL AND (char_length(p_rrule) > 2000
        OR p_rrule !~* '^(RRULE:)?([A-Z]+=[^;]+;)*[A-Z]+=[^;]+;?$'
        OR p_rrule !~* '(^|[:;])FREQ=') THEN
        PERFORM sql_refuse('rrule', format('%L is not an RFC 5545 recurrence rule such as '
            '''FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1''', left(p_rrule, 60)));
    END IF;
    IF p_rrule IS NOT NULL AND p_dtstart IS NULL THEN
        PERFORM sql_refuse('dtstart', 'is required with rrule (a local time, e.g. '
            '2027-01-29 17:00)', '22004');
    END IF;
    IF p_rrule IS NULL AND p_dtstart IS NOT NULL THEN
        PERFORM sql_refuse('dtstart', 'only with rrule (an RFC 5545 recurrence rule)');
    END IF;
    IF p_dtstart IS NOT NULL AND NOT (p_dtstart >= '1970-01-01' AND p_dtstart < '9000-01-01')
    THEN
        PERFORM sql_refuse('dtstart', format('%s is out of range (1970..8999)', p_dtstart));
    END IF;
    IF p_timezone IS NULL OR p_timezone !~ '^[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*$'
       OR char_length(p_timezone) > 64 THEN
        PERFORM sql_refuse('timezone', format('%L is not an IANA timezone name',
            left(p_timezone, 70)));
    END IF;
    PERFORM sql_instant('start_at', p_start_at);
    PERFORM sql_instant('end_at', p_end_at);
    IF p_start_at IS NOT NULL AND p_end_at IS NOT NULL AND p_end_at <= p_start_at THEN
        PERFORM sql_refuse('end_at', 'must be after start_at');
    END IF;
    PERFORM sql_identifier('subject', p_subject, 255);
    IF p_max_attempts IS NOT NULL AND (p_max_attempts < 1 OR p_max_attempts > 1000) THEN
        PERFORM sql_refuse('max_attempts', 'must be between 1 and 1000');
    END IF;
    IF p_catch_up IS NULL OR p_catch_up NOT IN ('latest', 'all', 'none') THEN
        PERFORM sql_refuse('catch_up', 'must be one of latest, all, none');
    END IF;
    IF p_overlap IS NULL OR p_overlap NOT IN ('allow', 'skip', 'buffer_one') THEN
        PERFORM sql_refuse('overlap', 'must be one of allow, skip, buffer_one');
    END IF;
    IF p_on_conflict IS NULL OR p_on_conflict NOT IN ('update', 'keep', 'error') THEN
        PERFORM sql_refuse('on_conflict', 'must be one of update, keep, error');
    END IF;
    RETURN jsonb_strip_nulls(jsonb_build_object(
            'name', p_name, 'type', p_type, 'cron', p_cron,
            'every', extract(epoch FROM p_every), 'rrule', p_rrule,
            'dtstart', to_char(p_dtstart, 'YYYY-MM-DD"T"HH24:MI:SS'),
            'timezone', p_timezone,
            'start_at', to_char(p_start_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'end_at', to_char(p_end_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
            'subject', p_subject, 'max_attempts', p_max_attempts, 'catch_up', p_catch_up,
            'overlap', p_overlap))
        || jsonb_build_object('payload', coalesce(p_payload, 'null'::jsonb));
END
$$;

-- The old signatures' results change (the outcome and the schedule are added; request_id,
-- schedule_name and status keep their names, so a caller reading them keeps working): they
-- are replaced, and every role granted the old ones is granted the new ones.
DROP FUNCTION add_schedule(text, text, text, jsonb, text, interval, text, timestamp, text,
    timestamptz, timestamptz, text, integer, text, text, text);
DROP FUNCTION pause_schedule(text, text);
DROP FUNCTION resume_schedule(text, text);
DROP FUNCTION remove_schedule(text, text);
DROP FUNCTION sql_schedule_change(text, text, text);
DROP FUNCTION sql_schedule_request(text, text, text, jsonb, text);

-- add_schedule: create the schedule, or bring an existing one to this definition, as
-- Schedules.add (active=None: an existing one stays paused or running as it is). A definition
-- that changes the rule (or a new one) is held until a worker has checked it and found its
-- next occurrence: status 'pending' until then.
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
    OUT request_id bigint, OUT schedule_name text, OUT status text, OUT action text,
    OUT schedule_id bigint, OUT schedule jsonb
)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    now_ timestamptz := clock_timestamp();
    held constant timestamptz := '9999-01-01 00:00:00+00';
    definition jsonb;
    cal text;
    attempts integer;
    cap integer;
    old schedules;
    new_ schedules;
    previous jsonb;
    rule_changed boolean;
    after timestamptz;
    pending boolean;
BEGIN
    PERFORM sql_allow(add_schedule.namespace);
    definition := sql_schedule_definition(add_schedule.name, add_schedule.type,
        add_schedule.payload, add_schedule.cron, add_schedule.every, add_schedule.rrule,
        add_schedule.dtstart, add_schedule.timezone, add_schedule.start_at,
        add_schedule.end_at, add_schedule.subject, add_schedule.max_attempts,
        add_schedule.catch_up, add_schedule.overlap, add_schedule.on_conflict);
    schedule_name := add_schedule.name;
    cal := CASE WHEN add_schedule.rrule IS NOT NULL THEN jsonb_build_object(
        'rrule', add_schedule.rrule, 'dtstart', definition ->> 'dtstart')::text END;
    attempts := coalesce(add_schedule.max_attempts, sql_setting('max_attempts', 20));
    FOR round_ IN 1 .. 2 LOOP
        SELECT * INTO old FROM schedules s
        WHERE s.namespace = add_schedule.namespace AND s.name = schedule_name
        FOR NO KEY UPDATE;
        EXIT WHEN FOUND;
        -- A new schedule: within max_schedules, counted after the namespace row's lock (as
        -- put_schedules counts, see namespaces.sql's lock_namespace_row).
        PERFORM 1 FROM namespaces n WHERE n.name = add_schedule.namespace FOR NO KEY UPDATE;
        cap := sql_setting('max_schedules', 1000000);
        IF (SELECT count(*) FROM (SELECT 1 FROM schedules s
                WHERE s.namespace = add_schedule.namespace LIMIT cap) AS counted) >= cap THEN
            PERFORM sql_refuse('name', format('namespace %L already has %s schedules, the most '
                'allowed (setting max_schedules); remove some first, or have the operator '
                'raise the cap', add_schedule.namespace, cap), '54000');
        END IF;
        INSERT INTO schedules AS s (namespace, name, type, payload, subject, cron, every,
            timezone, start_at, end_at, catch_up, on_gap, on_overlap, active, max_attempts,
            next_at, after_at, anchor_at, created_at, updated_at, overlap, catch_up_grace,
            calendar)
        VALUES (add_schedule.namespace, schedule_name, add_schedule.type,
            coalesce(add_schedule.payload, 'null'::jsonb), add_schedule.subject,
            add_schedule.cron, add_schedule.every, add_schedule.timezone,
            add_schedule.start_at, add_schedule.end_at, add_schedule.catch_up, 'run_after',
            'once', true, attempts, held, now_, date_trunc('second', now_) + interval '1 second',
            now_, now_, add_schedule.overlap, interval '60 seconds', cal)
        ON CONFLICT ON CONSTRAINT schedules_namespace_name_key DO NOTHING  -- (namespace, name)
        RETURNING * INTO new_;
        IF new_.id IS NOT NULL THEN
            action := 'created';
            request_id := sql_schedule_record(add_schedule.namespace, schedule_name, 'define',
                definition, add_schedule.on_conflict, action, true, new_, NULL, now_,
                'schedule_define', jsonb_build_object('schedule', schedule_name,
                    'outcome', action));
            status := 'pending';
            schedule_id := new_.id;
            schedule := sql_schedule_view(new_);
            RETURN;
        END IF;
    END LOOP;
    IF add_schedule.on_conflict = 'error' THEN
        PERFORM sql_refuse('name', format('schedule %L exists in namespace %L', schedule_name,
            add_schedule.namespace), '23505');
    END IF;
    rule_changed := (old.cron, old.every, old.timezone, old.start_at, old.end_at, old.on_gap,
            old.on_overlap, old.calendar::jsonb)
        IS DISTINCT FROM (add_schedule.cron, add_schedule.every, add_schedule.timezone,
            add_schedule.start_at, add_schedule.end_at, 'run_after', 'once', cal::jsonb);
    IF add_schedule.on_conflict = 'keep' OR (NOT rule_changed
        AND (old.type, old.payload, old.subject, old.catch_up, old.max_attempts, old.overlap,
             old.catch_up_grace)
            IS NOT DISTINCT FROM (add_schedule.type, coalesce(add_schedule.payload, 'null'),
             add_schedule.subject, add_schedule.catch_up, attempts, add_schedule.overlap,
             interval '60 seconds')) THEN
        action := 'kept';
        request_id := sql_schedule_record(add_schedule.namespace, schedule_name, 'define',
            definition, add_schedule.on_conflict, action, false, old, NULL, now_, NULL, NULL);
        status := 'applied';
        schedule_id := old.id;
        schedule := sql_schedule_view(old);
        RETURN;
    END IF;
    -- As duetime.revisions.revise: a new rule starts afresh from now; any other change keeps
    -- the sequence, and the occurrences made ahead of now are made again with the new fields.
    after := CASE WHEN rule_changed THEN now_ ELSE least(now_, old.after_at) END;
    DELETE FROM timers t
    WHERE t.schedule_id = old.id AND t.status = 'scheduled' AND t.attempts = 0
      AND t.due_at > after;
    pending := rule_changed OR after <> old.after_at OR old.next_at = held;
    previous := sql_schedule_previous(old);
    UPDATE schedules AS s
    SET type = add_schedule.type, payload = coalesce(add_schedule.payload, 'null'),
        subject = add_schedule.subject, cron = add_schedule.cron, every = add_schedule.every,
        timezone = add_schedule.timezone, start_at = add_schedule.start_at,
        end_at = add_schedule.end_at, catch_up = add_schedule.catch_up, on_gap = 'run_after',
        on_overlap = 'once', max_attempts = attempts, overlap = add_schedule.overlap,
        catch_up_grace = interval '60 seconds', calendar = cal,
        next_at = CASE WHEN pending THEN held ELSE s.next_at END, after_at = after,
        anchor_at = CASE WHEN s.every IS NOT DISTINCT FROM add_schedule.every THEN s.anchor_at
            ELSE date_trunc('second', now_) + interval '1 second' END,
        updated_at = now_, version = s.version + 1
    WHERE s.id = old.id
    RETURNING * INTO new_;
    action := 'updated';
    request_id := sql_schedule_record(add_schedule.namespace, schedule_name, 'define',
        definition, add_schedule.on_conflict, action, pending, new_, previous, now_,
        'schedule_define', jsonb_build_object('schedule', schedule_name, 'outcome', action));
    status := CASE WHEN pending THEN 'pending' ELSE 'applied' END;
    schedule_id := new_.id;
    schedule := sql_schedule_view(new_);
    IF new_.active AND NOT pending THEN  -- as save_schedule wakes the materialiser
        PERFORM sql_wake(new_.next_at, false);
    END IF;
END
$$;

-- pause_schedule and resume_schedule, as Schedules.pause and Schedules.resume: pausing
-- withdraws the occurrences made ahead of now; resuming goes on from now (the paused time is
-- not caught up). One already so is kept.
CREATE FUNCTION sql_schedule_toggle(ns text, p_name text, p_active boolean,
    OUT request_id bigint, OUT schedule_name text, OUT status text, OUT action text,
    OUT schedule_id bigint, OUT schedule jsonb)
LANGUAGE plpgsql
AS $$
DECLARE
    now_ timestamptz := clock_timestamp();
    held constant timestamptz := '9999-01-01 00:00:00+00';
    old schedules;
    new_ schedules;
    after timestamptz;
    pending boolean;
    previous jsonb;
BEGIN
    PERFORM sql_allow(ns);
    schedule_name := sql_schedule_name(p_name);
    SELECT * INTO old FROM schedules s WHERE s.namespace = ns AND s.name = schedule_name
    FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        PERFORM sql_refuse('name', format('no schedule %L in namespace %L', schedule_name, ns),
            'P0002');
    END IF;
    schedule_id := old.id;
    IF old.active = p_active THEN
        action := 'kept';
        request_id := sql_schedule_record(ns, schedule_name,
            CASE WHEN p_active THEN 'resume' ELSE 'pause' END, NULL, 'update', action, false,
            old, NULL, now_, NULL, NULL);
        status := 'applied';
        schedule := sql_schedule_view(old);
        RETURN;
    END IF;
    after := CASE WHEN p_active THEN greatest(now_, old.after_at)
        ELSE least(now_, old.after_at) END;
    IF NOT p_active THEN
        DELETE FROM timers t
        WHERE t.schedule_id = old.id AND t.status = 'scheduled' AND t.attempts = 0
          AND t.due_at > after;
    END IF;
    -- next_at is the rule's first occurrence after after_at: unmoved, it stands.
    pending := after <> old.after_at OR old.next_at = held OR old.next_at IS NULL;
    previous := sql_schedule_previous(old);
    UPDATE schedules AS s
    SET active = p_active, after_at = after,
        next_at = CASE WHEN pending THEN held ELSE s.next_at END,
        updated_at = now_, version = s.version + 1
    WHERE s.id = old.id
    RETURNING * INTO new_;
    action := CASE WHEN p_active THEN 'resumed' ELSE 'paused' END;
    request_id := sql_schedule_record(ns, schedule_name,
        CASE WHEN p_active THEN 'resume' ELSE 'pause' END, NULL, 'update', action, pending,
        new_, previous, now_, CASE WHEN p_active THEN 'schedule_resume' ELSE 'schedule_pause'
        END, jsonb_build_object('schedule', schedule_name));
    status := CASE WHEN pending THEN 'pending' ELSE 'applied' END;
    schedule := sql_schedule_view(new_);
    IF p_active AND NOT pending THEN  -- due again: the materialiser counts it from here on
        PERFORM sql_wake(new_.next_at, false);
    END IF;
END
$$;

CREATE FUNCTION pause_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text, OUT action text,
    OUT schedule_id bigint, OUT schedule jsonb)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ SELECT * FROM sql_schedule_toggle(namespace, name, false) $$;

CREATE FUNCTION resume_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text, OUT action text,
    OUT schedule_id bigint, OUT schedule jsonb)
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT
AS $$ SELECT * FROM sql_schedule_toggle(namespace, name, true) $$;

-- remove_schedule, as Schedules.delete: the schedule goes, its pending occurrences are
-- cancelled (how many: cancelled).
CREATE FUNCTION remove_schedule(namespace text, name text,
    OUT request_id bigint, OUT schedule_name text, OUT status text, OUT action text,
    OUT schedule_id bigint, OUT schedule jsonb, OUT cancelled integer)
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT
AS $$
#variable_conflict use_variable
DECLARE
    now_ timestamptz := clock_timestamp();
    old schedules;
BEGIN
    PERFORM sql_allow(remove_schedule.namespace);
    schedule_name := sql_schedule_name(remove_schedule.name);
    DELETE FROM schedules s
    WHERE s.namespace = remove_schedule.namespace AND s.name = schedule_name
    RETURNING * INTO old;
    IF old.id IS NULL THEN
        PERFORM sql_refuse('name', format('no schedule %L in namespace %L', schedule_name,
            remove_schedule.namespace), 'P0002');
    END IF;
    UPDATE timers AS t SET status = 'cancelled', completed_at = now_, updated_at = now_
    WHERE t.schedule_id = old.id AND t.status IN ('scheduled', 'retrying');
    GET DIAGNOSTICS cancelled = ROW_COUNT;
    action := 'removed';
    request_id := sql_schedule_record(remove_schedule.namespace, schedule_name, 'remove', NULL,
        'update', format('removed (%s pending occurrences cancelled)', cancelled), false, old,
        NULL, now_, 'schedule_delete',
        jsonb_build_object('schedule', schedule_name, 'cancelled', cancelled));
    status := 'applied';
    schedule_id := old.id;
    schedule := sql_schedule_view(old);
END
$$;

REVOKE EXECUTE ON FUNCTION
    sql_setting(text, integer), sql_type(text, text), sql_schedule_view(schedules),
    sql_schedule_previous(schedules),
    sql_schedule_record(text, text, text, jsonb, text, text, boolean, schedules, jsonb,
        timestamptz, text, jsonb),
    sql_schedule_definition(text, text, jsonb, text, interval, text, timestamp, text,
        timestamptz, timestamptz, text, integer, text, text, text),
    sql_schedule_toggle(text, text, boolean),
    add_schedule(text, text, text, jsonb, text, interval, text, timestamp, text, timestamptz,
        timestamptz, text, integer, text, text, text),
    pause_schedule(text, text), resume_schedule(text, text), remove_schedule(text, text)
FROM PUBLIC;

-- The roles granted the functions before keep them (duetime sql grant grants every one).
DO $$
DECLARE
    role_ name;
BEGIN
    FOR role_ IN SELECT DISTINCT g.role FROM sql_grants g
        JOIN pg_roles r ON r.rolname = g.role LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION add_schedule(text, text, text, jsonb, text, '
            'interval, text, timestamp, text, timestamptz, timestamptz, text, integer, text, '
            'text, text), pause_schedule(text, text), resume_schedule(text, text), '
            'remove_schedule(text, text) TO %I', role_);
    END LOOP;
END
$$;
