"""A failover or a switchover by Patroni under load, and the battery's check of every timer.

Workers and the producer connect with the cluster's multi-host URL (every server,
``target_session_attrs=read-write``, ``durable_claims=true``). The fault is Patroni's to carry
out: the test only kills the leader's postmaster (``kill -9``; Patroni, told by
``primary_start_timeout: 0`` not to restart it, hands the leader key to the synchronous standby)
or asks for a switchover through Patroni's REST API. The fault's instant ends once another
member leads and a write through the URL commits: that span is the failover time
(:class:`Measured`). The cluster is made by the caller (tests/integration/patroni_cluster.py),
so the tests and ``bench/patroni_failover.py`` run the same scenario.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from bench.chaoslib.classify import Report
from bench.chaoslib.scenario import ChaosConfig, run
from bench.chaoslib.tables import StoreTables


class Member(Protocol):
    name: str


class HaCluster(Protocol):
    """tests/integration/patroni_cluster.py's PatroniCluster."""

    def url(self, **params: str) -> str: ...
    def kill_leader_postmaster(self) -> Member: ...
    def switchover(self) -> Member: ...
    def wait_new_leader(self, old: Member, timeout: float = 60.0) -> Member: ...


FAULTS = ("kill", "switchover")


@dataclass(slots=True)
class Measured:
    """What the fault took: seconds from the kill (or the switchover's request) to the new
    leader committing a write, and who led before and after."""

    seconds: list[float] = field(default_factory=list)
    leaders: list[str] = field(default_factory=list)


def fault(
    cluster: HaCluster, kind: str, measured: Measured, loaded: Callable[[], bool]
) -> Callable[[], str]:
    """The planned action: once ``loaded`` says timers flow (the producer and the workers are
    up: a slow machine may take seconds to start them), ``kill`` (the leader's postmaster) or
    ``switchover``; returns once a new leader takes writes."""
    if kind not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, not {kind!r}")

    def act() -> str:
        deadline = time.monotonic() + 60
        while not loaded():
            if time.monotonic() > deadline:
                raise RuntimeError("no timer was handled within 60 s: no load to fail over under")
            time.sleep(0.05)
        began = time.monotonic()
        old = cluster.kill_leader_postmaster() if kind == "kill" else cluster.switchover()
        new = cluster.wait_new_leader(old)
        measured.seconds.append(time.monotonic() - began)
        measured.leaders.append(f"{old.name} -> {new.name}")
        return f"{kind}: {old.name} -> {new.name}"

    return act


def run_patroni(
    config: ChaosConfig, cluster: HaCluster, kind: str, at: float, *, durable_claims: bool = True
) -> tuple[Report, Measured]:
    """``config`` on ``cluster``, its leader failed (``kind``) ``at`` seconds into production,
    or later: once a second's worth of timers (``config.rate``) is done. ``durable_claims``:
    the URL's, so that a claim the workers acted on is on the synchronous standby (without it
    a kill may make the promoted server hand out an attempt again: ``reclaimed``).
    The fault is recorded as a ``failover`` (the battery's kind for a change of primary)."""
    measured = Measured()
    url = cluster.url(schema="chaos", durable_claims=str(durable_claims).lower())
    tables = StoreTables(url)
    min_done = int(config.rate)  # about a second of load handled

    def loaded() -> bool:
        return tables.done() >= min_done

    config.planned.append((at, "failover", fault(cluster, kind, measured, loaded)))
    report = run(config, url)
    return report, measured
