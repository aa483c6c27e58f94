-- A connection's own statements in the PostgreSQL store: the clock, NOTIFY, session limits and
-- settings, search paths, where it leads. Each block's name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: db_now
SELECT clock_timestamp() AS now

-- name: notify
-- Inside a caller's transaction: sent when, and only if, it commits.
SELECT pg_notify(%(channel)s, %(payload)s)

-- name: notify_after_commit
-- After the store's own commit, as a transaction of its own. PostgreSQL holds one global lock
-- from a notifying transaction's pre-commit to its end, WAL flush included, so notifying commits
-- run one at a time; this one skips the flush (a lost hint costs latency, never work: workers
-- re-check anyway) and holds that lock for microseconds. (Its transaction only: the setting
-- ends with it.)
SELECT set_config('synchronous_commit', 'off', true) AS flush, pg_notify(%(channel)s, %(payload)s)

-- name: current_search_path
SELECT current_setting('search_path') AS search_path

-- name: set_search_path
SELECT set_config('search_path', %(search_path)s, true) AS search_path

-- name: reach
-- Where a connection leads: its database, and duetime's table of timers there (by oid, so a
-- schema of the same name in another database, or restored from a dump, is told apart); with
-- whether its role may read the server's identity, use the schema and write the timers. Read
-- from the catalogs, which every role may read (to_regclass fails on a schema it may not use).
WITH timers AS (
    SELECT n.oid AS schema_oid, c.oid AS timers_oid
    FROM pg_namespace n LEFT JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = 'timers'
    WHERE n.nspname = %(schema)s::text
)
SELECT current_database() AS database,
       (SELECT oid FROM pg_database WHERE datname = current_database()) AS database_oid,
       current_setting('port') AS port,
       (SELECT timers_oid FROM timers) AS timers_oid,
       has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') AS sees_server,
       coalesce((SELECT has_schema_privilege(schema_oid, 'USAGE') FROM timers), false)
           AS uses_schema,
       coalesce((SELECT has_table_privilege(timers_oid, 'INSERT, UPDATE') FROM timers), false)
           AS writes_timers

-- name: server_identity
-- The cluster's identifier, made by initdb: two servers never share it (a standby does).
SELECT system_identifier::text AS system_identifier FROM pg_control_system()

-- name: walk_in_index_order
-- For the rest of the transaction: the batch statements and the event log walk timers_events
-- (a bulk action's batch, timers_listing or timers_dead) in its order and stop at their LIMIT. Without statistics, or with skewed ones, the planner
-- prefers a bitmap scan of the namespace's whole range and a sort — done again for every batch
-- or page, so a backlog of n rows would cost n²; here it is not offered those.
SELECT set_config('enable_bitmapscan', 'off', true), set_config('enable_seqscan', 'off', true)

-- name: change_marker
-- The next transaction id of the cluster: it moves whenever any transaction writes, here or in
-- another database of the same server, so it is a "maybe changed" signal, read in no time.
SELECT pg_snapshot_xmax(pg_current_snapshot())::text AS marker

-- name: limit_statements
-- A REST request's statements end after its statement_timeout (duetime.budgets); LOCAL: the
-- setting ends with the transaction, so the pooled connection goes back as it was.
SELECT set_config('statement_timeout', %(timeout)s, true)

-- name: begin
-- A pipelined write's transaction (Database.pipelined_write): queued with its first statements.
BEGIN

-- name: commit
COMMIT

-- name: rollback
ROLLBACK
