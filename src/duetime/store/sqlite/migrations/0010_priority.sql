-- Priority within the due timers (duetime.validation.check_priority): 0, the default, is normal,
-- 1..9 more urgent. timers_urgent holds only the pending rows above the default, so the claim's
-- first look is a probe of an empty index while every timer is normal (claim_due).
ALTER TABLE timers ADD COLUMN priority INTEGER NOT NULL DEFAULT 0
    CHECK (priority BETWEEN 0 AND 9);
CREATE INDEX timers_urgent ON timers (namespace, priority DESC, run_at)
    WHERE priority > 0 AND status IN ('scheduled', 'retrying');
