"""The total-queue check: every acknowledged timer, classified once the run has drained.

Inputs are independent of the worker's own view: the producer's acknowledgements, the handlers'
start records (reference clock), and the store's timers and attempts read with SQL. A timer is

- **lost**: acknowledged, never started, and not finished without running (expired); or
  expired before its window could have closed: ``due_at + expires_after`` still ahead, by the
  reference clock, when the check ran (a worker whose clock ran ahead judged it too late);
- **duplicated**: started more than once (at-least-once allows it after a fault; the cause is
  read from what happened to the node of the earlier start);
- **early**: started before its ``due_at`` by the reference clock;
- **unexpected**: started but never acknowledged nor in doubt, or started with a payload that
  is not the one scheduled;
- **overwritten**: its attempts disagree with the fences: a finishing outcome (done, expired,
  dead, cancelled) on an attempt that was not the last, a finished timer whose last attempt
  does not carry it, one attempt number started twice, or an attempt recorded under a node
  other than the one whose handler ran it;
- **stale start**: a handler began an attempt after the store had recorded that attempt
  ``lost`` on the node that began it (its lease ran out and another node took it over): a
  worker woken from a pause must not start what it no longer holds. Its start was recorded by
  the reference clock, the ``lost`` outcome by the database's, the machine's clock both;
- **worker exit**: a worker process that ended by itself (not killed by the injector nor
  stopped at the end): nothing a timer or a handler does may stop a worker;
- **reclaimed**: one attempt number started twice with a database crash or failover between
  the two starts: a claim commits without waiting for its flush (or a standby), so the server
  that came back never saw the first claim and the timer was claimed under the same number
  again. At-least-once allows it (it is counted in ``duplicated`` too), not a fence broken.
  A row claimed just before the fault ended may start a little after it (held until its due
  instant, up to the claim-ahead, or waiting for a slot): its start counts as before the fault
  within :data:`HELD_AFTER_CLAIM_US` of the fault's end.

Lateness is the first start's reference instant minus ``due_at``. The delivery pause is the
longest time between two consecutive handler starts (the producer keeps work due all along, so
in a healthy run it is milliseconds; a database failover shows as one long gap).
"""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.chaoslib.records import Ack, Start
from bench.chaoslib.tables import AttemptRow, TimerRow

FINAL = frozenset({"done", "expired", "dead", "cancelled"})


@dataclass(slots=True)
class NodeFate:
    """One worker process (a node id) and what the faults did to it."""

    node: str
    skew: float
    started_us: int
    killed_us: int | None = None
    exited: int | None = None
    """The exit status of a process that ended by itself (not killed, not stopped)."""
    stops: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class FaultEvent:
    kind: str
    at_us: int
    """When the fault was over (a planned failover: once the standby was promoted)."""
    target: str
    began_us: int | None = None
    """When it began, for a fault that takes a while (a failover: the primary's kill); None:
    at ``at_us``. A worker may reconnect to the promoted standby and claim again before the
    promotion's command has returned, so a claim lost by the fault may be retaken inside it."""


def loses_claims(fault: FaultEvent) -> bool:
    """Whether the server may have forgotten a claim it acknowledged (see ``reclaimed``): a
    failover, or a restart after a crash (``immediate``; a clean stop flushes everything)."""
    return fault.kind == "failover" or (fault.kind == "dbrestart" and "immediate" in fault.target)


EXAMPLES = 10


