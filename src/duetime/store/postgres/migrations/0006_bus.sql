-- The event bus: which destination a delivery row is for (NULL for an event), who stored each
-- timer, and what each node subscribes to (a JSON list of {namespace, type, to}).
-- timer_history mirrors timers column for column, so it gains the same columns in the same order.

ALTER TABLE timers ADD COLUMN destination text;
ALTER TABLE timers ADD COLUMN producer text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS destination text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS producer text;

ALTER TABLE nodes ADD COLUMN subscriptions jsonb NOT NULL DEFAULT '[]';
