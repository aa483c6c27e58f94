-- API bearer tokens. Only the SHA-256 hash of a token is stored, never the token itself.
-- namespaces holds namespace names, or {'*'} for every namespace.

CREATE TABLE tokens (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text,
    hash text NOT NULL UNIQUE,
    namespaces text[] NOT NULL,
    read_only boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    revoked_at timestamptz,
    last_used_at timestamptz
);

