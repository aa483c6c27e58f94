-- Priority within the due timers (duetime.validation.check_priority): 0, the default, is normal,
-- 1..9 more urgent, 9 the most. A constant default: adding the column rewrites nothing.
-- timers_urgent holds only the pending rows above the default, so the claim's first look (the
-- urgent due rows, highest first) is a probe of an empty index while every timer is normal,
-- and the normal rows are walked through timers_pending as before (claim_due).
ALTER TABLE timers ADD COLUMN priority smallint NOT NULL DEFAULT 0;
ALTER TABLE timers ADD CONSTRAINT timers_priority CHECK (priority BETWEEN 0 AND 9) NOT VALID;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS priority smallint NOT NULL DEFAULT 0;
CREATE INDEX timers_urgent ON timers (namespace, priority DESC, run_at)
    WHERE priority > 0 AND status IN ('scheduled', 'retrying');
