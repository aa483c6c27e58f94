-- The SQLite store's history: pruning, events, activity and charts (history.py). Each block's
-- name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: history_namespaces
-- Every namespace with fired or finished timers, one probe of timers_events each (a loose scan:
-- DISTINCT would read the whole index on the thread every call waits for).
WITH RECURSIVE found (namespace) AS (
    SELECT (SELECT namespace FROM timers WHERE coalesce(fired_at, completed_at) IS NOT NULL
            ORDER BY namespace LIMIT 1)
    UNION ALL
    SELECT (SELECT namespace FROM timers
            WHERE namespace > found.namespace AND coalesce(fired_at, completed_at) IS NOT NULL
            ORDER BY namespace LIMIT 1)
    FROM found WHERE found.namespace IS NOT NULL
)
SELECT namespace FROM found WHERE namespace IS NOT NULL

-- name: prune_candidates
-- One batch of timers that finished before :delete_before (dead letters too), walking the
-- namespace's timers_events from where the previous batch stopped.
SELECT id, coalesce(fired_at, completed_at) AS event_at FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) < :delete_before
  AND (coalesce(fired_at, completed_at), id) > (:after_at, :after_id)
  AND completed_at < :delete_before
ORDER BY coalesce(fired_at, completed_at), id
LIMIT :limit

-- name: prune_timers
-- Their attempts go with them (ON DELETE CASCADE). The newest row is always kept: SQLite gives a
-- new row max(id) + 1, and an id must never be reused (deliveries carry it for deduplication).
DELETE FROM timers
WHERE id IN (SELECT value FROM json_each(:ids))
  AND id < (SELECT max(id) FROM timers)

-- name: list_events
-- The event log: timers that fired, newest fired_at first (coalesce(...) is fired_at for them;
-- written so, timers_events serves the order and the bounds).
SELECT * FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND (coalesce(fired_at, completed_at), id) < (:before_at, :before_id)
  AND fired_at IS NOT NULL
  AND (:type_glob IS NULL OR type GLOB :type_glob)
ORDER BY coalesce(fired_at, completed_at) DESC, id DESC
LIMIT :limit

-- name: list_deliveries
SELECT * FROM attempts WHERE timer_id IN (SELECT value FROM json_each(:ids))
ORDER BY timer_id, number

-- name: activity
-- Timers that fired in [since, until), by minute and status, through timers_events; lateness
-- is fired_at - due_at (the first attempt's start against the due time), in milliseconds.
SELECT (coalesce(fired_at, completed_at) - :since) / 60000000 AS minute, status,
    count(*) AS count,
    sum(fired_at - due_at) / 1000.0 AS lateness_sum_ms,
    max(fired_at - due_at) / 1000.0 AS lateness_max_ms
FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND fired_at IS NOT NULL
GROUP BY minute, status

-- name: chart_rows
-- The timers whose first attempt started in [since, until) (fired_at: the true start), through
-- timers_events; of a type (glob), and whose first attempt ran on a node, when asked.
FROM timers
WHERE namespace = :namespace
  AND coalesce(fired_at, completed_at) >= :since
  AND coalesce(fired_at, completed_at) < :until
  AND fired_at >= :since AND fired_at < :until
  AND (:type_glob IS NULL OR type GLOB :type_glob)
  AND (:node IS NULL
       OR (SELECT node_id FROM attempts WHERE timer_id = timers.id AND number = 1) = :node)

-- name: chart_throughput
-- chart_rows by bucket (of :bucket microseconds from :since) and status now.
SELECT (fired_at - :since) / :bucket AS bucket, status, count(*) AS count
  -- include: chart_rows
GROUP BY bucket, status

-- name: chart_lateness
-- Each bucket's lateness (fired_at - due_at) ranked in order, and per percentile the value at
-- rank floor(p * (n - 1)) and the next: what percentile_cont interpolates between (the store
-- finishes it: charts.interpolated). Exact, from the bucket's ordered rows.
WITH late AS (
    SELECT (fired_at - :since) / :bucket AS bucket, fired_at - due_at AS late_us
    -- include: chart_rows
), ranked AS (
    SELECT bucket, late_us / 1000.0 AS ms,
        row_number() OVER (PARTITION BY bucket ORDER BY late_us) - 1 AS rank,
        count(*) OVER (PARTITION BY bucket) AS n
    FROM late
)
SELECT bucket, n,
    max(CASE WHEN rank = CAST(0.5 * (n - 1) AS INTEGER) THEN ms END) AS p50_low,
    max(CASE WHEN rank = CAST(0.5 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p50_high,
    max(CASE WHEN rank = CAST(0.95 * (n - 1) AS INTEGER) THEN ms END) AS p95_low,
    max(CASE WHEN rank = CAST(0.95 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p95_high,
    max(CASE WHEN rank = CAST(0.99 * (n - 1) AS INTEGER) THEN ms END) AS p99_low,
    max(CASE WHEN rank = CAST(0.99 * (n - 1) AS INTEGER) + 1 THEN ms END) AS p99_high,
    max(ms) AS max_ms
FROM ranked
GROUP BY bucket, n
