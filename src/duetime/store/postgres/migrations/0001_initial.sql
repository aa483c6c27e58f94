-- Timers, their attempts history, nodes and namespaces, in the store's schema (search_path).
-- Instants are timestamptz (microsecond precision, the same as the SQLite store's integers).

CREATE TABLE namespaces (
    name text PRIMARY KEY,
    created_at timestamptz NOT NULL
);

CREATE TABLE timers (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace text NOT NULL,
    key text NOT NULL,
    type text NOT NULL,
    payload jsonb NOT NULL,
    subject text,
    correlation_id text,
    due_at timestamptz NOT NULL,
    run_at timestamptz NOT NULL,
    local timestamp,
    timezone text,
    disambiguation text NOT NULL DEFAULT 'compatible',
    expires_after interval,
    status text NOT NULL CHECK (
        status IN ('scheduled', 'running', 'retrying', 'done', 'dead', 'cancelled', 'expired')
    ),
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    registered_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    fired_at timestamptz,
    completed_at timestamptz,
    last_error text,
    lease_owner text,
    lease_expires_at timestamptz,
    version bigint NOT NULL DEFAULT 1,
    UNIQUE (namespace, key)
);

-- The claim path: only pending rows are in it, so it stays small however long history grows.
CREATE INDEX timers_pending ON timers (namespace, run_at)
    WHERE status IN ('scheduled', 'retrying');
-- Rescue (expired leases) and heartbeats (a node's leases) touch only running rows.
CREATE INDEX timers_leased ON timers (lease_expires_at) WHERE status = 'running';
CREATE INDEX timers_owner ON timers (lease_owner) WHERE status = 'running';
-- Listings, newest first: a namespace's timers, history by subject, the dead-letter queue.
CREATE INDEX timers_listing ON timers (namespace, id);
CREATE INDEX timers_subject ON timers (namespace, subject, id) WHERE subject IS NOT NULL;
CREATE INDEX timers_dead ON timers (namespace, id) WHERE status = 'dead';

CREATE TABLE attempts (
    timer_id bigint NOT NULL REFERENCES timers (id) ON DELETE CASCADE,
    number integer NOT NULL,
    node_id text NOT NULL,
    started_at timestamptz NOT NULL,
    finished_at timestamptz,
    outcome text,
    error text,
    PRIMARY KEY (timer_id, number)
);

CREATE TABLE nodes (
    id text PRIMARY KEY,
    host text NOT NULL,
    pid integer NOT NULL,
    role text NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    in_flight integer NOT NULL DEFAULT 0
);
