-- A claim rewrites its timer in place (a HOT update) instead of adding index entries for it.
--
-- A claim changes status, attempts, the lease and updated_at. PostgreSQL can keep the new row
-- version on the same page and add no index entry at all, provided no index names any of
-- those columns, in its key or its predicate, and the page has room. Until now the pending,
-- lease, dead-letter, schedule and re-resolution indexes named the status or the lease, so a
-- claim wrote the primary key, (namespace, key) and the lease index once per row: with 10
-- million pending timers each of those is a random page of an index far larger than memory.
--
-- * Pending work is indexed as "not finished" (completed_at IS NULL): running rows stay in it,
--   and the statements that want pending rows add the status to their filter.
-- * Running rows are found through running_timers, a narrow table of their ids, which every
--   statement that starts or ends an attempt keeps up to date in the same transaction (claim,
--   finish, rescue, fan_out). Rescue, lease expiry and the listings of running rows read it.
-- * The claim no longer sets fired_at: the attempt's end does (fired_at = when the first
--   attempt that ended started), and while a first attempt runs the store reports its start
--   (updated_at) as fired_at. The event-log index therefore does not change at a claim.
-- * The dead-letter index goes: its predicate named the status. Dead letters are listed
--   through timers_listing, like every other status.
-- * Pages keep a fifth free (fillfactor 80) for the claim's new version; pages written before
--   this migration keep theirs full until they are rewritten (VACUUM FULL, pg_repack).
-- * Listings, by-subject and the event log take running rows again (0009 left them out only
--   so that a claim wrote fewer entries, which it now does not write at all).

CREATE TABLE running_timers (
    id bigint PRIMARY KEY
);
INSERT INTO running_timers (id) SELECT id FROM timers WHERE status = 'running';

ALTER TABLE timers SET (fillfactor = 80);

DROP INDEX IF EXISTS timers_pending;
CREATE INDEX timers_pending ON timers (namespace, run_at) WHERE completed_at IS NULL;

DROP INDEX IF EXISTS timers_leased;
DROP INDEX IF EXISTS timers_dead;

DROP INDEX IF EXISTS timers_local_pending;
CREATE INDEX timers_local_pending ON timers (id)
    WHERE local IS NOT NULL AND completed_at IS NULL;

DROP INDEX IF EXISTS timers_schedule;
CREATE INDEX timers_schedule ON timers (schedule_id)
    WHERE schedule_id IS NOT NULL AND completed_at IS NULL;

DROP INDEX IF EXISTS timers_listing;
CREATE INDEX timers_listing ON timers (namespace, id);

DROP INDEX IF EXISTS timers_subject;
CREATE INDEX timers_subject ON timers (namespace, subject, id) WHERE subject IS NOT NULL;

DROP INDEX IF EXISTS timers_events;
CREATE INDEX timers_events ON timers (namespace, (coalesce(fired_at, completed_at)), id)
    WHERE coalesce(fired_at, completed_at) IS NOT NULL;
