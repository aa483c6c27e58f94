-- A timer's run window (duetime.timemath.run_window): its first attempt runs at run_at within
-- [due_at, due_at + run_window], due_at staying the nominal instant its key and history show.
-- spread says how run_at was chosen: 'hash' (a stable hash of namespace, key and due_at) or
-- 'even' (the group of one namespace, type, due_at and window ranked by key, evenly spaced).
-- Both NULL without a window. Nullable columns without a default: adding them rewrites nothing.
-- timer_history mirrors timers column for column, so it gains them too. No index: a group's
-- spread is found through timers_pending, its rows lying within [due_at, due_at + window].
ALTER TABLE timers ADD COLUMN run_window interval;
ALTER TABLE timers ADD COLUMN spread text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS run_window interval;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS spread text;

-- A schedule's run window: each occurrence's timer runs at its hashed instant within
-- [due_at, due_at + run_window] and keeps the window (NULL: none). Nullable: rewrites nothing.
ALTER TABLE schedules ADD COLUMN run_window interval;
