-- The timers table is a queue: every job writes its row twice (the claim, the outcome) and
-- retention deletes it later, so dead row versions pile up far faster than in an ordinary
-- table. A claim walks the pending index from its oldest entries, and until a vacuum removes
-- the entries earlier claims left dead, every claim steps over them: with 10 million pending
-- and no vacuum, 1,000 claims of 100 doubled the index pages a claim reads (bench/README.md).
-- PostgreSQL's default waits until a fifth of the table is dead (two million rows at ten
-- million) before it vacuums or re-analyses; a queue wants small, frequent passes instead, as
-- is usual for queue tables. These are the table's own settings: the server's autovacuum must
-- be on (its default) for them to act.
ALTER TABLE timers SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_analyze_threshold = 1000
);
