-- Transactional handlers and the outbox in the PostgreSQL store (transactions.py). Each block's
-- name is the method that runs it.
-- Tables are unqualified: every connection's search_path is the store's schema (?schema=).
-- Placeholders are psycopg's %(name)s; instants are timestamptz.

-- name: lock_attempt
-- A transactional handler's fence: the row stays locked until its transaction ends, so neither
-- rescue nor another node can take the attempt while the handler's writes are in flight.
-- Heartbeats skip locked rows, so the lease left now (ms) is all the time the transaction has.
SELECT id,
       coalesce(ceil(1000 * extract(epoch FROM lease_expires_at - clock_timestamp())), 0)::bigint
           AS lease_left_ms
FROM timers
WHERE id = %(timer_id)s AND attempts = %(attempt)s AND lease_owner = %(node_id)s
  AND status = 'running'
  AND (%(claim_token)s::bigint IS NULL OR claim_token = %(claim_token)s::bigint)
FOR UPDATE

-- name: limit_transaction
-- The server ends a transaction that sits idle, or runs one statement, longer than this (SET
-- LOCAL: until it ends). Ending it releases the row lock, so rescue can take the attempt.
SELECT set_config('idle_in_transaction_session_timeout', %(ms)s, true) AS idle,
       set_config('statement_timeout', %(ms)s, true) AS statement

-- name: outbox_enter
-- The outbox's first statement in a caller's transaction: the caller's own search_path (put
-- back after), and whether the transaction may write at all (SET TRANSACTION READ ONLY,
-- default_transaction_read_only, a standby's).
SELECT current_setting('search_path') AS search_path,
       current_setting('transaction_read_only') = 'on' AS read_only
