-- The traceback of a failed attempt (bounded by the worker: its innermost frames, at most
-- 16 KiB), shown by `duetime show`, the API and the dashboard. Nullable: adding it rewrites
-- nothing, and older processes leave it NULL. attempt_history is attempts after one column, so
-- it gains the column too (in the same last place).
ALTER TABLE attempts ADD COLUMN traceback text;
ALTER TABLE attempt_history ADD COLUMN traceback text;
