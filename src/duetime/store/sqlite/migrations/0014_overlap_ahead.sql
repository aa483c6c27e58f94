-- Occurrences of schedules with an overlap policy are made ahead of their instant, as every
-- schedule's are, so that workers claim them ahead and start them on time. One made behind an
-- unfinished occurrence waits (scheduled, run_at 9000-01-01, as a buffered one), and the end of
-- the earlier one decides what becomes of it, as the materialiser would have at its instant:
-- ended before the instant, the first waiting one runs at its instant; ended after, the ones
-- that fell due meanwhile are skipped (skip), or the first runs now and the others are skipped
-- (buffer_one: at most one is buffered). Whatever ends the earlier one (finish, rescue,
-- cancel) does this in its own statement; nothing does while another occurrence is still
-- unfinished. Only the end of an occurrence that could run fires it: a parked one ending
-- (cancelled, or skipped here) has nothing waiting behind it to free. (The one writer
-- serialises it with the materialiser's decision.) The reasons are those of
-- duetime.recurrence.overlap.
DROP TRIGGER timers_release_buffered;
CREATE TRIGGER timers_release_buffered
AFTER UPDATE OF status ON timers
FOR EACH ROW
WHEN NEW.overlap IN ('skip', 'buffer_one')
    AND OLD.run_at < 221845392000000000
    AND OLD.status IN ('scheduled', 'running', 'retrying')
    AND NEW.status IN ('done', 'dead', 'cancelled', 'expired')
    AND EXISTS (SELECT 1 FROM schedules WHERE id = NEW.schedule_id)
    AND NOT EXISTS (
        SELECT 1 FROM timers
        WHERE schedule_id = NEW.schedule_id AND status IN ('scheduled', 'running', 'retrying')
          AND run_at < 221845392000000000)
BEGIN
    UPDATE timers
    SET status = 'cancelled', run_at = due_at, completed_at = NEW.updated_at,
        updated_at = NEW.updated_at, version = version + 1,
        last_error = CASE WHEN NEW.overlap = 'skip'
            THEN 'skipped: an earlier occurrence was still unfinished (overlap=skip)'
            ELSE 'skipped: an earlier occurrence was still unfinished and one was already '
                 || 'buffered (overlap=buffer_one)'
        END
    WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
      AND run_at = 221845392000000000 AND due_at <= NEW.updated_at
      AND (NEW.overlap = 'skip' OR due_at > (
          SELECT min(due_at) FROM timers
          WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
            AND run_at = 221845392000000000));
    UPDATE timers
    SET run_at = max(due_at, NEW.updated_at), last_error = NULL,
        updated_at = NEW.updated_at, version = version + 1
    WHERE id = (
        SELECT id FROM timers
        WHERE schedule_id = NEW.schedule_id AND status = 'scheduled'
          AND run_at = 221845392000000000
        ORDER BY due_at
        LIMIT 1);
END;