@dataclass(slots=True)
class Report:
    """The classification of one run; :attr:`ok` is the verdict."""

    acknowledged: int = 0
    in_doubt: int = 0
    starts: int = 0
    ran: int = 0
    done: int = 0
    expired: int = 0
    lost: int = 0
    unfinished: int = 0
    duplicated: int = 0
    duplicate_causes: dict[str, int] = field(default_factory=dict)
    early: int = 0
    early_by_skew: dict[str, int] = field(default_factory=dict)
    earliest_ms: float = 0.0
    unexpected: int = 0
    overwritten: int = 0
    stale_starts: int = 0
    out_of_order: int = 0
    """Attempts whose recorded instants contradict each other: claimed after they started, or
    started after they finished (each attempt recorded, whatever its outcome)."""
    worker_exits: int = 0
    reclaimed: int = 0
    expired_early: int = 0
    """Counted in ``lost`` too: expired without running while the window was still open."""
    expired_by_skew: dict[str, int] = field(default_factory=dict)
    """Expired attempts by the clock skew of the node that judged them too late."""
    lateness_ms: dict[str, float] = field(default_factory=dict)
    pause_ms: float = 0.0
    """The longest time between two consecutive handler starts."""
    faults: dict[str, int] = field(default_factory=dict)
    nodes: dict[str, float] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems()

    def problems(self) -> list[str]:
        """What broke a promise: lost, early, unexpected, overwritten, a stale start, an
        attempt whose instants are out of order or a worker that exited, with their counts."""
        names = (
            "lost",
            "early",
            "unexpected",
            "overwritten",
            "stale_starts",
            "out_of_order",
            "worker_exits",
        )
        return [f"{name} {getattr(self, name)}" for name in names if getattr(self, name)]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok, "problems": self.problems()}

    def example(self, category: str, text: str) -> None:
        found = self.examples.setdefault(category, [])
        if len(found) < EXAMPLES:
            found.append(text)


def classify(
    acks: dict[str, Ack],
    starts: list[Start],
    timers: dict[str, TimerRow],
    attempts: list[AttemptRow],
    nodes: dict[str, NodeFate],
    faults: list[FaultEvent],
    checked_us: int,
) -> Report:
    """``checked_us``: the reference instant the store was read at, after the drain."""
    report = Report(
        acknowledged=sum(1 for a in acks.values() if a.acked),
        in_doubt=sum(1 for a in acks.values() if not a.acked),
        starts=len(starts),
        faults=dict(Counter(f.kind for f in faults)),
        nodes={n.node: n.skew for n in nodes.values()},
    )
    by_key: dict[str, list[Start]] = defaultdict(list)
    for start in sorted(starts, key=lambda s: (s.attempt, s.at_us)):
        by_key[start.key].append(start)
    rows: dict[str, list[AttemptRow]] = defaultdict(list)
    for row in attempts:
        rows[row.key].append(row)

    _unexpected(report, acks, by_key)
    _early_and_late(report, acks, by_key, nodes)
    report.pause_ms = longest_gap_ms([s.at_us for s in starts])
    _fates(report, acks, by_key, timers, checked_us)
    _duplicates(report, by_key, rows, nodes, faults)
    _overwritten(report, by_key, timers, rows, faults)
    _stale_starts(report, starts, attempts)
    _out_of_order(report, attempts)
    for fate in nodes.values():
        if fate.exited is not None:
            report.worker_exits += 1
            report.example("worker exits", f"{fate.node}: exited by itself, status {fate.exited}")
    expiring = [nodes[r.node].skew if r.node in nodes else 0.0 for r in attempts
                if r.outcome == "expired"]  # fmt: skip
    report.expired_by_skew = dict(Counter(f"{skew:+g}s" for skew in expiring))
    return report


def _unexpected(report: Report, acks: dict[str, Ack], by_key: dict[str, list[Start]]) -> None:
    for key, started in by_key.items():
        if key not in acks:
            report.unexpected += 1
            report.example("unexpected", f"{key}: started, never scheduled")
            continue
        wanted = {"n": int(key[1:])}
        wrong = [s for s in started if _payload(s.payload) != wanted]
        if wrong:
            report.unexpected += 1
            report.example("unexpected", f"{key}: payload {wrong[0].payload}")


def _payload(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _early_and_late(
    report: Report,
    acks: dict[str, Ack],
    by_key: dict[str, list[Start]],
    nodes: dict[str, NodeFate],
) -> None:
    lateness: list[float] = []
    early_by_skew: Counter[str] = Counter()
    for key, started in by_key.items():
        ack = acks.get(key)
        if ack is None:
            continue
        lateness.append((min(s.at_us for s in started) - ack.due_us) / 1000)
        early = [s for s in started if s.at_us < ack.due_us]
        if early:
            report.early += 1
            first = min(early, key=lambda s: s.at_us)
            ahead_ms = (ack.due_us - first.at_us) / 1000
            report.earliest_ms = max(report.earliest_ms, ahead_ms)
            skew = nodes[first.node].skew if first.node in nodes else 0.0
            early_by_skew[f"{skew:+g}s"] += 1
            report.example("early", f"{key}: {ahead_ms:.3f} ms early on {first.node}")
    report.early_by_skew = dict(early_by_skew)
    report.lateness_ms = percentiles(lateness)


def longest_gap_ms(instants_us: list[int]) -> float:
    """The longest time between two consecutive ``instants_us`` (fewer than two: 0)."""
    ordered = sorted(instants_us)
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered)]
    return round(max(gaps, default=0) / 1000, 1)


