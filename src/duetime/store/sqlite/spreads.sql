-- The even spread of a group of timers over their run window (spreads.py). Each block's name is
-- the method that runs it. Instants and windows are integer microseconds.

-- name: spread_group
-- One group (namespace, type, nominal instant, window) in one pass: its pending, never-claimed
-- rows, ranked by key from 0, each run at due_at + rank * window / total µs, rounded down
-- (duetime.timemath.run_window.even_offset; integer division), so the result depends on the
-- rows alone. Found through timers_pending: each row lies within [due_at, due_at + window].
-- Rows already at their place are not written again.
WITH grp AS (
    SELECT id, run_at,
        row_number() OVER (ORDER BY key) - 1 AS rank,
        count(*) OVER () AS total
    FROM timers
    WHERE namespace = :namespace AND status = 'scheduled'
      AND run_at BETWEEN :due_at AND :due_at + :window
      AND due_at = :due_at AND type = :type AND run_window = :window
      AND spread = 'even' AND attempts = 0
)
UPDATE timers SET run_at = :due_at + (grp.rank * :window) / grp.total
FROM grp
WHERE timers.id = grp.id AND grp.run_at IS NOT :due_at + (grp.rank * :window) / grp.total
RETURNING timers.run_at

-- name: group_size
-- How many pending timers one group (namespace, type, nominal instant, window) holds, spread or
-- not: the starts its window must hold (the rate limit's warning). Through timers_pending.
SELECT count(*) FROM timers
WHERE namespace = :namespace AND status = 'scheduled'
  AND run_at BETWEEN :due_at AND :due_at + :window
  AND due_at = :due_at AND type = :type AND run_window = :window
