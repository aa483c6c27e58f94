-- Timers, their attempts history, nodes and namespaces. Instants are integer microseconds
-- since the Unix epoch (UTC): compact, exact, and ordered the same way as time.

CREATE TABLE namespaces (
    name TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE timers (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    subject TEXT,
    correlation_id TEXT,
    due_at INTEGER NOT NULL,
    run_at INTEGER NOT NULL,
    local TEXT,
    timezone TEXT,
    disambiguation TEXT NOT NULL DEFAULT 'compatible',
    expires_after INTEGER,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    registered_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    fired_at INTEGER,
    completed_at INTEGER,
    last_error TEXT,
    lease_owner TEXT,
    lease_expires_at INTEGER,
    version INTEGER NOT NULL DEFAULT 1,
    UNIQUE (namespace, key)
);

-- The claim path: only pending rows are in it, so it stays small however long history grows.
CREATE INDEX timers_pending ON timers (namespace, run_at)
    WHERE status IN ('scheduled', 'retrying');
CREATE INDEX timers_leased ON timers (lease_expires_at) WHERE status = 'running';
CREATE INDEX timers_subject ON timers (namespace, subject, id) WHERE subject IS NOT NULL;
CREATE INDEX timers_dead ON timers (namespace, id) WHERE status = 'dead';

CREATE TABLE attempts (
    timer_id INTEGER NOT NULL REFERENCES timers (id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    outcome TEXT,
    error TEXT,
    PRIMARY KEY (timer_id, number)
) WITHOUT ROWID;

CREATE TABLE nodes (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    role TEXT NOT NULL,
    started_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL,
    in_flight INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
