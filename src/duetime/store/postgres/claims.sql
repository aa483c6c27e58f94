-- Claiming due timers in the PostgreSQL store, and the subscriptions a claim filters by
-- (working.py, flow_control.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

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
-- The claim commits without waiting for its WAL to reach the disk (claim_commit 'off'; 'on' with
-- the URL's durable_claims=true, for a cluster that fails over: see settings.py). A claim is the
-- one write that may be lost: if the server crashes before the flush (a fraction of a second), the timers are
-- pending again after its restart and run again, which at-least-once delivery allows, as it
-- allows a re-run after a crash during the handler; every outcome is committed durably, and
-- its flush carries the claim's WAL with it. At 10 million pending the flush of the pages a
-- claim first touched after a checkpoint was a fifth of the claim's time.
SELECT set_config('enable_sort', 'off', true) AS enable_sort,
       set_config('enable_hashjoin', 'off', true) AS hashjoin,
       set_config('enable_mergejoin', 'off', true) AS mergejoin,
       set_config('plan_cache_mode', 'force_generic_plan', true) AS generic,
       set_config('synchronous_commit', %(claim_commit)s, true) AS claim_commit

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
      AND run_at <= %(due_by)s
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
      AND run_at <= %(due_by)s
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
-- What a claim does to the rows of its CTE due (claim_due, claim_ruled). The rows are those due
-- by %(due_by)s, which may lie ahead (rows claimed ahead of their instants are held until
-- then); claimed_at and updated_at are %(now)s, the claim's own instant, which comes before
-- any attempt's start.
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
-- claim_due under flow control (duetime.model.flow_rules): only the types LIKE %(only)s and none of
-- those LIKE one of %(excluded)s (more specific limits, pauses). A limit's claim runs with the
-- limit's row locked (lock_limit) and takes at most what the limit allows; the claim of the
-- types no rule governs passes '%%' and every governed pattern. Held-back rows stay pending, in
-- the index, and are stepped over.
-- Urgent rows first, as in claim_due.
WITH urgent AS (
    SELECT ctid FROM timers
    WHERE namespace = %(namespace)s
      AND priority > 0 AND status IN ('scheduled', 'retrying')
      AND run_at <= %(due_by)s
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
      AND run_at <= %(due_by)s
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
      AND run_at <= %(due_by)s
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

-- name: give_back_claim
-- The rows of a claim (by its token) that could not be read after it committed, back as they
-- were before it: pending, the attempt not counted.
UPDATE timers
SET status = CASE WHEN attempts > 1 THEN 'retrying' ELSE 'scheduled' END,
    attempts = attempts - 1,
    lease_owner = NULL, lease_expires_at = NULL, claim_token = NULL, updated_at = %(now)s
WHERE lease_owner = %(node_id)s AND claim_token = %(claim_token)s AND status = 'running'
RETURNING id

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
