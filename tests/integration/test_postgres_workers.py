"""Many worker processes on one PostgreSQL schema, for real: exactly-once effects under load,
SIGKILL, a server restart, a worker paused past its lease, and wake-ups lost on purpose.

Workers are subprocesses (``pg_worker_app.py``). Their ``tx`` handler is transactional: it
inserts one row per delivery into the user table ``fx`` in the transaction that marks the timer
done. ``fx`` has no unique constraint, so a duplicated effect would show as a second row. Each
test runs on a schema of its own (``?schema=t_<random>``, from the test pool of migrated
schemas) of the ``DUETIME_TEST_PG`` server; the restart test runs a private cluster
(``pg_cluster.py``) instead, as the shared server must never be restarted. Skipped when
PostgreSQL (or, for the restart, the server binaries) is not available; failed instead when
``CI`` is set.

The last test covers a claim whose answer was lost: it must not stay held for ever.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from crash_worker_app import asleep_towards
from pg_cluster import PgCluster, cluster_problem
from pg_worker_app import FX_TABLE, PLAIN, TX, begun
from tests.scale import sized
from tests.waiting import wait_until

from duetime import App, TimerRequest
from duetime.store import create_store
from duetime.store.postgres.settings import parse_url

# The PostgreSQL probe lives beside the store tests; pytest does not put it on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import PG_URL, pooled_schema, with_params

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("pg_worker_app.py")
NS = "ns"
# Timers in the first two tests: 2,000 by default, which shows the exactly-once property as well
# as more would (each test is then a few seconds of work). DUETIME_TEST_SCALE=full runs 50,000:
# on a 2-core machine ~50 s each when it is otherwise idle (~1,100 transactional completions a
# second, one transaction each), ~75 s each when other test suites share it.
# DUETIME_TEST_PG_TIMERS sets an exact count.
MANY = sized(2_000, 50_000, override="DUETIME_TEST_PG_TIMERS")
# Short leases so that rescue happens within seconds (the defaults are 30 s / 10 s).
FAST_LEASE = ("--lease", "2", "--heartbeat", "0.5", "--rescue-interval", "0.5")


# -- helpers --------------------------------------------------------------------------------------


def wait_for_all_done(db: Db, total: int, explain: Callable[[], str], stall: float = 60) -> None:
    """Wait until ``total`` timers are done, failing only when progress stops for ``stall``
    seconds: a slow, loaded machine still passes, a stuck worker still fails within a minute."""
    best, since = -1, time.monotonic()
    while (done := db.done()) < total:
        if done > best:
            best, since = done, time.monotonic()
        elif time.monotonic() - since > stall:
            raise AssertionError(
                f"no progress for {stall} s waiting for {total} timers done ({done} so far)"
                f"\n{explain()}"
            )
        time.sleep(0.25)


def read_lines(path: Path) -> list[list[str]]:
    """The plain handlers' log (``--log``): ``[key, attempt, pid, time]`` for each whole line."""
    if not path.exists():
        return []
    return [line.split(",") for line in path.read_text().split("\n")[:-1]]


def holds_for(check: Callable[[], bool], seconds: float) -> Callable[[], bool]:
    """A check that passes once ``check`` has passed at every call for ``seconds``."""
    since: list[float] = []

    def steady() -> bool:
        if not check():
            since.clear()
            return False
        if not since:
            since.append(time.monotonic())
        return time.monotonic() - since[0] >= seconds

    return steady


