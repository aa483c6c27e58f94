-- Schedules as data (one row each, however many), the link from a timer to the schedule that
-- made it, and a small key/value table for facts about the database (the tz data release).

CREATE TABLE schedules (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    namespace text NOT NULL,
    name text NOT NULL,
    type text NOT NULL,
    payload jsonb NOT NULL,
    subject text,
    cron text,
    every interval,
    timezone text NOT NULL DEFAULT 'UTC',
    start_at timestamptz,
    end_at timestamptz,
    catch_up text NOT NULL DEFAULT 'latest' CHECK (catch_up IN ('latest', 'all', 'none')),
    on_gap text NOT NULL DEFAULT 'run_after',
    on_overlap text NOT NULL DEFAULT 'once',
    active boolean NOT NULL DEFAULT true,
    max_attempts integer NOT NULL,
    next_at timestamptz,
    after_at timestamptz NOT NULL,
    anchor_at timestamptz NOT NULL,
    last_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    version bigint NOT NULL DEFAULT 1,
    UNIQUE (namespace, name),
    CHECK ((cron IS NULL) <> (every IS NULL))
);

-- The materialiser's path: only active schedules, by next occurrence.
CREATE INDEX schedules_due ON schedules (namespace, next_at) WHERE active;
CREATE INDEX schedules_subject ON schedules (namespace, subject, name) WHERE subject IS NOT NULL;

ALTER TABLE timers ADD COLUMN schedule_id bigint;

-- Deleting or revising a schedule finds its pending occurrences without reading its history.
CREATE INDEX timers_schedule ON timers (schedule_id, status) WHERE schedule_id IS NOT NULL;
-- tz data changes re-resolve pending local-form timers: only those are in this index.
CREATE INDEX timers_local_pending ON timers (id)
    WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying');

CREATE TABLE meta (
    key text PRIMARY KEY,
    value text NOT NULL,
    updated_at timestamptz NOT NULL
);
