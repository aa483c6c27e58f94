-- A schedule's overlap policy (allow | skip | buffer_one: an occurrence due while an earlier one
-- is unfinished fires anyway, is skipped, or waits for it) and its catch-up grace in
-- microseconds (how late an occurrence may be and still fire; past it, catch_up decides).
ALTER TABLE schedules ADD COLUMN overlap TEXT NOT NULL DEFAULT 'allow';
ALTER TABLE schedules ADD COLUMN catch_up_grace INTEGER NOT NULL DEFAULT 60000000;

-- An occurrence of a schedule with a policy keeps it (NULL for every other timer), so that its
-- end releases the occurrence buffered behind it.
ALTER TABLE timers ADD COLUMN overlap TEXT;

-- The materialiser's wake-up for schedules with a policy: they are materialised when due, not
-- ahead, so it looks for the first of them apart from the others.
CREATE INDEX schedules_gated_due ON schedules (namespace, next_at)
    WHERE active = 1 AND overlap <> 'allow';

-- A buffered occurrence waits as a scheduled timer whose run_at is 9000-01-01 (past every
-- instant duetime accepts, so nothing claims it). When an earlier occurrence of its schedule
-- ends (done, dead, cancelled, expired), whichever statement ended it releases the buffered one
-- to run at once (finish, rescue, cancel alike; a deleted schedule releases nothing). Only
-- timers of buffer_one schedules fire the trigger. (The one writer serialises it with the
-- materialiser's decision to buffer.)
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