class Db:
    """Reads (and the fx table) on the store's schema, over one connection of the test's own."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.conninfo = parse_url(url).conninfo  # search_path = the store's schema
        self._conn: psycopg.Connection[Any] | None = None

    def rows(self, query: str, params: Any = None) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._run(lambda conn: conn.execute(query, params).fetchall())
        return rows

    def execute(self, query: str) -> None:
        self._run(lambda conn: conn.execute(query))

    def _run(self, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        """Run ``work``; once more on a new connection if the server had dropped this one."""
        for attempt in (1, 2):
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=3)
                return work(self._conn)
            except psycopg.OperationalError:
                self.close()
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def value(self, query: str, params: Any = None) -> Any:
        return self.rows(query, params)[0][0]

    def statuses(self) -> Counter[str]:
        return Counter(dict(self.rows("SELECT status, count(*) FROM timers GROUP BY status")))

    def done(self) -> int:
        return int(self.value("SELECT count(*) FROM timers WHERE status = 'done'"))

    def working_for(self, application_name: str) -> int:
        """The backends of ``application_name``'s connections running a statement: not idle,
        nor waiting for a lock or for their client to send more."""
        return int(
            self.value(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                " AND state = 'active' AND wait_event_type IS DISTINCT FROM 'Lock'"
                " AND wait_event_type IS DISTINCT FROM 'Client'",
                (application_name,),
            )
        )

    def fx_rows(self) -> int:
        return int(self.value("SELECT count(*) FROM fx"))

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def prepare(url: str) -> Db:
    """Migrate the schema, create the namespace and the handlers' user table ``fx``."""
    with App(url, NS):
        pass
    db = Db(url)
    db.execute(FX_TABLE)
    return db


