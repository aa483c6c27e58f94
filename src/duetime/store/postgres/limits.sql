-- Limits and pauses of the PostgreSQL store (limits.py). Each block's name is the method that runs
-- it.
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

-- name: count_by_type
-- What every rule of a namespace holds (limits ls), in one statement whatever the number of
-- rules: attempts running (through the index of leased rows) and due rows waiting, per type
-- and destination (the rules are matched to the types in Python, duetime.model.limits.tally).
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
