"""The raw-SQL floor: the least a PostgreSQL job queue can do per job, with psycopg.

One tiny table with a partial index on pending work; a loop that claims up to 500 due rows in
one statement (``FOR UPDATE SKIP LOCKED``), runs the no-op for each, and completes the batch in
one ``UPDATE … WHERE id = ANY(…)``. No leases, attempts, history, retries or wake-ups (it naps a
few ms when nothing is due): what is left is PostgreSQL's own cost of a durable claim and a
durable completion (``synchronous_commit=on``), which is what duetime is measured against.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

import psycopg

from peers import Record, System, chunks

CLAIM_BATCH = 500
IDLE_NAP = 0.002

DDL = """
CREATE TABLE raw_jobs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_at timestamptz NOT NULL DEFAULT now(),
    status smallint NOT NULL DEFAULT 0,  -- 0 pending, 1 running, 2 done
    payload jsonb NOT NULL,
    done_at timestamptz
);
CREATE INDEX raw_jobs_pending ON raw_jobs (run_at) WHERE status = 0;
"""

ENQUEUE = """
INSERT INTO raw_jobs (run_at, payload)
SELECT coalesce(to_timestamp(due), now()), jsonb_build_object('due', due)
FROM unnest(%s::float8[]) AS u (due)
"""

CLAIM = f"""
WITH c AS (
    SELECT id FROM raw_jobs
    WHERE status = 0 AND run_at <= now()
    ORDER BY run_at
    LIMIT {CLAIM_BATCH}
    FOR UPDATE SKIP LOCKED
)
UPDATE raw_jobs SET status = 1 FROM c WHERE raw_jobs.id = c.id
RETURNING raw_jobs.id, raw_jobs.payload
"""

COMPLETE = "UPDATE raw_jobs SET status = 2, done_at = now() WHERE id = ANY(%s)"


class RawSql(System):
    name = "raw"
    label = "raw SQL"
    remaining_sql = "SELECT count(*) FROM raw_jobs WHERE status < 2"

    def describe(self) -> str:
        return f"raw SQL loop (psycopg {psycopg.__version__}, claim {CLAIM_BATCH})"

    async def install(self, db: str) -> None:
        async with await psycopg.AsyncConnection.connect(self.conninfo(db), autocommit=True) as c:
            await c.execute(DDL)

    async def enqueue(self, db: str, dues: Sequence[float | None]) -> None:
        async with await psycopg.AsyncConnection.connect(self.conninfo(db), autocommit=True) as c:
            for chunk in chunks(dues):
                await c.execute(ENQUEUE, (list(chunk),))

    async def run_worker(
        self,
        db: str,
        *,
        concurrency: int,
        batch_size: int,
        record: Record,
        ready: Callable[[], None],
        go: asyncio.Event,
        stop: asyncio.Event,
    ) -> None:
        async with await psycopg.AsyncConnection.connect(self.conninfo(db), autocommit=True) as c:
            ready()
            await go.wait()
            while not stop.is_set():
                cur = await c.execute(CLAIM)
                rows = await cur.fetchall()
                if not rows:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), IDLE_NAP)
                    continue
                for _, payload in rows:
                    record(payload["due"])
                await c.execute(COMPLETE, ([row[0] for row in rows],))