class Workers:
    """Worker subprocesses of one test; every one still running is killed at the end."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, url: str, *options: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """A worker with ``options``; ``env`` adds environment variables (e.g. libfaketime's)."""
        stderr = (self.tmp_path / f"worker-{len(self.procs)}.stderr").open("wb")
        cmd = [sys.executable, str(APP), "worker", "--url", url, "--namespace", NS, *options]
        environment = None if env is None else {**os.environ, **env}
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=stderr, env=environment)
        stderr.close()
        self.procs.append(proc)
        return proc

    def stderr(self, proc: subprocess.Popen[bytes] | None = None) -> str:
        parts = []
        for i, each in enumerate(self.procs):
            if proc is not None and each is not proc:
                continue
            text = (self.tmp_path / f"worker-{i}.stderr").read_text(errors="replace")
            parts.append(f"--- worker {i} (pid {each.pid}, rc {each.returncode}) ---\n{text}")
        return "\n".join(parts)[-20_000:]

    def alive(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc in self.procs if proc.poll() is None]

    def stop_all(self, timeout: float = 30) -> None:
        """SIGTERM every live worker; each must finish its work in flight and exit 0."""
        live = self.alive()
        for proc in live:
            proc.send_signal(signal.SIGTERM)
        for proc in live:
            assert proc.wait(timeout) == 0, self.stderr(proc)

    def cleanup(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()  # also ends a stopped (SIGSTOP) process
                proc.wait()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[Workers]:
    w = Workers(tmp_path)
    try:
        yield w
    finally:
        w.cleanup()


@pytest.fixture
def schema() -> Iterator[str]:
    with pooled_schema() as name:
        yield name


@pytest.fixture
def cluster() -> Iterator[PgCluster]:
    """A private PostgreSQL server of this test only, free to be stopped and started."""
    problem = cluster_problem()
    if problem is not None:
        message = f"cannot run a private PostgreSQL cluster: {problem}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    made = PgCluster.create()
    try:
        made.start()
        yield made
    finally:
        made.remove()


def schedule(
    url: str, count: int, *, start_in: float, spread: float, type: str = TX, prefix: str = "t"
) -> list[str]:
    """Store ``count`` timers due evenly over ``spread`` s from ``start_in`` s from now."""
    first = datetime.now(UTC) + timedelta(seconds=start_in)
    keys = [f"{prefix}-{i:05d}" for i in range(count)]
    with App(url, NS) as app:
        for start in range(0, count, 2_000):
            app.timers.schedule_many(
                [
                    TimerRequest(
                        type, None, at=first + timedelta(seconds=spread * i / count), key=k
                    )
                    for i, k in enumerate(keys[start : start + 2_000], start)
                ]
            )
    return keys


def node_pid(node_id: str) -> int:
    return int(node_id.split("-")[-2])  # "<host>-<pid>-<hex>"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return ticks / os.sysconf("SC_CLK_TCK")


def explain(db: Db, workers: Workers) -> Callable[[], str]:
    """What a timed-out wait shows: the timers by status, the attempts, the workers' logs."""

    def describe() -> str:
        try:
            attempts = db.rows("SELECT outcome, count(*) FROM all_attempts GROUP BY 1")
            running = db.rows(
                "SELECT lease_owner, count(*), min(lease_expires_at - now()), "
                "max(lease_expires_at - now()) FROM timers WHERE status = 'running' GROUP BY 1"
            )
            unlocked = db.value(
                "SELECT count(*) FROM "
                "(SELECT id FROM timers WHERE status = 'running' FOR UPDATE SKIP LOCKED) r"
            )
            nodes = db.rows("SELECT id, in_flight FROM nodes")
            sessions = db.rows(
                "SELECT state, count(*), max(now() - xact_start) FROM pg_stat_activity "
                "WHERE application_name = 'duetime' GROUP BY 1"
            )
            state = (
                f"timers {dict(db.statuses())}, attempts {dict(attempts)}\n"
                f"running by owner (count, lease left min/max): {running}, not locked: "
                f"{unlocked}\nnodes (id, in flight) {nodes}\nsessions {sessions}"
            )
        except psycopg.Error as exc:
            state = f"(database unreadable: {exc})"
        return f"{state}\n{workers.stderr()[-6000:]}"

    return describe


def check_exactly_once(db: Db, keys: list[str]) -> None:
    """Every timer done once; exactly one fx row each, written by the attempt recorded done."""
    n = len(keys)
    db.execute("ANALYZE timers; ANALYZE attempts; ANALYZE fx")  # good plans for the joins below
    assert db.statuses() == Counter({"done": n})
    assert db.fx_rows() == n, "an effect was duplicated or lost"
    assert db.value("SELECT count(DISTINCT key) FROM fx") == n
    assert db.value("SELECT count(*) FROM fx WHERE NOT (key = ANY (%s))", (keys,)) == 0
    # Each timer has one attempt recorded done, its last one; the fx row is that attempt's.
    mismatched = db.rows(
        """
        SELECT t.key, t.attempts, a.number, a.node_id, fx.attempt, fx.pid
        FROM timers t
        JOIN attempts a ON a.timer_id = t.id AND a.outcome = 'done'
        JOIN fx ON fx.key = t.key
        WHERE a.number <> t.attempts OR fx.attempt <> a.number
           OR split_part(a.node_id, '-', array_length(string_to_array(a.node_id, '-'), 1) - 1)
              <> fx.pid::text
        LIMIT 10
        """
    )
    assert mismatched == []
    assert db.value("SELECT count(*) FROM all_attempts WHERE outcome = 'done'") == n
    assert db.value("SELECT count(*) FROM all_attempts WHERE finished_at IS NULL") == 0
    assert db.value("SELECT count(*) FROM nodes") == 0


# -- 1. many workers ------------------------------------------------------------------------------
def test_three_worker_processes_one_effect_per_timer(
    schema: str, workers: Workers, tmp_path: Path
) -> None:
    url = with_params(PG_URL, schema=schema, pool_max="6")
    db = prepare(url)
    procs = [workers.start(url) for _ in range(3)]
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 3, 30, "3 workers registered")

    began = time.monotonic()
    keys = schedule(url, MANY, start_in=2.0, spread=3.0)
    scheduled = time.monotonic() - began
    wait_for_all_done(db, MANY, explain(db, workers))
    elapsed = time.monotonic() - began
    workers.stop_all()

    check_exactly_once(db, keys)
    assert db.value("SELECT max(attempts) FROM timers") == 1  # no kills: no redeliveries
    per_worker = Counter(dict(db.rows("SELECT pid, count(*) FROM fx GROUP BY pid")))
    assert set(per_worker) == {proc.pid for proc in procs}, "not every worker took part"
    db.close()
    print(
        f"{MANY} timers: scheduled in {scheduled:.1f} s, all done {elapsed:.1f} s after the "
        f"first was stored; effects per worker {dict(per_worker)}"
    )