def percentiles(values: list[float]) -> dict[str, float]:
    """p50 / p95 / p99 / max by nearest rank (empty: nothing)."""
    if not values:
        return {}
    ordered = sorted(values)
    out = {}
    for name, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        out[name] = round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)
    out["max"] = round(ordered[-1], 2)
    return out


def _fates(
    report: Report,
    acks: dict[str, Ack],
    by_key: dict[str, list[Start]],
    timers: dict[str, TimerRow],
    checked_us: int,
) -> None:
    for key, ack in acks.items():
        if not ack.acked:
            continue
        row = timers.get(key)
        status = row.status if row is not None else "missing"
        started = key in by_key
        report.ran += started
        report.done += status == "done"
        report.expired += status == "expired"
        window_open = ack.due_us + ack.expires_after_us > checked_us
        if not started and status == "expired" and window_open:
            report.lost += 1
            report.expired_early += 1
            report.example("lost", f"{key}: expired without running, its window still open")
        elif not started and status != "expired":
            report.lost += 1
            report.example("lost", f"{key}: never started, status {status}")
        elif started and status not in FINAL:
            report.unfinished += 1
            report.example("unfinished", f"{key}: started, status {status}")


def _duplicates(
    report: Report,
    by_key: dict[str, list[Start]],
    rows: dict[str, list[AttemptRow]],
    nodes: dict[str, NodeFate],
    faults: list[FaultEvent],
) -> None:
    causes: Counter[str] = Counter()
    for key, started in by_key.items():
        if len(started) < 2:
            continue
        report.duplicated += 1
        outcomes = {r.number: r.outcome for r in rows.get(key, [])}
        claimed = {r.number: r.claimed_us for r in rows.get(key, [])}
        for earlier, later in itertools.pairwise(started):
            since = claimed.get(earlier.attempt) or earlier.at_us
            cause = _cause(earlier, later, outcomes.get(earlier.attempt), nodes, faults, since)
            causes[cause] += 1
    report.duplicate_causes = dict(causes)


def _cause(
    earlier: Start,
    later: Start,
    outcome: str | None,
    nodes: dict[str, NodeFate],
    faults: list[FaultEvent],
    since: int | None = None,
) -> str:
    """Why ``earlier`` was started again: its handler failed (a retry), or what happened to
    its node between the two starts. A pause counts from ``since``, its attempt's claim: one
    that fell between the claim and the handler's start delays the start past the other
    node's (a stale start), and is its cause all the same."""
    if outcome == "retry":
        return "the handler failed (a retry)"
    fate = nodes.get(earlier.node)
    if fate is not None:
        if fate.killed_us is not None and earlier.at_us <= fate.killed_us <= later.at_us:
            return "kill -9"
        first = earlier.at_us if since is None else min(since, earlier.at_us)
        if any(first <= begin <= later.at_us for begin, _ in fate.stops):
            return "SIGSTOP past the lease"
    db = [f for f in faults if f.kind in ("dbrestart", "dropconn")]
    if any(earlier.at_us <= f.at_us <= later.at_us for f in db):
        return "database restart or dropped connection"
    if any(f.kind == "failover" and earlier.at_us <= f.at_us <= later.at_us for f in faults):
        return "failover (its completion was on the old primary only)"
    if fate is not None and fate.skew:
        return f"clock skew of the first node ({fate.skew:+g} s)"
    rescuer = nodes.get(later.node)
    if rescuer is not None and rescuer.skew > 0:
        return f"clock skew of the next node ({rescuer.skew:+g} s: leases look expired)"
    if outcome == "lost":
        return "rescued, no fault on its node (its lease ran out)"
    return f"other (attempt {earlier.attempt} outcome {outcome})"


