-- A rate's two marks of its recent grants, beside its TAT (duetime.timemath.ratelimit.RateState):
-- the recent one set at recent_at, each with the TAT as it stood there and the starts granted
-- since, so a claim can tell a rate used lightly from one near its bound and leave the rows of
-- the first unpaced. marks_tat is the TAT they were counted up to: a TAT written without them
-- (rows from before, or a version that does not keep them) makes them void until set again.
ALTER TABLE flow_limits
    ADD COLUMN recent_at timestamptz,
    ADD COLUMN recent_tat timestamptz,
    ADD COLUMN recent_count bigint,
    ADD COLUMN earlier_tat timestamptz,
    ADD COLUMN earlier_count bigint,
    ADD COLUMN marks_tat timestamptz;
