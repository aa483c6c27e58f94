-- All SQL of the tokens part (duetime.store.tokens.Tokens): each block's name is the method
-- that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: add_token
-- No row when :cap tokens are active already (counted no further: NULL, no cap), or when a
-- token, revoked ones too, has the name already. The write transaction holds the file's write
-- lock from its start, so racing creations count and compare names in turn.
INSERT INTO tokens (name, hash, namespaces, read_only, created_at)
SELECT :name, :hash, :namespaces, :read_only, :now
WHERE (:cap IS NULL
       OR (SELECT count(*) FROM (SELECT 1 FROM tokens WHERE revoked_at IS NULL
                                 LIMIT coalesce(:cap, -1))) < :cap)
  AND NOT EXISTS (SELECT 1 FROM tokens WHERE name = :name)
RETURNING *

-- name: token_named
SELECT * FROM tokens WHERE name = :name ORDER BY id LIMIT 1

-- name: find_token
SELECT * FROM tokens WHERE hash = :hash AND revoked_at IS NULL

-- name: list_tokens
-- Oldest first, after the id :after, at most :limit (NULL: all): a walk of the key.
SELECT * FROM tokens
WHERE id > :after AND (:include_revoked OR revoked_at IS NULL)
ORDER BY id
LIMIT coalesce(:limit, -1)

-- name: get_token
SELECT * FROM tokens WHERE id = :id

-- name: revoke_token
UPDATE tokens SET revoked_at = :now WHERE id = :id AND revoked_at IS NULL
RETURNING *

-- name: touch_token
UPDATE tokens SET last_used_at = :now WHERE id = :id

-- name: has_issued_tokens
SELECT EXISTS (SELECT 1 FROM tokens) AS issued
