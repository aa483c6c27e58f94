-- A timer done at its first attempt (nearly every timer) gets no attempts row: its one attempt
-- is read from the timer row instead. done_by names the node that ran it; the attempt started
-- at fired_at (the first claim sets both fired_at and the attempt's start) and ended at
-- completed_at. The finish then writes one row a job, not two, and the attempts table holds
-- only the attempts that tell something: retries, failures, rescues, fan-outs.
-- list_attempts and list_deliveries add that attempt from the timer row; archiving writes it to
-- attempt_history like any other, so the history's readers see a row as before.
-- Every attempt that ends otherwise (failed, retried, rescued, dead, a later attempt done) is
-- written as before. timer_history mirrors timers column for column, so it gains the column too.
ALTER TABLE timers ADD COLUMN done_by text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS done_by text;
COMMENT ON COLUMN timers.done_by IS
    'the node whose first attempt completed this timer, when that attempt has no attempts row';

-- Every attempt of the hot table's timers as rows, those kept on their timer row included: for
-- whoever reads the tables with SQL (the store's own queries reach each part by its index).
CREATE VIEW all_attempts AS
SELECT timer_id, number, node_id, started_at, finished_at, outcome, error FROM attempts
UNION ALL
SELECT id, 1, done_by, fired_at, completed_at, 'done', NULL FROM timers
WHERE done_by IS NOT NULL;
