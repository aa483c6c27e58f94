-- Keys move out of the timers table into a narrow table of their own.
--
-- A claim and an outcome each write a new version of the timer row, and PostgreSQL gives every
-- new version an entry in each index of the table whose predicate it meets (the update changes
-- indexed columns, so it is never HOT). The unique index on (namespace, key) was one of them: a
-- text index that took an entry, with a uniqueness check, twice a job, for a key that never
-- changes. timer_keys holds each key of the hot table once, written when the timer is made and
-- removed when it leaves (archived, deleted); claims and outcomes never touch it. Scheduling
-- takes the key here first (ON CONFLICT on timer_keys is what makes scheduling idempotent) and
-- then writes the timer under the id the key row was given. Readers by key go through it.
-- A 100,000-timer drain on an analysed table went from 26,200-26,800 to 30,000-30,800 timers/s
-- with the index gone (bench/README.md).
CREATE TABLE timer_keys (
    namespace text NOT NULL,
    key text NOT NULL,
    timer_id bigint NOT NULL,
    PRIMARY KEY (namespace, key)
);

INSERT INTO timer_keys (namespace, key, timer_id) SELECT namespace, key, id FROM timers;

ALTER TABLE timers DROP CONSTRAINT IF EXISTS timers_namespace_key_key;

-- Whatever removes timers (archiving, retention, a revised schedule, or someone's own SQL)
-- removes their keys with them, in the same statement, so a key is never held by a timer that
-- is gone. Only deletes pay for this: claims and outcomes are updates.
-- (Both functions keep the schema's search_path, whoever's session fires them.)
CREATE FUNCTION timer_keys_release() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM timer_keys
    USING gone
    WHERE timer_keys.namespace = gone.namespace AND timer_keys.key = gone.key
      AND timer_keys.timer_id = gone.id;
    RETURN NULL;
END
$$;

CREATE TRIGGER timers_release_keys AFTER DELETE ON timers
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION timer_keys_release();

CREATE FUNCTION timer_keys_clear() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM timer_keys;
    RETURN NULL;
END
$$;

CREATE TRIGGER timers_clear_keys AFTER TRUNCATE ON timers
    FOR EACH STATEMENT EXECUTE FUNCTION timer_keys_clear();

COMMENT ON TABLE timer_keys IS
    'the key of every timer in the hot table (unique by namespace); the timer row is timer_id';
