-- The traceback of a failed attempt (bounded by the worker: its innermost frames, at most
-- 16 KiB), shown by `duetime show`, the API and the dashboard.
ALTER TABLE attempts ADD COLUMN traceback TEXT;
