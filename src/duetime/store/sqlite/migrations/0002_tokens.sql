-- API bearer tokens. Only the SHA-256 hash of a token is stored, never the token itself.
-- namespaces is a JSON array of namespace names, or ["*"] for every namespace.

CREATE TABLE tokens (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT,
    hash TEXT NOT NULL UNIQUE,
    namespaces TEXT NOT NULL,
    read_only INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    last_used_at INTEGER
);
