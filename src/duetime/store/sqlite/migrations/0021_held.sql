-- Held for a migration landing separately; drop this file when that one is merged.
SELECT 1;
