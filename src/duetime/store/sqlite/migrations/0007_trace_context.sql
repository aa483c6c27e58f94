-- The W3C trace context of the code that stored a timer (its traceparent, then after a space
-- its tracestate, if any), written only when tracing is on and a span was active: the worker's
-- span for the timer continues that trace. Nullable: adding it rewrites nothing.
ALTER TABLE timers ADD COLUMN trace_context TEXT;
