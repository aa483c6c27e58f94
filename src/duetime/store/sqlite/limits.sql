-- Limits and pauses of the SQLite store (limits.py). Each block's name is the method that runs it.
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

-- name: count_by_type
-- What every rule of a namespace holds (limits ls), in one statement whatever the number of
-- rules: attempts running and due rows waiting, per type and destination (the rules are
-- matched to the types in Python, duetime.model.limits.tally).
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
