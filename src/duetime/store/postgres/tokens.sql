-- All SQL of the tokens part (duetime.store.tokens.Tokens): each block's name is the method
-- that runs it.
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: add_token
INSERT INTO tokens (name, hash, namespaces, read_only, created_at)
VALUES (%(name)s, %(hash)s, %(namespaces)s, %(read_only)s, %(now)s)
RETURNING *

-- name: find_token
SELECT * FROM tokens WHERE hash = %(hash)s AND revoked_at IS NULL

-- name: list_tokens
SELECT * FROM tokens WHERE %(include_revoked)s OR revoked_at IS NULL ORDER BY id

-- name: get_token
SELECT * FROM tokens WHERE id = %(id)s

-- name: revoke_token
UPDATE tokens SET revoked_at = %(now)s WHERE id = %(id)s AND revoked_at IS NULL
RETURNING *

-- name: touch_token
UPDATE tokens SET last_used_at = %(now)s WHERE id = %(id)s

-- name: has_issued_tokens
SELECT EXISTS (SELECT 1 FROM tokens) AS issued
