-- All SQL of the audit part (duetime.store.audit.AuditLog): each block's name is the method
-- that runs it.
-- Placeholders are psycopg's %(name)s; instants are timestamptz, target is jsonb.

-- name: record
INSERT INTO audit_log (namespace, at, actor, via, action, target, count)
VALUES (%(namespace)s, %(at)s, %(actor)s, %(via)s, %(action)s, %(target)s::jsonb, %(count)s)

-- name: list_entries
-- Newest first, before the cursor's id: a keyset walk of audit_log_listing.
SELECT * FROM audit_log
WHERE namespace = %(namespace)s AND id < %(before_id)s
ORDER BY id DESC
LIMIT %(limit)s

-- name: prune
-- One batch of the entries older than before, oldest first through audit_log_at.
DELETE FROM audit_log
WHERE id IN (SELECT id FROM audit_log WHERE at < %(before)s ORDER BY at, id LIMIT %(limit)s)
RETURNING id
