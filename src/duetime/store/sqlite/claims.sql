-- Claiming due timers in the SQLite store, and the subscriptions a claim filters by (store.py,
-- claims.py, flow_control.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: next_run_at
SELECT min(run_at) FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND (:everything
      OR (destination IS NULL AND type IN (SELECT value FROM json_each(:types)))
      OR (destination IS NULL
          AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE timers.type GLOB value))
      OR destination IN (SELECT value FROM json_each(:destinations))
      OR (destination = 'handler'
          AND type IN (SELECT value FROM json_each(:handler_types))))

-- name: claim_due
-- The node's subscriptions filter the pending rows: events (no destination) of a type it takes,
-- exact or by GLOB pattern (event types hold no GLOB metacharacter but *); deliveries to a
-- destination it serves ('handler' = routes.HANDLER: only for types it has a handler for).
-- Plain ORs, cheapest first: a CASE costs the single-handler fast path more per row.
-- include: claim_mark
-- Priority (migration 0010): the urgent due rows (priority above 0, through timers_urgent, an
-- empty index while every timer is normal), highest first, then the normal ones in run_at
-- order through timers_pending; of at most twice :limit candidates the first :limit are taken.
WHERE id IN (
    SELECT id FROM (
        SELECT * FROM (
            SELECT id, priority, run_at FROM timers
            WHERE namespace = :namespace AND priority > 0
              AND status IN ('scheduled', 'retrying') AND run_at <= :due_by
              AND
              -- include: claim_subscribed
            ORDER BY priority DESC, run_at
            LIMIT :limit
        )
        UNION ALL
        SELECT * FROM (
            SELECT id, 0, run_at FROM timers
            WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
              AND run_at <= :due_by AND priority = 0
              AND
              -- include: claim_subscribed
            ORDER BY run_at
            LIMIT :limit
        )
    )
    ORDER BY priority DESC, run_at
    LIMIT :limit
)
-- include: claim_returning

-- name: claim_subscribed
-- The node's subscriptions (_claim_params), as claim_due, claim_ruled and next_run_ruled filter
-- the pending rows.
(:everything
    OR (destination IS NULL AND type IN (SELECT value FROM json_each(:types)))
    OR (destination IS NULL
        AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE timers.type GLOB value))
    OR destination IN (SELECT value FROM json_each(:destinations))
    OR (destination = 'handler'
        AND type IN (SELECT value FROM json_each(:handler_types))))

-- name: rule_destination
-- Of the deliveries, a destination's rule takes those to :dest alone; every other rule, and the
-- claim of the rows no rule governs, leaves alone those to the destinations with rules of their
-- own (the JSON array :dest_excluded). See the PostgreSQL store's rule_destination.
((:dest IS NULL OR destination = :dest)
    AND NOT EXISTS (SELECT 1 FROM json_each(:dest_excluded) WHERE timers.destination = value))

-- name: claim_mark
-- The rows are those due by :due_by, which may lie ahead (rows claimed ahead of their instants
-- are held until then); updated_at, and the claimed_at of the attempts it opens, is :now, the
-- claim's own instant, which comes before any attempt's start.
UPDATE timers
SET status = 'running',
    attempts = attempts + 1,
    lease_owner = :node_id,
    lease_expires_at = :lease_until,
    updated_at = :now,
    claim_token = :claim_token

-- name: claim_returning
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority

-- name: claim_ruled
-- claim_due under flow control (duetime.model.flow_rules): only the types GLOB :only and none of
-- those GLOB one of :excluded (a JSON array: more specific limits, pauses). Run inside the
-- write transaction that reads and updates the limit's row.
-- include: claim_mark
WHERE id IN (
    SELECT id FROM (
        SELECT * FROM (
            SELECT id, priority, run_at FROM timers
            WHERE namespace = :namespace AND priority > 0
              AND status IN ('scheduled', 'retrying') AND run_at <= :due_by
              AND type GLOB :only
              AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
              AND
              -- include: rule_destination
              AND
              -- include: claim_subscribed
            ORDER BY priority DESC, run_at
            LIMIT :limit
        )
        UNION ALL
        SELECT * FROM (
            SELECT id, 0, run_at FROM timers
            WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
              AND run_at <= :due_by AND priority = 0
              AND type GLOB :only
              AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
              AND
              -- include: rule_destination
              AND
              -- include: claim_subscribed
            ORDER BY run_at
            LIMIT :limit
        )
    )
    ORDER BY priority DESC, run_at
    LIMIT :limit
)
-- include: claim_returning

