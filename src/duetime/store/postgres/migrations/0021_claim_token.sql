-- Each claim writes a token of its own on the rows it takes, and every outcome, fan-out and
-- transactional completion must carry it: the attempt number and the owner node do not tell
-- two claims apart when a crash forgot the first (a claim commits without waiting for its
-- flush) and the same node claimed the row again under the same number. An outcome of the
-- forgotten claim is then refused instead of landing on the new one. NULL until first claimed.
ALTER TABLE timers ADD COLUMN claim_token bigint;
ALTER TABLE IF EXISTS timer_history ADD COLUMN IF NOT EXISTS claim_token bigint;
