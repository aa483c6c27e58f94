-- The W3C trace context of the code that stored a timer (its traceparent, then after a space
-- its tracestate, if any), written only when tracing is on and a span was active: the worker's
-- span for the timer continues that trace. Nullable with no default: adding it rewrites
-- nothing. timer_history mirrors timers column for column, so it gains the column too.
ALTER TABLE timers ADD COLUMN trace_context text;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS trace_context text;
