-- Finished and fired timers by namespace and time: what pruning deletes once past the retention
-- (coalesce(fired_at, completed_at) <= completed_at), and the event log by fired_at. Pending
-- timers that never fired are not in it, so the claim path does not pay for it.

CREATE INDEX timers_events ON timers (namespace, coalesce(fired_at, completed_at), id)
    WHERE coalesce(fired_at, completed_at) IS NOT NULL;