# -- 2. SIGKILL mid-run ---------------------------------------------------------------------------
def test_sigkill_mid_run_keeps_effects_exactly_once(schema: str, workers: Workers) -> None:
    url = with_params(PG_URL, schema=schema, pool_max="6")
    db = prepare(url)
    for _ in range(3):
        workers.start(url, *FAST_LEASE)
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 3, 30, "3 workers registered")

    began = time.monotonic()
    # Due faster than the workers finish them (50,000 over 3 s, or as many a second): a backlog,
    # so each worker has a batch in flight whenever the kill comes.
    keys = schedule(url, MANY, start_in=2.0, spread=3.0 * MANY / 50_000)
    rng = random.Random()
    threshold = rng.randrange(MANY // 5, MANY // 2)
    wait_until(lambda: db.fx_rows() >= threshold, 120, f"{threshold} effects", every=0.02)
    victim = rng.choice(workers.alive())
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    left = MANY - db.done()
    assert left > 0, "the kill came too late to test anything"
    workers.start(url, *FAST_LEASE)  # the restarted worker

    wait_for_all_done(db, MANY, explain(db, workers))
    elapsed = time.monotonic() - began
    workers.stop_all()

    check_exactly_once(db, keys)
    # The killed worker's work in flight was rescued: its attempts are recorded lost, and each of
    # those timers was then done by another worker in a later attempt.
    lost = db.rows("SELECT node_id, count(*) FROM all_attempts WHERE outcome = 'lost' GROUP BY 1")
    assert lost, "nothing was in flight at the kill?"
    assert {node_pid(node) for node, _ in lost} == {victim.pid}
    rescued = db.value("SELECT count(DISTINCT timer_id) FROM all_attempts WHERE outcome = 'lost'")
    assert db.value("SELECT count(*) FROM timers WHERE attempts > 1") == rescued
    assert db.value("SELECT count(*) FROM fx WHERE pid = %s", (victim.pid,)) > 0
    db.close()
    print(
        f"SIGKILL after {threshold} effects ({left} left): {rescued} timers rescued, "
        f"exactly {MANY} effects; all done in {elapsed:.1f} s"
    )


# -- 3. the server restarts -----------------------------------------------------------------------
RESTART_TIMERS = sized(2_000, 5_000)
OUTAGE = 4.0


def test_postgres_restart_mid_run_workers_reconnect_without_spinning(
    cluster: PgCluster, workers: Workers
) -> None:
    url = with_params(cluster.url(), schema="duetime_restart")
    db = prepare(url)
    # A lease longer than the outage; attempts cut off by the crash retry after a short backoff.
    options = (
        "--lease",
        "8",
        "--heartbeat",
        "1",
        "--rescue-interval",
        "1",
        "--backoff-base",
        "0.5",
    )
    procs = [workers.start(url, *options) for _ in range(3)]
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 3, 30, "3 workers registered")
    keys = schedule(url, RESTART_TIMERS, start_in=1.0, spread=6.0)
    wait_until(lambda: db.fx_rows() >= RESTART_TIMERS // 5, 60, "some effects", every=0.02)
    db.close()

    cluster.stop("immediate")  # as a crash: connections cut, crash recovery on start
    down_at = time.monotonic()
    cpu_before = {proc.pid: cpu_seconds(proc.pid) for proc in procs}
    time.sleep(OUTAGE)  # timed: the outage lasts this long; the workers' CPU is measured
    cpu_used = {pid: cpu_seconds(pid) - used for pid, used in cpu_before.items()}
    outage = time.monotonic() - down_at
    cluster.start()
    up_at = time.monotonic()
    effects_then = db.fx_rows()
    done_then = db.done()

    def progressing() -> bool:
        return db.fx_rows() > effects_then

    wait_until(progressing, 30, "work after the restart", 0.02, explain(db, workers))
    recovered = time.monotonic() - up_at
    wait_until(
        lambda: db.done() == RESTART_TIMERS, 90, "every timer done", 0.25, explain(db, workers)
    )
    assert all(proc.poll() is None for proc in procs), workers.stderr()
    workers.stop_all()

    check_exactly_once(db, keys)
    db.close()
    share = {pid: used / outage for pid, used in cpu_used.items()}
    print(
        f"outage {outage:.1f} s: worker CPU {', '.join(f'{s:.1%}' for s in share.values())} of "
        f"a core; back at work {recovered:.2f} s after the server ({done_then} done then)"
    )
    assert sum(cpu_used.values()) < 0.5 * outage, f"workers spun while PostgreSQL was down: {share}"
    assert recovered < 10.0, f"workers took {recovered:.1f} s to reconnect"


# -- 4. lease fencing -----------------------------------------------------------------------------
PAUSE_TIMERS = 30  # of each type


def test_worker_paused_past_its_lease_cannot_finish_the_attempt_taken_over(
    schema: str, workers: Workers, tmp_path: Path
) -> None:
    # The paused worker has few connections: its transactional handlers beyond pool_max wait for
    # one with their timer claimed but not locked, so another node can take them over, as it can
    # the plain ones. Those that had a connection hold their row locked in an open transaction:
    # no other node can take them (rescue skips locked rows), and they complete after SIGCONT.
    log = tmp_path / "plain.log"
    started_log = tmp_path / "started.log"
    paused_name = f"paused_{schema}"  # its connections' application_name
    paused_url = with_params(PG_URL, schema=schema, pool_max="3", application_name=paused_name)
    url = with_params(PG_URL, schema=schema, pool_max="4")
    db = prepare(url)
    now = datetime.now(UTC)
    with App(url, NS) as app:
        requests = []
        for i in range(PAUSE_TIMERS):
            due = now - timedelta(milliseconds=2 * PAUSE_TIMERS - 2 * i)
            requests.append(TimerRequest(TX, None, at=due, key=f"tx-{i:03d}"))
            requests.append(TimerRequest(PLAIN, None, at=due, key=f"plain-{i:03d}"))
        app.timers.schedule_many(requests)
    total = 2 * PAUSE_TIMERS
    concurrency = 40
    paused = workers.start(
        paused_url, *FAST_LEASE, "--concurrency", str(concurrency), "--delay", "1.5",
        "--plain-delay", "1.5", "--fail-first", "--log", str(log),
        "--started-log", str(started_log),
    )  # fmt: skip
    # At least its fill: rows a claim took beyond the free slots (the prefetch allowance, once
    # the worker has a pace) read 'running' too, so the count may step past the fill.
    wait_until(
        lambda: db.value("SELECT count(*) FROM timers WHERE status = 'running'") >= concurrency,
        30,
        "the first worker to claim its fill",
        every=0.01,
    )
    # Its handlers are under way (they take 1.5 s): a plain one at least has begun.
    wait_until(
        lambda: begun(started_log, paused.pid, PLAIN), 30, "a plain handler begun", every=0.01
    )
    paused.send_signal(signal.SIGSTOP)
    stopped_at = time.monotonic()
    # What it had sent the server is done (a commit lands), then what it completed is counted.
    wait_until(lambda: db.working_for(paused_name) == 0, 30, "the stopped worker's statements done")
    done_before_pause = db.value("SELECT count(*) FROM fx WHERE pid = %s", (paused.pid,))
    (paused_node,) = [row[0] for row in db.rows("SELECT id FROM nodes")]
    assert node_pid(paused_node) == paused.pid

    others = [workers.start(url, *FAST_LEASE, "--log", str(log)) for _ in range(2)]

    def only_locked_left() -> bool:
        """All done but the paused worker's timers that no one can take: their rows are locked."""
        statuses = db.statuses()
        if statuses["done"] + statuses["running"] != total:
            return False
        running = "SELECT id FROM timers WHERE status = 'running'"
        if db.value(f"SELECT count(*) FROM ({running} AND lease_owner <> %s) r", (paused_node,)):
            return False
        unlocked = db.value(f"SELECT count(*) FROM ({running} FOR UPDATE SKIP LOCKED) r")
        return bool(unlocked == 0)

    # Past the paused worker's lease, and steadily so: a rescue under way also locks rows.
    settled = holds_for(lambda: time.monotonic() - stopped_at > 2.5 and only_locked_left(), 1.0)
    wait_until(settled, 30, "the others to take over", 0.05, explain(db, workers))
    taken = db.value(
        "SELECT count(*) FROM all_attempts WHERE node_id = %s AND outcome = 'lost'", (paused_node,)
    )
    assert taken > 0, "nothing was taken over from the paused worker"
    locked = db.value(
        "SELECT count(*) FROM timers WHERE status = 'running' AND lease_owner = %s",
        (paused_node,),
    )

    paused.send_signal(signal.SIGCONT)
    wait_until(lambda: db.done() == total, 30, "every timer done", 0.05, explain(db, workers))

    def begun_ended() -> bool:
        """Every plain handler the resumed worker began has ended (and logged its line)."""
        ended = {(key, int(n)) for key, n, pid, _ in read_lines(log) if int(pid) == paused.pid}
        return begun(started_log, paused.pid, PLAIN) <= ended

    wait_until(begun_ended, 30, "the resumed worker's handlers to end", 0.05)
    assert paused.poll() is None, workers.stderr(paused)
    workers.stop_all()  # each records its outcomes (fenced off) and exits 0

    # One terminal state each: one attempt done (the last), every other one lost.
    assert db.statuses() == Counter({"done": total})
    outcomes = Counter(dict(db.rows("SELECT outcome, count(*) FROM all_attempts GROUP BY 1")))
    assert set(outcomes) <= {"done", "lost", "retry"}, outcomes
    # A retry is the paused worker's own: a plain row whose claim was still open when it stopped
    # (its rows locked, so no one could take them) is its to run after SIGCONT, and its first
    # attempts fail in this worker. Each such timer was then done by a later attempt.
    retried = db.rows(
        "SELECT a.node_id, t.type, t.attempts > a.number FROM all_attempts a "
        "JOIN timers t ON t.id = a.timer_id WHERE a.outcome = 'retry'"
    )
    assert all(row == (paused_node, PLAIN, True) for row in retried), retried
    assert outcomes["done"] == total
    assert outcomes["lost"] == taken
    # The taken-over attempts stay lost: the resumed worker's outcomes (its plain handlers
    # failed their first attempt after SIGCONT: it tried to record a retry) were fenced off.
    late = {
        key for key, attempt, pid, _ in read_lines(log) if int(pid) == paused.pid and attempt == "1"
    }
    assert late, "the paused worker's plain handlers never finished"
    lost_plain = {
        row[0]
        for row in db.rows(
            "SELECT t.key FROM timers t JOIN all_attempts a ON a.timer_id = t.id "
            "WHERE a.node_id = %s AND a.outcome = 'lost' AND t.type = %s",
            (paused_node, PLAIN),
        )
    }
    assert lost_plain
    # Those its handlers had begun finished late and were fenced off; rows it had claimed but
    # not begun when it stopped are never begun after SIGCONT (their lease is gone), so some
    # taken-over ones may have no late line at all — but the fence must have been exercised.
    assert lost_plain & late, (lost_plain, late)
    # Transactional: one fx row per timer, by the attempt recorded done; the taken-over ones were
    # done by the others, the locked ones by the resumed worker itself.
    keys = [f"tx-{i:03d}" for i in range(PAUSE_TIMERS)]
    assert db.value("SELECT count(*) FROM fx") == PAUSE_TIMERS
    assert db.value("SELECT count(DISTINCT key) FROM fx") == PAUSE_TIMERS
    assert set(keys) == {row[0] for row in db.rows("SELECT key FROM fx")}
    mismatched = db.rows(
        "SELECT t.key FROM timers t "
        "JOIN all_attempts a ON a.timer_id = t.id AND a.outcome = 'done' "
        "JOIN fx ON fx.key = t.key WHERE fx.attempt <> a.number OR fx.attempt <> t.attempts"
    )
    assert mismatched == []
    # Only the attempts it held locked can have been completed by the resumed worker (they may
    # also have been ended by the server meanwhile, e.g. by idle_in_transaction_session_timeout).
    by_paused = db.value("SELECT count(*) FROM fx WHERE pid = %s", (paused.pid,))
    by_paused -= done_before_pause  # those it completed before it was stopped
    assert by_paused <= locked, (by_paused, locked, done_before_pause)
    taken_tx = db.value(
        "SELECT count(*) FROM all_attempts a JOIN timers t ON t.id = a.timer_id "
        "WHERE a.node_id = %s AND a.outcome = 'lost' AND t.type = %s",
        (paused_node, TX),
    )
    db.close()
    print(
        f"paused worker: {taken} attempts taken over ({taken_tx} transactional), "
        f"{locked} held locked, {by_paused} completed after SIGCONT; others: "
        f"{[p.pid for p in others]}"
    )


# -- 5. wake-ups are hints ------------------------------------------------------------------------
RECHECK = 1.0


def test_without_notifications_the_safety_recheck_bounds_lateness(
    schema: str, workers: Workers, tmp_path: Path
) -> None:
    url = with_params(PG_URL, schema=schema, pool_max="3")
    db = prepare(url)
    with App(url, NS) as app:
        far = app.schedule(TX, None, at=datetime.now(UTC) + timedelta(hours=1), key="far")
    idle_log = tmp_path / "idle.log"
    options = ("--recheck", str(RECHECK), "--idle-log", str(idle_log))
    worker = workers.start(with_params(url, listen="false"), *options)
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 1, 30, "the worker registered")
    # It has read the next due time (an hour away) and gone to sleep.
    due = far.timer.due_at
    wait_until(lambda: asleep_towards(idle_log, due) == {worker.pid}, 30, "the worker asleep")

    rng = random.Random()
    keys = []
    with App(url, NS) as app:
        for i in range(15):
            time.sleep(rng.uniform(0.05, 0.6))
            keys.append(app.emit(TX, None, key=f"e-{i:02d}").timer.key)
    wait_until(
        lambda: db.value("SELECT count(*) FROM fx") == len(keys), 3 * RECHECK + 10, "every effect"
    )
    lateness = [
        float(late)
        for (late,) in db.rows(
            "SELECT extract(epoch FROM fx.at - t.due_at) FROM fx JOIN timers t USING (key)"
        )
    ]
    workers.stop_all()
    statuses = db.statuses()
    db.close()
    assert statuses == Counter({"done": len(keys), "scheduled": 1})
    print(f"lateness without notifications: max {max(lateness):.2f} s, recheck {RECHECK} s")
    assert min(lateness) >= 0
    assert max(lateness) < RECHECK + 2.0
    # The notifications really were off: some emits waited for the re-check.
    assert max(lateness) > 0.1, lateness


