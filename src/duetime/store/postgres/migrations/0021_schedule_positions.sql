-- A schedule's position -- where the materialiser has got to (next_at, after_at, last_at), the
-- version that guards it, and what decides whether and when it is due (active, overlap) -- moves
-- to a narrow table of its own. The materialiser moves a million schedules a day on: each
-- move rewrote the whole schedule row (payload and all) and its four index entries (next_at is
-- indexed, so the update is never HOT); it now rewrites a row of eight columns and two index
-- entries. The definition stays in schedules; schedule_rows joins the two as one row.
CREATE TABLE schedule_positions (
    id bigint PRIMARY KEY,
    namespace text NOT NULL,
    active boolean NOT NULL DEFAULT true,
    overlap text NOT NULL DEFAULT 'allow' CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    next_at timestamptz,
    after_at timestamptz NOT NULL,
    last_at timestamptz,
    version bigint NOT NULL DEFAULT 1
);

INSERT INTO schedule_positions (id, namespace, active, overlap, next_at, after_at, last_at,
    version)
SELECT id, namespace, active, overlap, next_at, after_at, last_at, version FROM schedules;

DROP INDEX schedules_due;
DROP INDEX schedules_gated_due;
ALTER TABLE schedules
    DROP COLUMN active,
    DROP COLUMN overlap,
    DROP COLUMN next_at,
    DROP COLUMN after_at,
    DROP COLUMN last_at,
    DROP COLUMN version;

-- The materialiser's due path and its wake-up for schedules with a policy (as in 0002, 0017).
CREATE INDEX schedules_due ON schedule_positions (namespace, next_at) WHERE active;
CREATE INDEX schedules_gated_due ON schedule_positions (namespace, next_at)
    WHERE active AND overlap <> 'allow';

-- A schedule as one row, for everything that reads it whole. (A later migration that changes
-- the columns of schedules makes this view again: it lists them as they were when made.)
CREATE VIEW schedule_rows AS
SELECT s.*, p.active, p.overlap, p.next_at, p.after_at, p.last_at, p.version
FROM schedules s
JOIN schedule_positions p ON p.id = s.id;

-- The release trigger (0017) locks the row the materialiser holds while it decides to buffer
-- an occurrence: now the position's.
CREATE OR REPLACE FUNCTION release_buffered_occurrence() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM 1 FROM schedule_positions WHERE id = NEW.schedule_id FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    UPDATE timers
    SET run_at = NEW.updated_at, last_error = NULL, updated_at = NEW.updated_at,
        version = version + 1
    WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
      AND run_at = '9000-01-01 00:00:00+00';
    IF FOUND THEN
        PERFORM pg_notify(
            'duetime_' || TG_TABLE_SCHEMA,
            (extract(epoch FROM NEW.updated_at) * 1000000)::bigint::text
        );
    END IF;
    RETURN NULL;
END
$$;
