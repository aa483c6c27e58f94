-- A timer's run window (duetime.timemath.run_window), in microseconds: its first attempt runs
-- at run_at within [due_at, due_at + run_window], due_at staying the nominal instant. spread
-- says how run_at was chosen ('hash' or 'even'). Both NULL without a window.
ALTER TABLE timers ADD COLUMN run_window INTEGER;
ALTER TABLE timers ADD COLUMN spread TEXT;

-- A schedule's run window, in microseconds: each occurrence's timer runs at its hashed instant
-- within [due_at, due_at + run_window] and keeps the window (NULL: none).
ALTER TABLE schedules ADD COLUMN run_window INTEGER;
