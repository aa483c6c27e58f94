-- Schedule deadlines: how long each occurrence has to succeed (microseconds; NULL: no
-- deadline), after how many failed occurrences in a row the schedule pauses, and from when its
-- occurrences are judged (NULL: from its creation). All NULL by default: older rows keep
-- today's behaviour and nothing is rewritten.
ALTER TABLE schedules ADD COLUMN must_succeed_within INTEGER;
ALTER TABLE schedules ADD COLUMN pause_after_failures INTEGER;
ALTER TABLE schedules ADD COLUMN watched_from INTEGER;

-- The deadline watch's path: only the schedules it watches.
CREATE INDEX schedules_watched ON schedules (namespace, id)
    WHERE must_succeed_within IS NOT NULL OR pause_after_failures IS NOT NULL;

-- The watch's place in each watched schedule (every occurrence through checked_through has
-- been judged) and its tallies; a round writes it only over the place it read.
CREATE TABLE schedule_watch (
    schedule_id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    checked_through INTEGER NOT NULL,
    failures_in_row INTEGER NOT NULL DEFAULT 0,
    misses INTEGER NOT NULL DEFAULT 0,
    last_miss_at INTEGER,
    last_miss_reason TEXT,
    last_success_at INTEGER,
    updated_at INTEGER NOT NULL
);

-- Each missed occurrence once: its event is written in the same transaction as its row, so
-- the primary key makes the event once too. Kept when the schedule is deleted.
CREATE TABLE schedule_misses (
    schedule_id INTEGER NOT NULL,
    nominal_at INTEGER NOT NULL,
    namespace TEXT NOT NULL,
    schedule_name TEXT NOT NULL,
    reason TEXT NOT NULL,
    deadline_at INTEGER NOT NULL,
    recorded_at INTEGER NOT NULL,
    PRIMARY KEY (schedule_id, nominal_at)
) WITHOUT ROWID;
CREATE INDEX schedule_misses_recent ON schedule_misses (namespace, recorded_at);
