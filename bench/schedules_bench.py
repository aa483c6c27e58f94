"""Materialising a million per-user schedules: time, rate and memory (SQLite, PostgreSQL).

Run by hand (not part of the test suite)::

    .venv/bin/python bench/schedules_bench.py                       # 1,000,000 on SQLite
    .venv/bin/python bench/schedules_bench.py --count 100000 --backend both
    .venv/bin/python bench/schedules_bench.py --backend postgres --pg postgresql://…/db

Each user has a daily cron at 09:MM in one of 20 zones ("each user's birthday greeting at
09:00 in their zone", 1,200 distinct rules). The schedules are added (``add_schedules``, 10,000
a call), then the clock is moved a day on and the materialiser runs once: every schedule gets
its next occurrence as a timer and its row advanced, in batches, one transaction each. For
comparison, as many plain timers are stored by ``schedule_many`` (10,000 a call) in a fresh
database, and one schedule is materialised occurrence by occurrence. Memory is the process's
peak RSS during each phase.

With ``--rrule`` the script compares RFC 5545 schedules with the cron ones instead, in
``--rounds`` rounds: half "the last business day of the month at 17:00"
(``FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1``), half "every weekday at 09:00", across 100
zones, against ``--count`` of the daily crons above. Each kind runs in a process of its own on a
fresh database (a new SQLite file, a new PostgreSQL schema): added, then materialised once. The
kinds take turns going first (cron first in odd rounds, RRULE first in even ones), so neither
always meets the other's leftovers (WAL, page cache, the server's dirty buffers), and each round
prints both kinds' rates and their ratio: RRULE over cron, ``add_schedules`` per second and
occurrences materialised per second. The process's CPU per schedule added and per occurrence
materialised (all its threads; on PostgreSQL not the server's) follows each table: the rates
move with the neighbours' load, the CPU much less.

The script runs against older versions of the package too (``PYTHONPATH=/old/src``): it gives
the catch-up grace per schedule or to the materialiser, whichever that version takes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import inspect
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from zoneinfo import available_timezones

from duetime import AsyncApp, FrozenClock, TimerRequest
from duetime.schedules import ScheduleRequest
from duetime.services.materializer import Materializer

ZONES = [
    "UTC",
    "Europe/London",
    "Europe/Paris",
    "Europe/Moscow",
    "Africa/Lagos",
    "Africa/Johannesburg",
    "Asia/Dubai",
    "Asia/Kolkata",
    "Asia/Kathmandu",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Australia/Sydney",
    "Pacific/Auckland",
    "America/Sao_Paulo",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "America/Anchorage",
    "Pacific/Honolulu",
]
T0 = datetime(2025, 6, 10, 0, 0, tzinfo=UTC)  # no DST change in the next two days anywhere
R0 = datetime(2025, 6, 29, 12, 0, tzinfo=UTC)  # a Sunday: RRULE schedules are added then
R1 = datetime(2025, 7, 1, 12, 0, tzinfo=UTC)  # every zone's 30 June (last business day) is due
RRULES = (
    ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "2025-01-31T17:00"),  # last business day
    ("FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR", "2025-01-06T09:00"),  # every weekday at 09:00
)
SEED_CHUNK = 10_000
GRACE = timedelta(days=2)
"""Each schedule's catch-up grace: a day late, its occurrence simply fires (no catch-up)."""


