-- Schedules as data (one row each, however many), the link from a timer to the schedule that
-- made it, and a small key/value table for facts about the database (the tz data release).
-- Instants are integer microseconds since the Unix epoch (UTC); every is microseconds.

-- AUTOINCREMENT: an id is never reused, so a timer of a deleted schedule is never taken for
-- one of a new schedule of the same name.
CREATE TABLE schedules (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    payload TEXT NOT NULL,
    subject TEXT,
    cron TEXT,
    every INTEGER,
    timezone TEXT NOT NULL DEFAULT 'UTC',
    start_at INTEGER,
    end_at INTEGER,
    catch_up TEXT NOT NULL DEFAULT 'latest',
    on_gap TEXT NOT NULL DEFAULT 'run_after',
    on_overlap TEXT NOT NULL DEFAULT 'once',
    active INTEGER NOT NULL DEFAULT 1,
    max_attempts INTEGER NOT NULL,
    next_at INTEGER,
    after_at INTEGER NOT NULL,
    anchor_at INTEGER NOT NULL,
    last_at INTEGER,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    version INTEGER NOT NULL DEFAULT 1,
    UNIQUE (namespace, name),
    CHECK ((cron IS NULL) <> (every IS NULL))
);

-- The materialiser's path: only active schedules, by next occurrence.
CREATE INDEX schedules_due ON schedules (namespace, next_at) WHERE active = 1;
CREATE INDEX schedules_subject ON schedules (namespace, subject, name) WHERE subject IS NOT NULL;

ALTER TABLE timers ADD COLUMN schedule_id INTEGER;

-- Deleting or revising a schedule finds its pending occurrences without reading its history.
CREATE INDEX timers_schedule ON timers (schedule_id, status) WHERE schedule_id IS NOT NULL;
-- tz data changes re-resolve pending local-form timers: only those are in this index.
CREATE INDEX timers_local_pending ON timers (id)
    WHERE local IS NOT NULL AND status IN ('scheduled', 'retrying');

CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