# -- 6. a claim whose answer was lost -------------------------------------------------------------
def test_timers_claimed_in_a_workers_name_it_never_heard_of_are_rescued(
    schema: str, workers: Workers
) -> None:
    """A claim can commit on the server while its answer never reaches the worker (the
    connection breaks between the two, as when PostgreSQL restarts). The worker does not know
    it holds those timers; its heartbeat must not keep them to itself for ever."""
    url = with_params(PG_URL, schema=schema, pool_max="3")
    db = prepare(url)
    keys = [f"o-{i}" for i in range(5)]
    workers.start(url, *FAST_LEASE)
    wait_until(lambda: db.value("SELECT count(*) FROM nodes") == 1, 30, "the worker registered")
    node = db.value("SELECT id FROM nodes")
    with App(url, NS) as app:
        # Due soon, once the worker runs (so it cannot claim them first): a rescue keeps a row
        # due at its own instant (never earlier), so the rescued timers run once it comes.
        later = datetime.now(UTC) + timedelta(seconds=3)
        app.timers.schedule_many([TimerRequest(TX, None, at=later, key=key) for key in keys])

    async def claim_in_its_name() -> int:
        store = create_store(url)
        await store.open()
        try:
            now = datetime.now(UTC)
            claimed = await store.claim_due(
                NS, None, now, 10, node, now + timedelta(seconds=2), due_by=now + timedelta(hours=2)
            )
            return len(claimed)
        finally:
            await store.close()

    assert asyncio.run(claim_in_its_name()) == len(keys)
    # Lease 2 s, rescue every 0.5 s: rescued within seconds, then done by the worker itself.
    wait_until(
        lambda: db.done() == len(keys), 10, "the orphaned timers done", 0.1, explain(db, workers)
    )
    workers.stop_all()
    assert db.value("SELECT count(*) FROM all_attempts WHERE outcome = 'lost'") == len(keys)
    check_exactly_once(db, keys)
    db.close()
