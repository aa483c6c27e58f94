-- The event bus: which destination a delivery row is for (NULL for an event), who stored each
-- timer, and what each node subscribes to (a JSON list of {namespace, type, to}).

ALTER TABLE timers ADD COLUMN destination TEXT;
ALTER TABLE timers ADD COLUMN producer TEXT;

ALTER TABLE nodes ADD COLUMN subscriptions TEXT NOT NULL DEFAULT '[]';
