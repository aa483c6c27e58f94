-- All SQL of the tokens part (duetime.store.tokens.Tokens): each block's name is the method
-- that runs it.
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: lock_tokens
-- Sent before add_token, in its transaction: capped creations of tokens run one at a time (per
-- schema), so the count of the next one, a later statement, sees the token of the one before.
SELECT pg_advisory_xact_lock(hashtextextended(%(lock)s, 0))

-- name: add_token
-- No row when %(cap)s tokens are active already (counted no further: NULL, no cap), or when a
-- token, revoked ones too, has the name already (the lock above orders racing creations).
INSERT INTO tokens (name, hash, namespaces, read_only, created_at)
SELECT %(name)s, %(hash)s, %(namespaces)s, %(read_only)s, %(now)s
WHERE (%(cap)s::bigint IS NULL
       OR (SELECT count(*) FROM (SELECT 1 FROM tokens WHERE revoked_at IS NULL
                                 LIMIT %(cap)s::bigint) active) < %(cap)s::bigint)
  AND NOT EXISTS (SELECT 1 FROM tokens WHERE name = %(name)s::text)
RETURNING *

-- name: token_named
SELECT * FROM tokens WHERE name = %(name)s ORDER BY id LIMIT 1

-- name: find_token
SELECT * FROM tokens WHERE hash = %(hash)s AND revoked_at IS NULL

-- name: list_tokens
-- Oldest first, after the id %(after)s, at most %(limit)s (NULL: all): a walk of the key.
SELECT * FROM tokens
WHERE id > %(after)s AND (%(include_revoked)s OR revoked_at IS NULL)
ORDER BY id
LIMIT %(limit)s

-- name: get_token
SELECT * FROM tokens WHERE id = %(id)s

-- name: revoke_token
UPDATE tokens SET revoked_at = %(now)s WHERE id = %(id)s AND revoked_at IS NULL
RETURNING *

-- name: touch_token
UPDATE tokens SET last_used_at = %(now)s WHERE id = %(id)s

-- name: has_issued_tokens
SELECT EXISTS (SELECT 1 FROM tokens) AS issued
