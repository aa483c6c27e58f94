-- A schedule may be an RFC 5545 calendar rule (RRULE, DTSTART, EXDATE, RDATE, business days,
-- 29 February) instead of cron or every: kept as one JSON text column, read back as a whole.
-- Adding a nullable column rewrites nothing; the check becomes "exactly one of the three".
ALTER TABLE schedules ADD COLUMN calendar text;
ALTER TABLE schedules DROP CONSTRAINT IF EXISTS schedules_check;
ALTER TABLE schedules ADD CONSTRAINT schedules_rule_check
    CHECK (num_nonnulls(cron, every, calendar) = 1);
