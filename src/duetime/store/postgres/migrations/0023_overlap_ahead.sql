-- Occurrences of schedules with an overlap policy are made ahead of their instant, as every
-- schedule's are, so that workers claim them ahead and start them on time. One made behind an
-- unfinished occurrence waits (scheduled, run_at 9000-01-01, as a buffered one), and the end of
-- the earlier one decides what becomes of it, as the materialiser would have at its instant:
-- ended before the instant, the first waiting one runs at its instant; ended after, the ones
-- that fell due meanwhile are skipped (skip), or the first runs now and the others are skipped
-- (buffer_one: at most one is buffered). Whatever ends the earlier one (finish, rescue,
-- cancel) does this in its own statement. Only the end of an occurrence that could run fires
-- it: a parked one ending (cancelled, or skipped here) has nothing waiting behind it to free.
-- It takes the schedule row's lock first: the materialiser holds it while it decides, reading
-- the earlier one as unfinished, so an end committed meanwhile still finds what it made; and a
-- deleted schedule (its occurrences cancelled with it) releases nothing. The reasons are those
-- of duetime.recurrence.overlap.
CREATE OR REPLACE FUNCTION release_buffered_occurrence() RETURNS trigger
LANGUAGE plpgsql
SET search_path FROM CURRENT
AS $$
DECLARE
    released timestamptz;
BEGIN
    PERFORM 1 FROM schedules WHERE id = NEW.schedule_id FOR SHARE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM 1 FROM timers
    WHERE schedule_id = NEW.schedule_id AND status IN ('scheduled', 'running', 'retrying')
      AND run_at < '9000-01-01 00:00:00+00';
    IF FOUND THEN
        RETURN NULL;  -- another occurrence is still unfinished: the parked ones wait for it
    END IF;
    UPDATE timers
    SET status = 'cancelled', run_at = due_at, completed_at = NEW.updated_at,
        updated_at = NEW.updated_at, version = version + 1,
        last_error = CASE WHEN NEW.overlap = 'skip'
            THEN 'skipped: an earlier occurrence was still unfinished (overlap=skip)'
            ELSE 'skipped: an earlier occurrence was still unfinished and one was already '
                 || 'buffered (overlap=buffer_one)'
        END
    WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
      AND run_at = '9000-01-01 00:00:00+00' AND due_at <= NEW.updated_at
      AND (NEW.overlap = 'skip' OR due_at > (
          SELECT min(due_at) FROM timers
          WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
            AND run_at = '9000-01-01 00:00:00+00'));
    UPDATE timers
    SET run_at = greatest(due_at, NEW.updated_at), last_error = NULL,
        updated_at = NEW.updated_at, version = version + 1
    WHERE id = (
        SELECT id FROM timers
        WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
          AND run_at = '9000-01-01 00:00:00+00'
        ORDER BY due_at
        LIMIT 1)
    RETURNING run_at INTO released;
    IF released IS NOT NULL THEN
        PERFORM pg_notify(
            'duetime_' || TG_TABLE_SCHEMA,
            (extract(epoch FROM released) * 1000000)::bigint::text
        );
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER timers_release_buffered ON timers;
CREATE TRIGGER timers_release_buffered
AFTER UPDATE OF status ON timers
FOR EACH ROW
WHEN (NEW.overlap IN ('skip', 'buffer_one')
    AND OLD.run_at < '9000-01-01 00:00:00+00'
    AND OLD.status IN ('scheduled', 'running', 'retrying')
    AND NEW.status IN ('done', 'dead', 'cancelled', 'expired'))
EXECUTE FUNCTION release_buffered_occurrence();