def rss_mb(field: str) -> float:
    """VmRSS (now) or VmHWM (peak since the last reset) of this process, in MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> None:
    with suppress(OSError), open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


PER_SCHEDULE_GRACE = "catch_up_grace" in {f.name for f in dataclasses.fields(ScheduleRequest)}
GRACE_OPTION = (
    {} if PER_SCHEDULE_GRACE else {"grace": GRACE}
)  # older versions: one grace, the materialiser's
assert PER_SCHEDULE_GRACE or "grace" in inspect.signature(Materializer).parameters


def requests(start: int, stop: int) -> list[ScheduleRequest]:
    grace: dict[str, object] = {"catch_up_grace": GRACE} if PER_SCHEDULE_GRACE else {}
    return [
        ScheduleRequest(
            name=f"greet:user-{n}",
            type="birthday.greeting",
            payload={"user": n},
            subject=f"user-{n}",
            cron=f"{n % 60} 9 * * *",
            timezone=ZONES[(n // 60) % len(ZONES)],
            **grace,  # type: ignore[arg-type]
        )
        for n in range(start, stop)
    ]


def rrule_zones(count: int = 100) -> list[str]:
    """``count`` IANA Area/City zones spread over the whole list (every offset, both DSTs)."""
    names = sorted(
        name
        for name in available_timezones()
        if "/" in name and name.split("/")[0] in AREAS and not name.startswith("Etc/")
    )
    return [names[i * len(names) // count] for i in range(count)]


AREAS = {"Africa", "America", "Antarctica", "Asia", "Atlantic", "Australia", "Europe", "Pacific"}


def rrule_requests(start: int, stop: int, zones: list[str]) -> list[ScheduleRequest]:
    """Half "the last business day of the month at 17:00", half "every weekday at 09:00"."""
    made = []
    for n in range(start, stop):
        rule, dtstart = RRULES[n % 2]
        made.append(
            ScheduleRequest(
                name=f"cal:user-{n}",
                type="payroll.run",
                payload={"user": n},
                subject=f"user-{n}",
                rrule=rule,
                dtstart=dtstart,
                timezone=zones[(n // 2) % len(zones)],
                catch_up_grace=GRACE,
            )
        )
    return made


async def seed(app: AsyncApp, count: int, rrule: bool = False) -> float:
    zones = rrule_zones() if rrule else []
    started = time.perf_counter()
    for start in range(0, count, SEED_CHUNK):
        stop = min(count, start + SEED_CHUNK)
        made = rrule_requests(start, stop, zones) if rrule else requests(start, stop)
        await app.schedules.add_many(made, on_conflict="keep")
    return time.perf_counter() - started


async def one_kind(url: str, kind: str, count: int, batch: int) -> dict[str, object]:
    """``count`` schedules of one kind into the empty database at ``url``: added, then
    materialised once. Cron: the daily crons, added at T0, materialised a day on (one
    occurrence each). RRULE: added at R0, materialised at R1 (one or two occurrences each: a
    weekday schedule east of UTC has 1 July due too). Wall seconds and this process's CPU
    seconds of each phase (on PostgreSQL the server's CPU is not in it)."""
    rrule = kind == "rrule"
    added_at, due_at = (R0, R1) if rrule else (T0, T0 + timedelta(days=1))
    clock = FrozenClock(added_at)
    app = AsyncApp(url, kind, clock=clock)
    await app.open()
    try:
        cpu = time.process_time()
        seed_seconds = await seed(app, count, rrule=rrule)
        seed_cpu = time.process_time() - cpu
        clock.set(due_at)
        materializer = Materializer(
            app.store,
            clock,
            kind,
            lookahead=timedelta(0),
            batch_size=batch,
            check_tzdata=False,
            **GRACE_OPTION,  # type: ignore[arg-type]
        )
        cpu = time.process_time()
        started = time.perf_counter()
        created = await materializer.tick(clock.now())
        seconds = time.perf_counter() - started
        materialise_cpu = time.process_time() - cpu
        assert created >= count, (created, count)
        return {
            "kind": kind,
            "add_s": round(seed_seconds, 3),
            "add_cpu_s": round(seed_cpu, 3),
            "add_per_s": round(count / seed_seconds),
            "materialise_s": round(seconds, 3),
            "materialise_cpu_s": round(materialise_cpu, 3),
            "occurrences": created,
            "occurrences_per_s": round(created / seconds),
        }
    finally:
        await app.close()


def run_kind(backend: str, kind: str, count: int, batch: int, pg: str) -> dict[str, object]:
    """One kind in a fresh process on a fresh database; the process prints its figures."""
    with TemporaryDirectory() as tmp:
        schema = None
        if backend == "sqlite":
            url = f"sqlite:///{Path(tmp) / f'{kind}.db'}"
        else:
            url, schema = postgres_url(pg)
        try:
            out = subprocess.run(
                [
                    *(sys.executable, __file__, "--one-kind", kind, "--url", url),
                    *("--count", str(count), "--batch", str(batch)),
                ],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout
        finally:
            if schema is not None:
                drop_schema(pg, schema)
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


def _number(value: object) -> float:
    assert isinstance(value, int | float), value
    return float(value)


def _span(values: list[float]) -> str:
    low, high = round(min(values)), round(max(values))
    return f"{low}" if low == high else f"{low} to {high}"


def compare(backends: list[str], count: int, batch: int, rounds: int, pg: str) -> None:
    """Cron against RRULE, each kind in its own process and database, the order alternating;
    a table per backend: each round's figures and ratios, then the ratios' range."""
    for backend in backends:
        rows = []
        for number in range(1, rounds + 1):
            order = ("cron", "rrule") if number % 2 else ("rrule", "cron")
            load = os.getloadavg()[0]
            got = {kind: run_kind(backend, kind, count, batch, pg) for kind in order}
            cron, cal = got["cron"], got["rrule"]
            add = _number(cal["add_per_s"]) / _number(cron["add_per_s"])
            mat = _number(cal["occurrences_per_s"]) / _number(cron["occurrences_per_s"])
            rows.append((number, order[0], load, cron, cal, add, mat))
            print(
                json.dumps(
                    {
                        "backend": backend,
                        "round": number,
                        "first": order[0],
                        **{
                            f"{kind}_{key}": value
                            for kind, r in got.items()
                            for key, value in r.items()
                            if key != "kind"
                        },
                        "add_ratio": round(add, 2),
                        "materialise_ratio": round(mat, 2),
                        "load": round(load, 2),
                    }
                ),
                flush=True,
            )
        print(f"\n{backend}, {count:,} schedules of each kind; ratio = RRULE rate / cron rate")
        print(
            "| round (first) | load | cron add | RRULE add | add ratio "
            "| cron materialise | RRULE materialise | materialise ratio |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for number, first, load, cron, cal, add, mat in rows:
            print(
                f"| {number} ({'cron' if first == 'cron' else 'RRULE'}) | {load:.1f} "
                f"| {cron['add_s']:.2f} s ({cron['add_per_s']:,}/s) "
                f"| {cal['add_s']:.2f} s ({cal['add_per_s']:,}/s) | **{add:.2f}** "
                f"| {cron['occurrences']:,} in {cron['materialise_s']:.2f} s "
                f"({cron['occurrences_per_s']:,}/s) "
                f"| {cal['occurrences']:,} in {cal['materialise_s']:.2f} s "
                f"({cal['occurrences_per_s']:,}/s) | **{mat:.2f}** |"
            )
        adds = [row[5] for row in rows]
        mats = [row[6] for row in rows]
        for what, cpu, per in (
            ("adding, per schedule", "add_cpu_s", None),
            ("materialising, per occurrence", "materialise_cpu_s", "occurrences"),
        ):
            spans = {
                kind: _span(
                    [
                        _number(r[cpu]) / (count if per is None else _number(r[per])) * 1e6
                        for r in (row[3] if kind == "cron" else row[4] for row in rows)
                    ]
                )
                for kind in ("cron", "rrule")
            }
            print(f"the process's CPU {what}: cron {spans['cron']} µs, RRULE {spans['rrule']} µs")
        print(
            f"add ratio {min(adds):.2f} to {max(adds):.2f} (median {statistics.median(adds):.2f}), "
            f"materialise ratio {min(mats):.2f} to {max(mats):.2f} "
            f"(median {statistics.median(mats):.2f})",
            flush=True,
        )


async def timers(url: str, count: int) -> float:
    """Seconds to store ``count`` plain timers by schedule_many, SEED_CHUNK a call."""
    app = AsyncApp(url, "timers", clock=FrozenClock(T0))
    await app.open()
    try:
        started = time.perf_counter()
        for start in range(0, count, SEED_CHUNK):
            batch = [
                TimerRequest(
                    type="birthday.greeting",
                    payload={"user": n},
                    key=f"greet:user-{n}",
                    subject=f"user-{n}",
                    delay=86_400 + n % 3600,
                )
                for n in range(start, min(count, start + SEED_CHUNK))
            ]
            await app.timers.schedule_many(batch, on_conflict="keep")
        return time.perf_counter() - started
    finally:
        await app.close()


async def bench(url: str, timers_url: str, count: int, batch: int) -> dict[str, object]:
    reset_peak()
    timers_seconds = await timers(timers_url, count)
    clock = FrozenClock(T0)
    app = AsyncApp(url, "bench", clock=clock)
    await app.open()
    try:
        reset_peak()
        seed_seconds = await seed(app, count)
        seed_peak = rss_mb("VmHWM")

        clock.set(T0 + timedelta(days=1))
        materializer = Materializer(
            app.store,
            clock,
            "bench",
            lookahead=timedelta(0),
            batch_size=batch,
            check_tzdata=False,
            **GRACE_OPTION,  # type: ignore[arg-type]
        )
        reset_peak()
        before = rss_mb("VmRSS")
        started = time.perf_counter()
        created = await materializer.tick(clock.now())
        seconds = time.perf_counter() - started
        peak = rss_mb("VmHWM")
        assert created == count, (created, count)

        # One schedule, one occurrence per transaction: the cost a lone schedule pays.
        lone = AsyncApp(url, "lone", clock=clock, store=app.store)
        _, single = await lone.schedules.add("single", "t", every=1)
        one = Materializer(app.store, clock, "lone", lookahead=timedelta(0), check_tzdata=False)
        rounds = 200
        clock.set(single.next_at or clock.now())
        started_one = time.perf_counter()
        made = 0
        for _ in range(rounds):
            made += await one.tick(clock.now())
            clock.advance(1)
        one_seconds = time.perf_counter() - started_one
        assert made == rounds, made
        return {
            "backend": url.split(":", 1)[0],
            "schedules": count,
            "timers_s": round(timers_seconds, 2),
            "schedule_many_per_s": round(count / timers_seconds),
            "seed_s": round(seed_seconds, 2),
            "add_schedules_per_s": round(count / seed_seconds),
            "materialise_s": round(seconds, 2),
            "timers_per_s": round(created / seconds),
            "us_per_occurrence": round(seconds / created * 1e6, 1),
            "batch": batch,
            "rss_before_mb": round(before, 1),
            "rss_peak_mb": round(peak, 1),
            "rss_growth_mb": round(peak - before, 1),
            "seed_rss_peak_mb": round(seed_peak, 1),
            "lone_schedule_ms_per_occurrence": round(one_seconds / rounds * 1000, 2),
        }
    finally:
        await app.close()


def postgres_url(base: str) -> tuple[str, str]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    return f"{base}{'&' if '?' in base else '?'}schema={schema}", schema


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=500, help="schedules per transaction")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument(
        "--rrule",
        action="store_true",
        help="RRULE schedules in 100 zones against as many crons, in alternating rounds",
    )
    parser.add_argument("--rounds", type=int, default=4, help="with --rrule (default 4)")
    parser.add_argument(
        "--pg",
        default=os.environ.get("DUETIME_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    parser.add_argument("--one-kind", choices=("cron", "rrule"), help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_kind:  # one side of a --rrule round, in a process of its own
        result = asyncio.run(one_kind(args.url, args.one_kind, args.count, args.batch))
        print(json.dumps(result), flush=True)
        return
    print(f"$ {' '.join(sys.argv)}  (load average {os.getloadavg()[0]:.2f})", flush=True)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if args.rrule:
        compare(backends, args.count, args.batch, args.rounds, args.pg)
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
        return
    results = []
    if "sqlite" in backends:
        with TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'bench.db'}"
            timers_url = f"sqlite:///{Path(tmp) / 'timers.db'}"
            results.append(asyncio.run(bench(url, timers_url, args.count, args.batch)))
            print(json.dumps(results[-1]), flush=True)
    if "postgres" in backends:
        url, schema = postgres_url(args.pg)
        timers_url, timers_schema = postgres_url(args.pg)
        try:
            results.append(asyncio.run(bench(url, timers_url, args.count, args.batch)))
            print(json.dumps(results[-1]), flush=True)
        finally:
            for name in (schema, timers_schema):
                drop_schema(args.pg, name)
    print()
    keys = list(results[0])
    width = max(map(len, keys))
    for key in keys:
        print(f"{key:<{width}}  " + "  ".join(f"{r[key]!s:>14}" for r in results))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
