-- Limits and pauses of the PostgreSQL store (flow_control.py). Each block's name is the method
-- that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: lock_limit
-- A limit's row, locked until its claim's transaction ends: claims of the types it governs run
-- one at a time on every node (other claims do not wait), and read the database's clock.
SELECT concurrency, rate_count, rate_period_us, burst, partition_by, tat, recent_at,
    recent_tat, recent_count, earlier_tat, earlier_count, marks_tat, clock_timestamp() AS db_now
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
-- A rate's new state: its TAT, and its marks counted up to it (marks_tat).
UPDATE flow_limits
SET tat = %(tat)s, recent_at = %(recent_at)s, recent_tat = %(recent_tat)s,
    recent_count = %(recent_count)s, earlier_tat = %(earlier_tat)s,
    earlier_count = %(earlier_count)s, marks_tat = %(tat)s
WHERE namespace = %(namespace)s AND pattern = %(pattern)s

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

-- name: tally_rules
-- What each rule of one page holds (limits ls), counted here whatever the number of types: the
-- rows running (through the index of leased rows) and due are grouped by type and destination
-- once, each group goes to the rule that governs it, and only the page's rules come back, one
-- row each. %(limits)s are every limit's pattern, most specific first, %(limit_likes)s the
-- same as LIKE patterns (the first that matches governs a type); each of %(destinations)s has
-- a rule, its pattern at the same place in %(destination_rules)s (its deliveries are that
-- rule's alone); %(shown)s (%(shown_likes)s) is the page, %(pauses_only)s whether each rule
-- only pauses: it counts every row of a type it matches, not a destination rule's. See
-- duetime.model.flow_rules.FlowPlan.counted_by, the same rows a claim takes.
WITH counts AS MATERIALIZED (
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
),
owned AS MATERIALIZED (
    SELECT c.type, c.running, c.held, c.oldest, d.pattern IS NOT NULL AS delivered,
        coalesce(d.pattern, (
            SELECT l.pattern
            FROM unnest(%(limits)s::text[], %(limit_likes)s::text[]) WITH ORDINALITY
                AS l(pattern, likeness, rank)
            WHERE c.type LIKE l.likeness
            ORDER BY l.rank
            LIMIT 1)) AS governor
    FROM counts AS c
    LEFT JOIN unnest(%(destinations)s::text[], %(destination_rules)s::text[])
        AS d(destination, pattern) ON d.destination = c.destination
),
shown AS (
    SELECT * FROM unnest(%(shown)s::text[], %(shown_likes)s::text[], %(pauses_only)s::bool[])
        WITH ORDINALITY AS s(pattern, likeness, pauses_only, idx)
),
matched AS (
    SELECT s.idx, o.running, o.held, o.oldest
    FROM shown AS s JOIN owned AS o ON o.governor = s.pattern
    WHERE NOT s.pauses_only
    UNION ALL
    SELECT s.idx, o.running, o.held, o.oldest
    FROM shown AS s JOIN owned AS o ON o.type LIKE s.likeness AND NOT o.delivered
    WHERE s.pauses_only
),
totals AS (
    SELECT idx, sum(running) AS running, sum(held) AS held, min(oldest) AS oldest
    FROM matched GROUP BY idx
)
SELECT s.pattern, coalesce(t.running, 0)::bigint AS running, coalesce(t.held, 0)::bigint AS held,
    t.oldest
FROM shown AS s LEFT JOIN totals AS t ON t.idx = s.idx
ORDER BY s.idx

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
    partition_by = NULL, tat = NULL, recent_at = NULL, recent_tat = NULL, recent_count = NULL,
    earlier_tat = NULL, earlier_count = NULL, marks_tat = NULL, updated_at = %(now)s
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
