-- The nodes of the PostgreSQL store (working.py). Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: register_node
INSERT INTO nodes (
    id, host, pid, role, started_at, heartbeat_at, in_flight, subscriptions, clock_offset_ms
)
VALUES (
    %(id)s, %(host)s, %(pid)s, %(role)s, %(started_at)s, %(heartbeat_at)s, %(in_flight)s,
    %(subscriptions)s, %(clock_offset_ms)s
)
ON CONFLICT (id) DO UPDATE SET
    heartbeat_at = excluded.heartbeat_at, subscriptions = excluded.subscriptions,
    clock_offset_ms = excluded.clock_offset_ms

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = %(now)s, in_flight = %(in_flight)s,
    clock_offset_ms = coalesce(%(clock_offset_ms)s, clock_offset_ms)
WHERE id = %(node_id)s

-- name: extend_leases
-- Locks the node's rows in id order, as finish does, so the two never deadlock. Rows locked by
-- a transactional handler still running are skipped: rescue skips them too, so they stay ours.
-- Each row is renewed only under the claim the node holds it by (its token, NULL: any): a
-- heartbeat of a claim the database forgot never keeps alive the claim that replaced it.
UPDATE timers SET lease_expires_at = %(lease_until)s
FROM (
    SELECT id FROM timers
    WHERE lease_owner = %(node_id)s AND status = 'running' AND id = ANY(%(held)s::bigint[])
      AND EXISTS (
          SELECT FROM unnest(%(held)s::bigint[], %(tokens)s::bigint[]) AS h (id, claim_token)
          WHERE h.id = timers.id
            AND (h.claim_token IS NULL OR h.claim_token = timers.claim_token)
      )
    ORDER BY id
    FOR UPDATE SKIP LOCKED
) AS mine
WHERE timers.id = mine.id AND timers.status = 'running'

-- name: deregister_node
DELETE FROM nodes WHERE id = %(node_id)s

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at
