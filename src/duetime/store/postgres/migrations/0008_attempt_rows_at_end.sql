-- An attempt's row is written once, when the attempt ends (finish, rescue, fan_out), instead of
-- inserted by the claim and updated at the end: a claim writes one row, not two, and finishing
-- needs no join with attempts, whose plan went wrong on a quiet table that grew (a nested loop
-- over every open attempt, per outcome). Until it ends, the running attempt lives on its timer
-- row: number = attempts, node = lease_owner, started = updated_at (which nothing but the claim
-- sets while a timer runs); list_attempts and list_deliveries show it from there. Rows opened
-- by earlier versions are overwritten when their attempt ends (ON CONFLICT), so nothing here
-- needs to move.
COMMENT ON COLUMN timers.updated_at IS
    'when the row last changed; while status = running, when its current attempt started';

-- Attempt rows are written only by statements that hold their timer's row (locked, in the same
-- transaction), and removed with it by the retention's batches, so the foreign key checked
-- nothing they do not already ensure; its check cost a query per written attempt.
ALTER TABLE attempts DROP CONSTRAINT IF EXISTS attempts_timer_id_fkey;
