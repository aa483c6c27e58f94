-- A claim writes a new version of each row it takes (a lease, status running, the first
-- firing), and PostgreSQL gives that version an entry in every index whose predicate it meets;
-- so does each heartbeat that extends a lease. The listing, by-subject and event-log indexes
-- gave every running row such entries at every claim and heartbeat, for readers that the index
-- of leased rows serves as well: the running rows are few, and only they hold a lease. Those
-- three indexes now leave rows with a lease out, and their readers add the running rows from
-- timers_leased. The schedule index keeps only pending occurrences, all it is asked for.
-- A claim now adds three index entries a row (primary key, (namespace, key), lease), not five
-- to seven.

-- What the indexes rely on, checked for every row written from now on.
ALTER TABLE timers ADD CONSTRAINT timers_lease_while_running
    CHECK ((status = 'running') = (lease_expires_at IS NOT NULL)) NOT VALID;

DROP INDEX IF EXISTS timers_listing;
CREATE INDEX timers_listing ON timers (namespace, id) WHERE lease_expires_at IS NULL;

DROP INDEX IF EXISTS timers_subject;
CREATE INDEX timers_subject ON timers (namespace, subject, id)
    WHERE subject IS NOT NULL AND lease_expires_at IS NULL;

DROP INDEX IF EXISTS timers_events;
CREATE INDEX timers_events ON timers (namespace, (coalesce(fired_at, completed_at)), id)
    WHERE coalesce(fired_at, completed_at) IS NOT NULL AND lease_expires_at IS NULL;

DROP INDEX IF EXISTS timers_schedule;
CREATE INDEX timers_schedule ON timers (schedule_id)
    WHERE schedule_id IS NOT NULL AND status IN ('scheduled', 'retrying');
