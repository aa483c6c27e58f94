-- History off the hot path (monthly partitions). Finished timers move here some time
-- after they finished (the maintenance step, in batches), so the hot table keeps pending work,
-- recent history and dead letters only, and whole months are dropped once past the retention.
--
-- timer_history mirrors timers column for column, in the same order: a migration that adds a
-- column to timers adds it here too (ALTER TABLE IF EXISTS timer_history ADD COLUMN ...).
-- attempt_history is attempts after one first column: its timer's completed_at, the partition
-- key of both. The monthly partitions are made (ahead of time) by the maintenance step.

CREATE TABLE timer_history (LIKE timers INCLUDING DEFAULTS) PARTITION BY RANGE (completed_at);
ALTER TABLE timer_history ALTER COLUMN completed_at SET NOT NULL;

-- get() by key (a key may be reused once its timer is archived: the newest archived one wins),
-- listings newest first, history by subject, and the event log by fired_at.
CREATE INDEX timer_history_key ON timer_history (namespace, key, id);
CREATE INDEX timer_history_listing ON timer_history (namespace, id);
CREATE INDEX timer_history_subject ON timer_history (namespace, subject, id)
    WHERE subject IS NOT NULL;
CREATE INDEX timer_history_events ON timer_history (namespace, fired_at, id)
    WHERE fired_at IS NOT NULL;

CREATE TABLE attempt_history (
    completed_at timestamptz NOT NULL,
    LIKE attempts INCLUDING DEFAULTS
) PARTITION BY RANGE (completed_at);

CREATE INDEX attempt_history_timer ON attempt_history (timer_id, number);

-- The hot table's finished and fired rows by namespace and time: what the maintenance step
-- archives or deletes (coalesce(fired_at, completed_at) <= completed_at), and the event log's
-- rows not yet archived. Pending rows that never fired are not in it.
CREATE INDEX timers_events ON timers (namespace, (coalesce(fired_at, completed_at)), id)
    WHERE coalesce(fired_at, completed_at) IS NOT NULL;
