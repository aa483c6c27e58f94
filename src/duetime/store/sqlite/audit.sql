-- All SQL of the audit part (duetime.store.audit.AuditLog): each block's name is the method
-- that runs it.
-- Instants are integer microseconds since the epoch, UTC; target is JSON text.

-- name: record
INSERT INTO audit_log (namespace, at, actor, via, action, target, count)
VALUES (:namespace, :at, :actor, :via, :action, :target, :count)

-- name: list_entries
-- Newest first, before the cursor's id: a keyset walk of audit_log_listing.
SELECT * FROM audit_log
WHERE namespace = :namespace AND id < :before_id
ORDER BY id DESC
LIMIT :limit

-- name: prune
-- One batch of the entries older than :before, oldest first through audit_log_at.
DELETE FROM audit_log
WHERE id IN (SELECT id FROM audit_log WHERE at < :before ORDER BY at, id LIMIT :limit)
RETURNING id
