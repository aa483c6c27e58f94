-- A worker's outcomes, fan-outs and lost leases in the PostgreSQL store (working.py,
-- transactions.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

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
    -- the handler began, as the worker reported it (NULL when not given: not known). A claim
    -- made by an earlier version wrote its horizon there, which may come after the start: the
    -- start is then the claimed_at recorded (an attempt is claimed before it starts).
    SELECT f.*, least(t.claimed_at, f.began_at) AS claimed_at, f.began_at AS started_at
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

-- name: rescue
-- Leases that ran out: the attempt is lost; the timer retries, or is dead when out of
-- attempts. Rows another node is rescuing (or finishing) right now are skipped, not waited on.
-- The lost attempt's start was never reported: it has none (its claim's instant is kept).
-- The retry is due now, or at the row's own instant when that is still ahead: a row claimed
-- ahead (held by its node until then) must not start earlier on another node.
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
        run_at = greatest(timers.run_at, %(now)s),
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
    -- (claimed_at never after the start: see finish)
    SELECT f.*, least(t.claimed_at, %(now)s::timestamptz) AS claimed_at,
        %(now)s::timestamptz AS started_at
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
