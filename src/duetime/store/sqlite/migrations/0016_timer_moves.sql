-- A timer's moves: each time new zone rules moved a pending local-form timer's instant (its
-- wall time kept), recorded in the transaction that moved it, so the timer's history says why
-- it fires when it does. Deleted with the timer.
CREATE TABLE timer_moves (
    timer_id INTEGER NOT NULL REFERENCES timers (id) ON DELETE CASCADE,
    moved_at INTEGER NOT NULL,
    reason TEXT NOT NULL,
    local TEXT NOT NULL,
    timezone TEXT NOT NULL,
    from_at INTEGER NOT NULL,
    to_at INTEGER NOT NULL
);

CREATE INDEX timer_moves_timer ON timer_moves (timer_id, moved_at);
