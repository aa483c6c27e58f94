-- The audit log: every operator action (a cancel, a replay, a delete, a bulk action, a pause, a
-- limit, a token) with who asked for it, when, what it took and how many. Listed newest first
-- per namespace (audit_log_listing); deleted with the event log's retention (audit_log_at).

CREATE TABLE audit_log (
    id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    at timestamptz NOT NULL,
    actor text NOT NULL,
    via text NOT NULL,
    action text NOT NULL,
    target jsonb NOT NULL,
    count bigint NOT NULL
);

CREATE INDEX audit_log_listing ON audit_log (namespace, id);
CREATE INDEX audit_log_at ON audit_log (at, id);
