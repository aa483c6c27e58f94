-- Schedule deadlines: how long each occurrence has to succeed (NULL: no deadline), after how
-- many failed occurrences in a row the schedule pauses, and from when its occurrences are
-- judged (NULL: from its creation). All NULL by default: older rows keep today's behaviour
-- and adding them rewrites nothing.
ALTER TABLE schedules
    ADD COLUMN must_succeed_within interval
        CHECK (must_succeed_within >= '1 second' AND must_succeed_within <= '366 days'),
    ADD COLUMN pause_after_failures integer CHECK (pause_after_failures >= 1),
    ADD COLUMN watched_from timestamptz;

-- The deadline watch's path: only the schedules it watches.
CREATE INDEX schedules_watched ON schedules (namespace, id)
    WHERE must_succeed_within IS NOT NULL OR pause_after_failures IS NOT NULL;

-- The watch's place in each watched schedule (every occurrence through checked_through has
-- been judged) and its tallies; a round writes it only over the place it read.
CREATE TABLE schedule_watch (
    schedule_id bigint PRIMARY KEY,
    namespace text NOT NULL,
    checked_through timestamptz NOT NULL,
    failures_in_row integer NOT NULL DEFAULT 0,
    misses bigint NOT NULL DEFAULT 0,
    last_miss_at timestamptz,
    last_miss_reason text,
    last_success_at timestamptz,
    updated_at timestamptz NOT NULL
);

-- Each missed occurrence once: its event is written in the same transaction as its row, so
-- the primary key makes the event once too. Kept when the schedule is deleted.
CREATE TABLE schedule_misses (
    schedule_id bigint NOT NULL,
    nominal_at timestamptz NOT NULL,
    namespace text NOT NULL,
    schedule_name text NOT NULL,
    reason text NOT NULL,
    deadline_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL,
    PRIMARY KEY (schedule_id, nominal_at)
);
CREATE INDEX schedule_misses_recent ON schedule_misses (namespace, recorded_at);