def _stale_starts(report: Report, starts: list[Start], attempts: list[AttemptRow]) -> None:
    lost = {
        (r.key, r.number, r.node): r.finished_us
        for r in attempts
        if r.outcome == "lost" and r.finished_us is not None
    }
    for s in starts:
        lost_us = lost.get((s.key, s.attempt, s.node))
        if lost_us is not None and s.at_us > lost_us:
            report.stale_starts += 1
            late_ms = (s.at_us - lost_us) / 1000
            report.example(
                "stale starts",
                f"{s.key} attempt {s.attempt} on {s.node}: began {late_ms:.1f} ms after it "
                "was recorded lost",
            )


def _out_of_order(report: Report, attempts: list[AttemptRow]) -> None:
    """Every recorded attempt must read ``claimed_at <= started_at <= finished_at`` (an
    instant not recorded compares with nothing)."""
    for r in attempts:
        claimed, started, finished = r.claimed_us, r.started_us, r.finished_us
        if claimed is not None and started is not None and claimed > started:
            why = f"claimed {(claimed - started) / 1000:.3f} ms after it started"
        elif started is not None and finished is not None and started > finished:
            why = f"started {(started - finished) / 1000:.3f} ms after it finished"
        else:
            continue
        report.out_of_order += 1
        report.example("out of order", f"{r.key} attempt {r.number} on {r.node}: {why}")


def _overwritten(
    report: Report,
    by_key: dict[str, list[Start]],
    timers: dict[str, TimerRow],
    rows: dict[str, list[AttemptRow]],
    faults: list[FaultEvent],
) -> None:
    crashes = [
        (f.at_us if f.began_us is None else f.began_us, f.at_us) for f in faults if loses_claims(f)
    ]
    for key, timer in timers.items():
        started = by_key.get(key, [])
        if _claim_lost(started, crashes):
            report.reclaimed += 1
            report.example("reclaimed", f"{key}: attempt started again after a database fault")
            started = _latest_of_each_attempt(started, rows.get(key, []))
        reason = _fence_broken(timer, rows.get(key, []), started)
        if reason:
            report.overwritten += 1
            report.example("overwritten", f"{key}: {reason}")


HELD_AFTER_CLAIM_US = 1_000_000
"""How long after its claim a claimed row may start: held until its due instant (claimed up to
250 ms ahead) or waiting for a free slot, on a loaded machine. A start this long after a fault
ended may come from a claim made before it, which the server that came back forgot."""


def _claim_lost(started: list[Start], crashes: list[tuple[int, int]]) -> bool:
    """Whether an attempt number was started twice with a database crash between the starts:
    the first from a claim made before the crash was over (it started by
    :data:`HELD_AFTER_CLAIM_US` after it), the second once it had begun."""
    by_number: dict[int, list[int]] = defaultdict(list)
    for s in started:
        by_number[s.attempt].append(s.at_us)
    return any(
        any(first <= end + HELD_AFTER_CLAIM_US and last >= began for began, end in crashes)
        for first, last in ((min(v), max(v)) for v in by_number.values() if len(v) > 1)
    )


def _latest_of_each_attempt(started: list[Start], rows: list[AttemptRow]) -> list[Start]:
    """The start of each attempt number that the store's rows describe: the latest by the node
    the row names (a forgotten claim's held row may start after the claim that replaced it),
    else the latest."""
    node_of = {r.number: r.node for r in rows}
    by_number: dict[int, list[Start]] = defaultdict(list)
    for s in started:
        by_number[s.attempt].append(s)
    return [
        max(starts, key=lambda s: (s.node == node_of.get(number), s.at_us))
        for number, starts in by_number.items()
    ]


def _fence_broken(timer: TimerRow, rows: list[AttemptRow], started: list[Start]) -> str | None:
    numbers = Counter(s.attempt for s in started)
    twice = [n for n, count in numbers.items() if count > 1]
    if twice:
        return f"attempt {twice[0]} started {numbers[twice[0]]} times"
    node_of = {r.number: r.node for r in rows}
    for s in started:
        if s.attempt in node_of and node_of[s.attempt] != s.node:
            return f"attempt {s.attempt} ran on {s.node}, recorded for {node_of[s.attempt]}"
    finals = sorted(r.number for r in rows if r.outcome in FINAL)
    if (finals and finals[-1] != timer.attempts) or len(finals) > 1:
        return f"finishing outcomes on attempts {finals} of {timer.attempts}"
    if timer.status in FINAL and timer.attempts and not finals:
        return f"{timer.status} but no attempt of {timer.attempts} says so"
    return None
