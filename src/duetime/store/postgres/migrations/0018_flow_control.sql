-- Flow control: limits and pauses per event type or glob, one row per (namespace, pattern)
-- (duetime.model.limits). tat is a rate's GCRA state (duetime.ratelimit), written by the claims
-- of the types it governs under the row's lock.
CREATE TABLE flow_limits (
    namespace text NOT NULL,
    pattern text NOT NULL,
    concurrency integer CHECK (concurrency > 0),
    rate_count integer CHECK (rate_count > 0),
    rate_period_us bigint CHECK (rate_period_us > 0),
    burst integer CHECK (burst > 0),
    partition_by text,
    paused boolean NOT NULL DEFAULT false,
    tat timestamptz,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (namespace, pattern)
);
