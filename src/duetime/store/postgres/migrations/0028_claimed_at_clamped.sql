-- Claims before this one recorded as claimed_at the horizon they claimed up to (the instant
-- plus the worker's look-ahead), not the instant the claim was made: a stored claimed_at could
-- come after its attempt's start, even after its end. An attempt is claimed before it starts,
-- so such a value is impossible; the tightest instant known to follow the true claim is the
-- start itself, and readers see that. Values not after their start are kept as they are.
UPDATE attempts SET claimed_at = started_at WHERE claimed_at > started_at;
UPDATE attempt_history SET claimed_at = started_at WHERE claimed_at > started_at;

-- The first attempt kept on its timer row (done_by, migration 0011) started at fired_at.
UPDATE timers SET claimed_at = fired_at
WHERE done_by IS NOT NULL AND claimed_at > fired_at;
UPDATE timer_history SET claimed_at = fired_at
WHERE done_by IS NOT NULL AND claimed_at > fired_at;
