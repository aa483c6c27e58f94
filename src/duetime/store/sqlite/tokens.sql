-- All SQL of the tokens part (duetime.store.tokens.Tokens): each block's name is the method
-- that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: add_token
INSERT INTO tokens (name, hash, namespaces, read_only, created_at)
VALUES (:name, :hash, :namespaces, :read_only, :now)
RETURNING *

-- name: find_token
SELECT * FROM tokens WHERE hash = :hash AND revoked_at IS NULL

-- name: list_tokens
SELECT * FROM tokens WHERE :include_revoked OR revoked_at IS NULL ORDER BY id

-- name: get_token
SELECT * FROM tokens WHERE id = :id

-- name: revoke_token
UPDATE tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL
RETURNING *

-- name: touch_token
UPDATE tokens SET last_used_at = :now WHERE id = :id

-- name: has_issued_tokens
SELECT EXISTS (SELECT 1 FROM tokens) AS issued
