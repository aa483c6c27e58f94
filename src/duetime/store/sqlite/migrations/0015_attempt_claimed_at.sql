-- An attempt records two instants: claimed_at, when a claim took its row (up to the claim's
-- look-ahead before the due instant), and started_at, when its handler (or delivery) truly
-- began, as the worker reports it with the outcome (see the PostgreSQL migration of the same
-- name). started_at becomes nullable — NULL while the start is not known: a running attempt,
-- or one lost with its node — so the table is made again (SQLite cannot drop a NOT NULL).
-- Rows kept from before: their started_at was the claim's instant, now their claimed_at; an
-- attempt still running or lost never reported a start, so it has none.
CREATE TABLE attempts_new (
    timer_id INTEGER NOT NULL REFERENCES timers (id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    node_id TEXT NOT NULL,
    started_at INTEGER,
    finished_at INTEGER,
    outcome TEXT,
    error TEXT,
    traceback TEXT,
    claimed_at INTEGER,
    PRIMARY KEY (timer_id, number)
) WITHOUT ROWID;

INSERT INTO attempts_new (
    timer_id, number, node_id, started_at, finished_at, outcome, error, traceback, claimed_at
)
SELECT timer_id, number, node_id,
    CASE WHEN finished_at IS NULL OR outcome = 'lost' THEN NULL ELSE started_at END,
    finished_at, outcome, error, traceback, started_at
FROM attempts;

DROP TABLE attempts;

ALTER TABLE attempts_new RENAME TO attempts;
