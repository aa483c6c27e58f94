-- Claims before this one recorded as claimed_at the horizon they claimed up to (the instant
-- plus the worker's look-ahead), not the instant the claim was made: a stored claimed_at could
-- come after its attempt's start, even after its end. An attempt is claimed before it starts,
-- so such a value is impossible; the tightest instant known to follow the true claim is the
-- start itself, and readers see that. Values not after their start are kept as they are.
UPDATE attempts SET claimed_at = started_at WHERE claimed_at > started_at;
