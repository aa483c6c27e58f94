-- The even spread of a group of timers over their run window (spreads.py). Each block's name is
-- the method that runs it. Tables are unqualified (search_path is the store's schema).

-- name: spread_group
-- One group (namespace, type, nominal instant, window) in one pass: its pending, never-claimed
-- rows, ranked by key (bytewise, COLLATE "C", as SQLite and Python order them) from 0, each run at
-- due_at + floor(rank * window_us / total) µs
-- (duetime.timemath.run_window.even_offset), so the result depends on the rows alone, not on who
-- runs it or when. The rows are found through timers_pending: every one of the group lies within
-- [due_at, due_at + window]. Rows already at their place are not written again. Answers the
-- earliest instant it moved a row to (NULL: none moved), for the wake-up.
WITH grp AS (
    SELECT id, run_at,
        row_number() OVER (ORDER BY key COLLATE "C") - 1 AS rank,
        count(*) OVER () AS total
    FROM timers
    WHERE namespace = %(namespace)s AND status = 'scheduled'
      AND run_at BETWEEN %(due_at)s AND %(due_at)s + %(window)s
      AND due_at = %(due_at)s AND type = %(type)s AND run_window = %(window)s
      AND spread = 'even' AND attempts = 0
),
placed AS (
    SELECT id, run_at,
        %(due_at)s::timestamptz
            + div(rank::numeric * %(window_us)s, total)::bigint * interval '1 microsecond'
            AS spread_at
    FROM grp
),
moved AS (
    UPDATE timers SET run_at = placed.spread_at
    FROM placed
    WHERE timers.id = placed.id AND placed.run_at IS DISTINCT FROM placed.spread_at
    RETURNING timers.run_at
)
SELECT count(*) AS moved, min(run_at) AS earliest FROM moved

-- name: group_size
-- How many pending timers one group (namespace, type, nominal instant, window) holds, spread or
-- not: the starts its window must hold (the rate limit's warning). Through timers_pending.
SELECT count(*) AS total FROM timers
WHERE namespace = %(namespace)s AND status = 'scheduled'
  AND run_at BETWEEN %(due_at)s AND %(due_at)s + %(window)s
  AND due_at = %(due_at)s AND type = %(type)s AND run_window = %(window)s
