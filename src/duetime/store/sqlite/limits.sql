-- Limits and pauses of the SQLite store (flow_control.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: get_limit
SELECT concurrency, rate_count, rate_period_us, burst, partition_by, tat, recent_at,
    recent_tat, recent_count, earlier_tat, earlier_count, marks_tat
FROM flow_limits
WHERE namespace = :namespace AND pattern = :pattern
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)

-- name: count_leased
SELECT count(*) FROM timers
WHERE status = 'running' AND namespace = :namespace AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination

-- name: spend_tokens
-- A rate's new state: its TAT, and its marks counted up to it (marks_tat).
UPDATE flow_limits
SET tat = :tat, recent_at = :recent_at, recent_tat = :recent_tat, recent_count = :recent_count,
    earlier_tat = :earlier_tat, earlier_count = :earlier_count, marks_tat = :tat
WHERE namespace = :namespace AND pattern = :pattern

-- name: held_by_rule
SELECT count(*) AS held, min(run_at) AS oldest FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
  AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination

-- name: list_limits
SELECT * FROM flow_limits WHERE namespace = :namespace ORDER BY pattern

-- name: limit_room
-- Whether the pattern has a row already, and how many rules of types the namespace holds (a
-- new one must stay within the cap; a destination's rate is configuration, not counted).
SELECT EXISTS (SELECT 1 FROM flow_limits WHERE namespace = :namespace AND pattern = :pattern)
        AS present,
    (SELECT count(*) FROM flow_limits WHERE namespace = :namespace AND destination IS NULL)
        AS rules

-- name: tally_rules
-- What each rule of one page holds (limits ls), counted here whatever the number of types: the
-- rows running and due are grouped by type and destination once, each group goes to the rule
-- that governs it, and only the page's rules come back, one row each. :limits is the JSON array
-- of every limit's pattern, most specific first (the first that matches governs a type);
-- :by_destination maps each destination with a rule to that rule's pattern (its deliveries are
-- that rule's alone); :shown is the page, [[pattern, pauses only (0/1)], ...] in order. A rule
-- that only pauses counts every row of a type it matches, not a destination rule's. See
-- duetime.model.flow_rules.FlowPlan.counted_by, the same rows a claim takes.
WITH counts AS MATERIALIZED (
    SELECT type, destination, sum(running) AS running, sum(held) AS held, min(oldest) AS oldest
    FROM (
        SELECT type, destination, count(*) AS running, 0 AS held, NULL AS oldest FROM timers
        WHERE status = 'running' AND namespace = :namespace
        GROUP BY type, destination
        UNION ALL
        SELECT type, destination, 0, count(*), min(run_at) FROM timers
        WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :now
        GROUP BY type, destination
    )
    GROUP BY type, destination
),
limits AS MATERIALIZED (
    SELECT key AS rank, value AS pattern FROM json_each(:limits)
),
owned AS MATERIALIZED (
    SELECT c.type, c.running, c.held, c.oldest, d.value IS NOT NULL AS delivered,
        coalesce(d.value, (SELECT l.pattern FROM limits AS l
                           WHERE c.type GLOB l.pattern ORDER BY l.rank LIMIT 1)) AS governor
    FROM counts AS c
    LEFT JOIN json_each(:by_destination) AS d ON d.key = c.destination
),
shown AS (
    SELECT key AS idx, json_extract(value, '$[0]') AS pattern,
        json_extract(value, '$[1]') AS pauses_only
    FROM json_each(:shown)
),
matched AS (
    SELECT s.idx, o.running, o.held, o.oldest
    FROM shown AS s JOIN owned AS o ON o.governor = s.pattern
    WHERE NOT s.pauses_only
    UNION ALL
    SELECT s.idx, o.running, o.held, o.oldest
    FROM shown AS s JOIN owned AS o ON o.type GLOB s.pattern AND NOT o.delivered
    WHERE s.pauses_only
),
totals AS (
    SELECT idx, sum(running) AS running, sum(held) AS held, min(oldest) AS oldest
    FROM matched GROUP BY idx
)
SELECT s.pattern, coalesce(t.running, 0) AS running, coalesce(t.held, 0) AS held,
    t.oldest
FROM shown AS s LEFT JOIN totals AS t ON t.idx = s.idx
ORDER BY s.idx

-- name: put_limit
INSERT INTO flow_limits (namespace, pattern, concurrency, rate_count, rate_period_us, burst,
    partition_by, destination, updated_at)
VALUES (:namespace, :pattern, :concurrency, :rate_count, :rate_period_us, :burst,
    :partition_by, :destination, :now)
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
    earlier_tat = NULL, earlier_count = NULL, marks_tat = NULL, updated_at = :now
WHERE namespace = :namespace AND pattern = :pattern
  AND (concurrency IS NOT NULL OR rate_count IS NOT NULL)
RETURNING *

-- name: set_paused
INSERT INTO flow_limits (namespace, pattern, paused, updated_at)
VALUES (:namespace, :pattern, :paused, :now)
ON CONFLICT (namespace, pattern) DO UPDATE
SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING *

-- name: prune_limits
DELETE FROM flow_limits
WHERE namespace = :namespace AND pattern = :pattern
  AND NOT paused AND concurrency IS NULL AND rate_count IS NULL