-- name: claim_partitioned
-- claim_ruled for a limit with partition_by: at most :concurrency running per partition key (the
-- subject, or the payload field :field), ranked within their key after those running, among
-- the oldest :scan due rows (see the PostgreSQL store's claim_partitioned).
-- include: claim_mark
WHERE id IN (
    WITH running AS (
        SELECT CASE WHEN :field IS NULL THEN subject
                ELSE json_extract(payload, '$."' || :field || '"') END AS part,
            count(*) AS n
        FROM timers
        WHERE status = 'running' AND namespace = :namespace AND type GLOB :only
          AND NOT EXISTS (SELECT 1 FROM json_each(:shadows) WHERE timers.type GLOB value)
          AND
          -- include: rule_destination
        GROUP BY 1
    ),
    candidates AS (
        SELECT id, run_at,
            CASE WHEN :field IS NULL THEN subject
                ELSE json_extract(payload, '$."' || :field || '"') END AS part
        FROM timers
        WHERE namespace = :namespace AND status IN ('scheduled', 'retrying') AND run_at <= :due_by
          AND type GLOB :only
          AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
          AND
          -- include: rule_destination
          AND
          -- include: claim_subscribed
        ORDER BY run_at
        LIMIT :scan
    ),
    ranked AS (
        SELECT c.id, c.run_at,
            row_number() OVER (PARTITION BY c.part ORDER BY c.run_at) + coalesce(r.n, 0) AS place
        FROM candidates c LEFT JOIN running r ON r.part IS c.part
    )
    SELECT id FROM ranked WHERE place <= :concurrency ORDER BY run_at LIMIT :limit
)
-- include: claim_returning

-- name: next_run_ruled
SELECT min(run_at) FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND type GLOB :only
  AND NOT EXISTS (SELECT 1 FROM json_each(:excluded) WHERE timers.type GLOB value)
  AND
  -- include: rule_destination
  AND
  -- include: claim_subscribed

-- name: open_attempts
-- :batch is a JSON array of [timer id, attempt number] pairs. The attempt has no start until its
-- outcome reports one: :now is the claim's instant.
INSERT INTO attempts (timer_id, number, node_id, claimed_at)
SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), :node_id, :now
FROM json_each(:batch)

-- name: sweep_unsubscribed
-- Of the oldest pending rows overdue by the grace (at most :limit, so a backlog never makes it
-- a long scan: rows no one takes stay at the old end of the index, where the next sweep finds
-- them), those no live node's subscriptions take (the claim_due filter is not true) are dead,
-- with the reason.
UPDATE timers
SET status = 'dead', completed_at = :now, updated_at = :now,
    last_error = CASE WHEN destination IS NULL
        THEN 'no subscriber for type ' || type
        ELSE 'no node serves destination ' || destination || ' (type ' || type || ')'
    END
WHERE id IN (
    SELECT id FROM (
        SELECT id, type, destination FROM timers
        WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
          AND run_at < :before
        ORDER BY run_at
        LIMIT :limit
    ) AS oldest
    WHERE (:everything
        OR (oldest.destination IS NULL AND oldest.type IN (SELECT value FROM json_each(:types)))
        OR (oldest.destination IS NULL
            AND EXISTS (SELECT 1 FROM json_each(:patterns) WHERE oldest.type GLOB value))
        OR oldest.destination IN (SELECT value FROM json_each(:destinations))
        OR (oldest.destination = 'handler'
            AND oldest.type IN (SELECT value FROM json_each(:handler_types)))
    ) IS NOT TRUE
)
RETURNING id

-- name: unsubscribed_types
-- The pending rows no live node's subscriptions take (the claim_due filter is not true), by
-- type, most first: what waits for a subscriber, as the overview shows it.
SELECT type, count(*) AS count FROM timers
WHERE namespace = :namespace AND status IN ('scheduled', 'retrying')
  AND
  -- include: claim_subscribed
  IS NOT TRUE
GROUP BY type
ORDER BY count DESC, type
LIMIT :limit
