-- An attempt records two instants: claimed_at, when a claim took its row (up to the claim's
-- look-ahead before the due instant), and started_at, when its handler (or delivery) truly
-- began, as the worker reports it with the outcome. started_at was the claim's instant before;
-- it is NULL now while the start is not known: a running attempt, or one lost with its node
-- (a start never reported is not replaced by a planned one). Rows written before keep what
-- they had and no claimed_at (readers take started_at, which held the claim's instant).
-- Adding nullable columns and dropping NOT NULL rewrite nothing.
ALTER TABLE attempts ALTER COLUMN started_at DROP NOT NULL;
ALTER TABLE attempts ADD COLUMN claimed_at timestamptz;
ALTER TABLE attempt_history ALTER COLUMN started_at DROP NOT NULL;
ALTER TABLE attempt_history ADD COLUMN claimed_at timestamptz;

-- The claim writes its instant here instead of fired_at, which now only ever holds the first
-- attempt's true start (written with its outcome; NULL while none is known). The first attempt
-- kept on its timer row (done_by, migration 0011) reads its claim's instant from here.
-- timer_history mirrors timers column for column, so it gains the column too.
ALTER TABLE timers ADD COLUMN claimed_at timestamptz;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS claimed_at timestamptz;

CREATE OR REPLACE VIEW all_attempts AS
SELECT timer_id, number, node_id, started_at, finished_at, outcome, error,
    coalesce(claimed_at, started_at) AS claimed_at
FROM attempts
UNION ALL
SELECT id, 1, done_by, fired_at, completed_at, 'done', NULL, claimed_at FROM timers
WHERE done_by IS NOT NULL;
