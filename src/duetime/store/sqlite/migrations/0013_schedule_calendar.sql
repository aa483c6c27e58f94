-- A schedule may be an RFC 5545 calendar rule (RRULE, DTSTART, EXDATE, RDATE, business days,
-- 29 February) instead of cron or every: kept as one JSON text column, read back as a whole.
-- SQLite cannot change a table's CHECK constraint, so the table is rebuilt with one that says
-- "exactly one of cron, every and calendar". The release trigger names the table, so it is
-- dropped first and made again as migration 0008 made it; ids keep their AUTOINCREMENT
-- sequence, so an id is still never reused.
DROP TRIGGER timers_release_buffered;

CREATE TABLE schedules_new (
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
    overlap TEXT NOT NULL DEFAULT 'allow',
    catch_up_grace INTEGER NOT NULL DEFAULT 60000000,
    calendar TEXT,
    UNIQUE (namespace, name),
    CHECK ((cron IS NOT NULL) + (every IS NOT NULL) + (calendar IS NOT NULL) = 1)
);

INSERT INTO schedules_new (
    id, namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at,
    catch_up, on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, last_at,
    created_at, updated_at, version, overlap, catch_up_grace
)
SELECT id, namespace, name, type, payload, subject, cron, every, timezone, start_at, end_at,
    catch_up, on_gap, on_overlap, active, max_attempts, next_at, after_at, anchor_at, last_at,
    created_at, updated_at, version, overlap, catch_up_grace
FROM schedules;

UPDATE sqlite_sequence
SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'schedules'), 0))
WHERE name = 'schedules_new';

DROP TABLE schedules;
ALTER TABLE schedules_new RENAME TO schedules;

CREATE INDEX schedules_due ON schedules (namespace, next_at) WHERE active = 1;
CREATE INDEX schedules_subject ON schedules (namespace, subject, name) WHERE subject IS NOT NULL;
CREATE INDEX schedules_gated_due ON schedules (namespace, next_at)
    WHERE active = 1 AND overlap <> 'allow';

CREATE TRIGGER timers_release_buffered
AFTER UPDATE OF status ON timers
FOR EACH ROW
WHEN NEW.overlap = 'buffer_one'
    AND OLD.status IN ('scheduled', 'running', 'retrying')
    AND NEW.status IN ('done', 'dead', 'cancelled', 'expired')
    AND EXISTS (SELECT 1 FROM schedules WHERE id = NEW.schedule_id)
BEGIN
    UPDATE timers
    SET run_at = NEW.updated_at, last_error = NULL, updated_at = NEW.updated_at,
        version = version + 1
    WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
      AND run_at = 221845392000000000;
END;
