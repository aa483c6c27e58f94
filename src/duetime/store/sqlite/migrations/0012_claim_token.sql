-- Each claim writes a token of its own on the rows it takes, and every outcome, fan-out and
-- transactional completion must carry it (see the PostgreSQL migration of the same name): an
-- outcome of an earlier claim of the same attempt number is refused. NULL until first claimed.
ALTER TABLE timers ADD COLUMN claim_token INTEGER;
