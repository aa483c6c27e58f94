-- Writing timers in the SQLite store (writes.py). Each block's name is the method that runs it.
-- Instants are integer microseconds since the epoch, UTC.

-- name: insert_timer
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority, run_window, spread
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :run_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now,
    :producer, :trace_context, :priority, :run_window, :spread
)
ON CONFLICT (namespace, key) DO NOTHING
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority, version

-- name: upsert_timer
-- A pending timer takes the new values; one whose every column would stay as it is (the same
-- request again) is left alone and comes back missing, so it is kept, not updated. The trace
-- context is not compared (the same request from another trace is still the same request), but
-- an update takes the new one. An evenly spread timer's run_at is its group's (spreads.sql), not
-- compared: the same request again is kept.
INSERT INTO timers (
    namespace, key, type, payload, subject, correlation_id, due_at, run_at, local, timezone,
    disambiguation, expires_after, status, max_attempts, registered_at, updated_at, producer,
    trace_context, priority, run_window, spread
) VALUES (
    :namespace, :key, :type, :payload, :subject, :correlation_id, :due_at, :run_at, :local,
    :timezone, :disambiguation, :expires_after, 'scheduled', :max_attempts, :now, :now,
    :producer, :trace_context, :priority, :run_window, :spread
)
ON CONFLICT (namespace, key) DO UPDATE SET
    type = excluded.type,
    payload = excluded.payload,
    subject = excluded.subject,
    correlation_id = excluded.correlation_id,
    due_at = excluded.due_at,
    run_at = excluded.run_at,
    local = excluded.local,
    timezone = excluded.timezone,
    disambiguation = excluded.disambiguation,
    expires_after = excluded.expires_after,
    max_attempts = excluded.max_attempts,
    updated_at = excluded.updated_at,
    producer = excluded.producer,
    trace_context = excluded.trace_context,
    priority = excluded.priority,
    run_window = excluded.run_window,
    spread = excluded.spread,
    version = timers.version + 1
WHERE timers.status IN ('scheduled', 'retrying')
  AND (timers.type, timers.payload, timers.subject, timers.correlation_id, timers.due_at,
       timers.run_at, timers.local, timers.timezone, timers.disambiguation,
       timers.expires_after, timers.max_attempts, timers.producer, timers.priority,
       timers.run_window, timers.spread)
      IS NOT (excluded.type, excluded.payload, excluded.subject, excluded.correlation_id,
       excluded.due_at, CASE WHEN excluded.spread = 'even' AND timers.spread = 'even'
           THEN timers.run_at ELSE excluded.run_at END, excluded.local, excluded.timezone,
       excluded.disambiguation, excluded.expires_after, excluded.max_attempts,
       excluded.producer, excluded.priority, excluded.run_window, excluded.spread)
RETURNING id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority, version

-- name: kept_timer
-- A timer put_timers left as it was, as plain columns in rows.TIMER_COLUMNS order: decoded
-- like the rows an upsert returns, which costs a kept timer little more than an updated one.
SELECT id, namespace, key, type, payload, subject, due_at, status, attempts, max_attempts,
    registered_at, updated_at, run_at, correlation_id, expires_after, local, timezone,
    disambiguation, fired_at, completed_at, last_error, lease_owner, lease_expires_at,
    destination, producer, trace_context, priority
FROM timers WHERE namespace = ? AND key = ?
