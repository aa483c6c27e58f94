-- Who may use the SQL functions of migration 0029 (sql_access.py). Each block's name is the
-- method that runs it, or the step of one.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; {schema} and {role} are identifiers given by sql.py.

-- name: role_exists
SELECT 1 FROM pg_roles WHERE rolname = %(role)s

-- name: missing_namespaces
SELECT given.name FROM unnest(%(namespaces)s::text[]) AS given (name)
WHERE NOT EXISTS (SELECT 1 FROM namespaces WHERE namespaces.name = given.name)
ORDER BY given.name

-- name: public_functions
-- The functions a granted role calls, as each version of the schema defines them (every
-- signature of each name, so an old one kept for compatibility is granted too).
SELECT p.oid::regprocedure::text AS signature
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s
  AND p.proname IN ('schedule', 'emit', 'cancel', 'schedule_many', 'schedule_columns',
      'add_schedule',
      'pause_schedule', 'resume_schedule', 'remove_schedule', 'schedule_request')
ORDER BY p.proname, p.oid

-- name: grant_usage
GRANT USAGE ON SCHEMA {schema} TO {role}

-- name: grant_execute
GRANT EXECUTE ON FUNCTION {function} TO {role}

-- name: record_grants
INSERT INTO sql_grants (role, namespace, granted_at)
SELECT %(role)s, given.name, %(now)s FROM unnest(%(namespaces)s::text[]) AS given (name)
ON CONFLICT (role, namespace) DO NOTHING

-- name: revoke_sql
DELETE FROM sql_grants WHERE role = %(role)s AND namespace = ANY (%(namespaces)s::text[])

-- name: sql_grants
SELECT role::text AS role, namespace FROM sql_grants ORDER BY role, namespace

-- name: pending_schedule_requests
-- Schedule changes made from SQL (migration 0030), oldest first, for a worker to apply.
SELECT id, namespace, name, action, request, on_conflict, requested_by, schedule_version, outcome
FROM sql_schedule_requests
WHERE status = 'pending'
ORDER BY id
LIMIT %(limit)s

-- name: finish_schedule_request
-- The first worker to finish a request records its outcome; another's finds it done.
UPDATE sql_schedule_requests
SET status = %(status)s, outcome = %(outcome)s, applied_at = %(now)s
WHERE id = %(id)s AND status = 'pending'

-- name: previous_schedule
-- The schedule row as it was planned before a request changed it (migration 0031), as a row of
-- the schedules table.
SELECT (jsonb_populate_record(NULL::schedules, previous)).*
FROM sql_schedule_requests
WHERE id = %(id)s AND previous IS NOT NULL

-- name: keep_settings
-- The app's settings the SQL functions obey (meta sql.<name>), written only where they differ.
INSERT INTO meta (key, value, updated_at)
SELECT 'sql.' || given.name, given.value, %(now)s
FROM unnest(%(names)s::text[], %(values)s::text[]) AS given (name, value)
ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
WHERE meta.value IS DISTINCT FROM excluded.value
