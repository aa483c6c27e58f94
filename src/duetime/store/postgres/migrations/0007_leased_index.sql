-- Rescue's index of leased rows is keyed by the lease's presence, not by status = 'running'.
-- With the old predicate every statement fenced on status = 'running' (finish, fan_out) could
-- start from this index, and its estimate after an ANALYZE of a quiet table is "about one row":
-- the planner then read the node's running rows once per outcome of the batch (a nested loop of
-- batch × running, 250,000 comparisons for 500 outcomes). Only running rows hold a lease, so the
-- index covers the same rows; rescue's "lease_expires_at < now" implies the new predicate, and
-- the fenced statements reach their rows by primary key.
DROP INDEX IF EXISTS timers_leased;
CREATE INDEX timers_leased ON timers (lease_expires_at) WHERE lease_expires_at IS NOT NULL;
