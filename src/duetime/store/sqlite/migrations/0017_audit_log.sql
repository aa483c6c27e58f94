-- The audit log: every operator action (a cancel, a replay, a delete, a bulk action, a pause, a
-- limit, a token) with who asked for it, when, what it took and how many. Listed newest first
-- per namespace (audit_log_listing); deleted with the event log's retention (audit_log_at).
-- AUTOINCREMENT: an id pruned away is never given again, so a cursor never skips a new entry.
-- Instants are integer microseconds since the epoch, UTC; target is JSON text.

CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    namespace TEXT NOT NULL,
    at INTEGER NOT NULL,
    actor TEXT NOT NULL,
    via TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    count INTEGER NOT NULL
);

CREATE INDEX audit_log_listing ON audit_log (namespace, id);
CREATE INDEX audit_log_at ON audit_log (at, id);
