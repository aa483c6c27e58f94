-- The nodes of the SQLite store (store.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: register_node
INSERT INTO nodes (id, host, pid, role, started_at, heartbeat_at, in_flight, subscriptions)
VALUES (:id, :host, :pid, :role, :started_at, :heartbeat_at, :in_flight, :subscriptions)
ON CONFLICT (id) DO UPDATE SET
    heartbeat_at = excluded.heartbeat_at, subscriptions = excluded.subscriptions

-- name: heartbeat_node
UPDATE nodes SET heartbeat_at = :now, in_flight = :in_flight WHERE id = :node_id

-- name: extend_leases
-- :held is a JSON array of [timer id, claim token] pairs: each row is renewed only under the
-- claim the node holds it by (a NULL token: any), as on PostgreSQL.
UPDATE timers SET lease_expires_at = :lease_until
WHERE lease_owner = :node_id AND status = 'running'
  AND id IN (SELECT json_extract(value, '$[0]') FROM json_each(:held))
  AND EXISTS (
      SELECT 1 FROM json_each(:held) AS h
      WHERE json_extract(h.value, '$[0]') = timers.id
        AND (json_extract(h.value, '$[1]') IS NULL
            OR json_extract(h.value, '$[1]') = timers.claim_token)
  )

-- name: deregister_node
DELETE FROM nodes WHERE id = ?

-- name: list_nodes
SELECT * FROM nodes ORDER BY started_at
