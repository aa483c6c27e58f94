-- A schedule's overlap policy (allow | skip | buffer_one: an occurrence due while an earlier one
-- is unfinished fires anyway, is skipped, or waits for it) and its catch-up grace (how late an
-- occurrence may be and still fire; past it, catch_up decides). Both have defaults, so adding
-- them rewrites nothing and older rows keep today's behaviour.
ALTER TABLE schedules
    ADD COLUMN overlap text NOT NULL DEFAULT 'allow'
        CHECK (overlap IN ('allow', 'skip', 'buffer_one')),
    ADD COLUMN catch_up_grace interval NOT NULL DEFAULT '60 seconds'
        CHECK (catch_up_grace >= '0 seconds' AND catch_up_grace <= '31 days');

-- The materialiser's wake-up for schedules with a policy: they are materialised when due, not
-- ahead, so it looks for the first of them apart from the others.
CREATE INDEX schedules_gated_due ON schedules (namespace, next_at)
    WHERE active AND overlap <> 'allow';

-- An occurrence of a schedule with a policy keeps it (NULL for every other timer), so that its
-- end releases the occurrence buffered behind it. timer_history mirrors timers (0005).
ALTER TABLE timers ADD COLUMN overlap text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN overlap text;

-- A buffered occurrence waits as a scheduled timer whose run_at is 9000-01-01 (past every
-- instant duetime accepts, so nothing claims it). When an earlier occurrence of its schedule
-- ends (done, dead, cancelled, expired), whichever statement ended it releases the buffered one
-- to run at once, and wakes the workers, whatever path ends the earlier one (finish, rescue,
-- cancel). Only timers of buffer_one schedules fire the trigger. It takes the schedule row's
-- lock first: the materialiser holds it while it decides to buffer an occurrence (reading the
-- earlier one as unfinished), so an end committed meanwhile still finds the buffered one; and
-- a deleted schedule (its occurrences cancelled with it) releases nothing.
CREATE FUNCTION release_buffered_occurrence() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
BEGIN
    PERFORM 1 FROM schedules WHERE id = NEW.schedule_id FOR SHARE;
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

CREATE TRIGGER timers_release_buffered
AFTER UPDATE OF status ON timers
FOR EACH ROW
WHEN (NEW.overlap = 'buffer_one'
    AND OLD.status IN ('scheduled', 'running', 'retrying')
    AND NEW.status IN ('done', 'dead', 'cancelled', 'expired'))
EXECUTE FUNCTION release_buffered_occurrence();
