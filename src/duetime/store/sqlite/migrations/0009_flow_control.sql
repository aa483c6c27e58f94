-- Flow control: limits and pauses per event type or glob, one row per (namespace, pattern)
-- (duetime.model.limits). tat is a rate's GCRA state (duetime.ratelimit, integer microseconds),
-- written by the claims of the types it governs inside their write transaction.
CREATE TABLE flow_limits (
    namespace TEXT NOT NULL,
    pattern TEXT NOT NULL,
    concurrency INTEGER CHECK (concurrency > 0),
    rate_count INTEGER CHECK (rate_count > 0),
    rate_period_us INTEGER CHECK (rate_period_us > 0),
    burst INTEGER CHECK (burst > 0),
    partition_by TEXT,
    paused INTEGER NOT NULL DEFAULT 0,
    tat INTEGER,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, pattern)
) WITHOUT ROWID;
