"""Drain of plain (sync) handlers doing a little blocking I/O: how many timers a second.

    .venv/bin/python bench/sync_drain.py --store postgres --timers 5000 --concurrency 50
    .venv/bin/python bench/sync_drain.py --store sqlite --timers 5000 --io-ms 1

``--timers`` timers are stored already due; then one worker (in this process, default
settings but ``--concurrency``) starts, and the figure is from its start until the store counts
every timer done, read by the app's own connection every 20 ms. Each handler is a plain ``def``
that sleeps ``--io-ms`` milliseconds (``time.sleep``: a blocking call, as an e-mail or HTTP
client makes), so it runs in a thread: at concurrency 50 a thousand 1 ms handlers need 20 ms of
wall time if 50 run at once, 170 ms if 6 do. PostgreSQL gets a schema of its own on ``--url``,
dropped afterwards; SQLite a file in a temporary folder. Prints one line of JSON (and the load
average), so that runs of two versions of the code can alternate (bench/README.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import duetime
from duetime import AsyncApp, Event, Status, TimerRequest

TYPE = "io.send"


async def drain(url: str, timers: int, concurrency: int, io_seconds: float) -> dict[str, float]:
    app = AsyncApp(url, "bench", concurrency=concurrency)

    @app.handler(TYPE)
    def send(event: Event) -> None:
        time.sleep(io_seconds)

    async with app:
        now = datetime.now(UTC)
        for first in range(0, timers, 1000):
            await app.timers.schedule_many(
                [
                    TimerRequest(TYPE, None, at=now, key=f"s-{i:07d}")
                    for i in range(first, min(first + 1000, timers))
                ]
            )
        worker = app.worker()
        started = time.monotonic()
        cpu = time.process_time()
        running = asyncio.create_task(worker.run())
        while (await app.timers.counts()).get(Status.DONE, 0) < timers:
            if running.done():
                running.result()
                raise RuntimeError("the worker stopped before the drain ended")
            await asyncio.sleep(0.02)
        seconds = time.monotonic() - started
        cpu_seconds = time.process_time() - cpu
        worker.stop()
        await running
    return {
        "seconds": round(seconds, 3),
        "timers_per_s": round(timers / seconds, 1),
        "cpu_ms_per_timer": round(1000 * cpu_seconds / timers, 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="postgres")
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--timers", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--io-ms", type=float, default=1.0)
    parser.add_argument("--label", default="", help="a name for this run's code, in the output")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="duetime-sync-drain-") as folder:
        if args.store == "sqlite":
            url = f"sqlite:///{Path(folder) / 'drain.db'}"
            result = asyncio.run(drain(url, args.timers, args.concurrency, args.io_ms / 1000))
        else:
            schema = f"bench_{uuid.uuid4().hex[:12]}"
            sep = "&" if "?" in args.url else "?"
            url = f"{args.url}{sep}schema={schema}"
            try:
                result = asyncio.run(drain(url, args.timers, args.concurrency, args.io_ms / 1000))
            finally:
                base = args.url.split("?")[0]
                subprocess.run(
                    ["psql", base, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                    capture_output=True,
                    check=False,
                )
    commit = subprocess.run(
        ["git", "-C", str(Path(duetime.__file__).parent), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    line = {
        "label": args.label,
        "code": commit,
        "store": args.store,
        "timers": args.timers,
        "concurrency": args.concurrency,
        "io_ms": args.io_ms,
        **result,
        "load": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(line))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
