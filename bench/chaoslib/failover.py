"""A database failover under load: the primary killed, its standby promoted, the battery's check.

Workers and the producer connect with one multi-host URL naming both servers and
``target_session_attrs=read-write``, as an application on a highly available PostgreSQL does:
libpq skips the dead primary and the still-read-only standby until it is promoted. The clusters
are made by the caller (tests/integration/pg_cluster.py's ``PgCluster.standby_of``), so the test
suite and ``bench/failover.py`` run the same scenario.

With ``lag``, the primary's WAL senders are frozen that long before the failover (a slow or cut
link): a synchronous primary stops acknowledging commits meanwhile; an asynchronous one goes on,
and what it acknowledged in that window is not on the standby it fails over to.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from bench.chaoslib.classify import Report
from bench.chaoslib.scenario import ChaosConfig, run
from bench.chaoslib.tables import StoreTables


class Server(Protocol):
    """One private cluster (tests/integration/pg_cluster.py's PgCluster)."""

    port: int

    def stop(self, mode: str = "fast") -> None: ...
    def promote(self) -> None: ...
    def freeze_replication(self) -> None: ...


def ha_url(*servers: Server, schema: str = "chaos") -> str:
    """A multi-host URL (libpq's own syntax) for ``servers``: libpq takes the writable one."""
    hosts = ",".join(f"127.0.0.1:{server.port}" for server in servers)
    return (
        f"postgresql://postgres@{hosts}/postgres"
        f"?target_session_attrs=read-write&connect_timeout=2&schema={schema}"
    )


def stored_on(server: Server, schema: str = "chaos") -> int:
    """How many of the run's timers ``server`` alone holds, committed."""
    url = f"postgresql://postgres@127.0.0.1:{server.port}/postgres?schema={schema}"
    return len(StoreTables(url).timers())


def commits_after(primary: Server, stored: int, timeout: float = 300.0) -> None:
    """Return once ``primary`` has committed two more batches of the producer's beyond
    ``stored`` timers: it sends a batch only once the one before was acknowledged, so the
    first was acknowledged to it, not only committed. ``timeout`` is a bound for a producer
    that stopped, not a guess at its pace."""
    deadline = time.monotonic() + timeout
    for _ in range(2):
        while (now := stored_on(primary)) <= stored:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the primary committed no new batch in {timeout:.0f} s")
            time.sleep(0.02)
        stored = now


def failover(
    primary: Server, standby: Server, log: list[str], ahead: list[int] | None = None
) -> Callable[[], str]:
    """The fault: kill ``primary`` (``pg_ctl stop -m immediate``: no shutdown checkpoint, like a
    crash), then promote ``standby``; how long each took goes to ``log``. With ``ahead`` (the
    timers the primary held when its standby was cut off, filled in by :func:`freeze`), first
    wait until the primary acknowledged a batch its standby never got."""

    def act() -> str:
        if ahead:
            commits_after(primary, ahead[0])
        began = time.monotonic()
        primary.stop("immediate")
        killed = time.monotonic()
        standby.promote()
        promoted = time.monotonic()
        log.append(
            f"primary killed in {killed - began:.2f} s, standby promoted "
            f"{promoted - killed:.2f} s later"
        )
        return "primary killed, standby promoted"

    return act


def freeze(primary: Server, ahead: list[int] | None = None) -> Callable[[], str]:
    def act() -> str:
        primary.freeze_replication()
        if ahead is not None:
            ahead.append(stored_on(primary))
        return "primary's WAL senders frozen"

    return act


def failover_config(
    *, workers: int = 2, duration: float = 10.0, rate: float = 200.0, horizon: float = 3.0,
    lease: float = 4.0, seed: int = 0,
) -> ChaosConfig:  # fmt: skip
    """The scenario of bench/failover.py and tests/integration/test_failover.py: no random
    faults, and nothing expires (every acknowledged timer must run)."""
    return ChaosConfig(
        workers=workers,
        duration=duration,
        rate=rate,
        faults=frozenset(),
        seed=seed,
        lease=lease,
        handler_seconds=0.005,
        horizon=horizon,
        expires_after=600.0,
        drain_timeout=90.0,
    )


def run_failover(
    config: ChaosConfig,
    primary: Server,
    standby: Server,
    at: float,
    lag: float = 0.0,
    run_ahead: bool = False,
) -> Report:
    """``config`` on ``primary`` (the standby streaming from it, both running), failed over to
    ``standby`` ``at`` seconds into production, replication frozen ``lag`` seconds before.
    ``run_ahead`` (an asynchronous standby, with ``lag``): the failover waits, past ``at``,
    until the primary acknowledged a batch after the freeze, however slowly the producer goes
    on a busy machine; a synchronous primary acknowledges nothing then, so it must not wait."""
    ahead: list[int] | None = [] if run_ahead and lag > 0 else None
    config.planned.append((at, "failover", failover(primary, standby, config.log, ahead)))
    if lag > 0:
        config.planned.append((max(0.0, at - lag), "lag", freeze(primary, ahead)))
    return run(config, ha_url(primary, standby))
