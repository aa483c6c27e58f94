-- A timer's moves: each time new zone rules moved a pending local-form timer's instant (its
-- wall time kept), recorded in the statement that moved it, so the timer's history says why it
-- fires when it does. Deleted with the timer's row in the hot table.
CREATE TABLE timer_moves (
    timer_id bigint NOT NULL REFERENCES timers (id) ON DELETE CASCADE,
    moved_at timestamptz NOT NULL,
    reason text NOT NULL,
    local timestamp NOT NULL,
    timezone text NOT NULL,
    from_at timestamptz NOT NULL,
    to_at timestamptz NOT NULL
);

CREATE INDEX timer_moves_timer ON timer_moves (timer_id, moved_at);
