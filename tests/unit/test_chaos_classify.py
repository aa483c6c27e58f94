"""The chaos battery's total-queue check (bench/chaoslib/classify.py) on made-up records."""

from __future__ import annotations

from bench.chaoslib.classify import FaultEvent, NodeFate, Report, classify
from bench.chaoslib.records import Ack, Start
from bench.chaoslib.tables import AttemptRow, TimerRow

S = 1_000_000  # µs in a second
DUE = 1_000 * S
CHECKED = DUE + 60 * S


def ack(n: int, due: int = DUE, expires_after: int = 0) -> Ack:
    return Ack(f"k{n:07d}", due, expires_after, acked=True)


def start(n: int, at: int, attempt: int = 1, node: str = "w0-1", payload: str = "") -> Start:
    return Start(f"k{n:07d}", attempt, node, at, payload or f'{{"n":{n}}}')


def done(n: int, attempts: int = 1) -> TimerRow:
    return TimerRow(f"k{n:07d}", "done", attempts, DUE)


def row(n: int, number: int, outcome: str, node: str = "w0-1") -> AttemptRow:
    return AttemptRow(f"k{n:07d}", number, node, outcome)


def check(
    acks: list[Ack],
    starts: list[Start],
    timers: list[TimerRow],
    attempts: list[AttemptRow],
    nodes: list[NodeFate] | None = None,
    faults: list[FaultEvent] | None = None,
) -> Report:
    fates = {n.node: n for n in nodes or [NodeFate("w0-1", 0.0, 0)]}
    return classify(
        {a.key: a for a in acks},
        starts,
        {t.key: t for t in timers},
        attempts,
        fates,
        faults or [],
        CHECKED,
    )


def test_a_clean_run_is_ok_with_its_lateness() -> None:
    report = check(
        [ack(1), ack(2)],
        [start(1, DUE + 2_000), start(2, DUE + 4_000)],
        [done(1), done(2)],
        [row(1, 1, "done"), row(2, 1, "done")],
    )
    assert report.ok, report.problems()
    assert (report.acknowledged, report.ran, report.done) == (2, 2, 2)
    assert report.lateness_ms == {"p50": 4.0, "p95": 4.0, "p99": 4.0, "max": 4.0}


def test_never_started_is_lost_unless_it_expired_after_its_window() -> None:
    window = 10 * S
    report = check(
        [ack(1), ack(2, expires_after=window), ack(3, due=CHECKED, expires_after=window)],
        [],
        [
            TimerRow("k0000001", "scheduled", 0, DUE),
            TimerRow("k0000002", "expired", 1, DUE),
            TimerRow("k0000003", "expired", 1, CHECKED),
        ],
        [row(2, 1, "expired"), row(3, 1, "expired")],
    )
    assert report.lost == 2  # the pending one, and the one expired inside its window
    assert report.expired_early == 1
    assert report.problems() == ["lost 2"]


def test_a_start_before_due_at_is_early_by_the_reference_clock() -> None:
    skewed = NodeFate("w0-1", 120.0, 0)
    report = check([ack(1)], [start(1, DUE - 1_500)], [done(1)], [row(1, 1, "done")], [skewed])
    assert report.early == 1
    assert report.earliest_ms == 1.5
    assert report.early_by_skew == {"+120s": 1}


def test_unknown_keys_and_wrong_payloads_are_unexpected() -> None:
    report = check(
        [ack(1)],
        [start(1, DUE, payload='{"n":2}'), start(9, DUE)],
        [done(1)],
        [row(1, 1, "done")],
    )
    assert report.unexpected == 2


def test_a_second_start_after_a_kill_is_a_duplicate_caused_by_the_kill() -> None:
    killed = NodeFate("w0-1", 0.0, 0, killed_us=DUE + S)
    other = NodeFate("w1-2", 0.0, 0)
    report = check(
        [ack(1)],
        [start(1, DUE), start(1, DUE + 5 * S, attempt=2, node="w1-2")],
        [done(1, attempts=2)],
        [row(1, 1, "lost"), row(1, 2, "done", node="w1-2")],
        [killed, other],
    )
    assert report.ok, report.problems()
    assert report.duplicated == 1
    assert report.duplicate_causes == {"kill -9": 1}


def test_a_stale_start_after_a_pause_is_put_down_to_the_pause_of_its_node() -> None:
    """Claimed, paused before its handler began, rescued and run by another node, then begun
    after the pause: its start comes after the other node's, the pause before both."""
    paused = NodeFate("w0-1", 0.0, 0, stops=[(DUE + S // 2, DUE + 9 * S)])
    other = NodeFate("w1-2", 0.0, 0)
    lost = AttemptRow("k0000001", 1, "w0-1", "lost", finished_us=DUE + 5 * S, claimed_us=DUE)
    report = check(
        [ack(1)],
        [start(1, DUE + 9 * S + 1000), start(1, DUE + 6 * S, attempt=2, node="w1-2")],
        [done(1, attempts=2)],
        [lost, row(1, 2, "done", node="w1-2")],
        [paused, other],
    )
    assert report.stale_starts == 1
    assert report.duplicate_causes == {"SIGSTOP past the lease": 1}


def test_a_finishing_outcome_on_a_taken_over_attempt_is_overwritten() -> None:
    nodes = [NodeFate("w0-1", 0.0, 0), NodeFate("w1-2", 0.0, 0)]
    starts = [start(1, DUE), start(1, DUE + 5 * S, attempt=2, node="w1-2")]
    report = check(
        [ack(1)],
        starts,
        [done(1, attempts=2)],
        [row(1, 1, "done"), row(1, 2, "done", node="w1-2")],
        nodes,
    )
    assert report.overwritten == 1
    assert "finishing outcomes on attempts [1, 2]" in report.examples["overwritten"][0]


def test_one_attempt_on_two_nodes_is_overwritten() -> None:
    nodes = [NodeFate("w0-1", 0.0, 0), NodeFate("w1-2", 0.0, 0)]
    report = check(
        [ack(1)],
        [start(1, DUE, node="w1-2")],
        [done(1)],
        [row(1, 1, "done", node="w0-1")],
        nodes,
    )
    assert report.problems() == ["overwritten 1"]


def test_an_attempt_started_again_after_a_failover_is_reclaimed_not_overwritten() -> None:
    """A claim commits without waiting for a standby: the new primary may never have seen it,
    and the timer is claimed again under the same number. Without a database fault between the
    two starts the same records break a fence."""
    starts = [start(1, DUE + S), start(1, DUE + 3 * S)]
    failover = FaultEvent("failover", DUE + 2 * S, "primary killed, standby promoted")

    report = check([ack(1)], starts, [done(1)], [row(1, 1, "done")], faults=[failover])
    assert report.ok, report.problems()
    assert (report.reclaimed, report.duplicated) == (1, 1)
    assert report.duplicate_causes == {"failover (its completion was on the old primary only)": 1}
    assert report.pause_ms == 2_000.0

    clean_stop = FaultEvent("dbrestart", DUE + 2 * S, "database (fast)")
    for faults in ([], [clean_stop]):
        report = check([ack(1)], starts, [done(1)], [row(1, 1, "done")], faults=faults)
        assert (report.reclaimed, report.overwritten) == (0, 1), faults


def test_a_claim_retaken_while_the_failover_was_still_under_way_is_reclaimed() -> None:
    """The failover's record is written once the standby is promoted, but a worker may
    reconnect to it and claim again before the promotion's command returns: a second start
    inside the fault's span is a reclaim. Two starts before the fault began still break a
    fence."""
    failover = FaultEvent("failover", DUE + 3 * S, "primary killed, standby promoted", DUE + 2 * S)
    during = [start(1, DUE + S), start(1, DUE + 2 * S + S // 2)]
    report = check([ack(1)], during, [done(1)], [row(1, 1, "done")], faults=[failover])
    assert report.ok, report.problems()
    assert (report.reclaimed, report.overwritten) == (1, 0)

    before = [start(1, DUE + S), start(1, DUE + S + S // 2)]
    report = check([ack(1)], before, [done(1)], [row(1, 1, "done")], faults=[failover])
    assert (report.reclaimed, report.overwritten) == (0, 1)


def test_a_row_claimed_before_the_failover_may_start_just_after_it() -> None:
    """A row claimed ahead of its due instant (or waiting for a slot) starts a moment after its
    claim: a claim made just before the fault, which the promoted standby never saw, may start
    after the promotion, as may its reclaim (on another node, here first). Both starts follow
    the fault, within a second of its end: a reclaim, and the start the store's row describes
    is the one on the row's node. Two starts of one number long after the fault still break a
    fence."""
    failover = FaultEvent("failover", DUE + 3 * S, "primary killed, standby promoted", DUE + 2 * S)
    held = [start(1, DUE + 3 * S + S // 10, node="w1-1"), start(1, DUE + 3 * S + S // 5)]
    report = check(
        [ack(1)],
        held,
        [done(1)],
        [row(1, 1, "done", node="w1-1")],
        nodes=[NodeFate("w0-1", 0.0, 0), NodeFate("w1-1", 0.0, 0)],
        faults=[failover],
    )
    assert report.ok, report.problems()
    assert (report.reclaimed, report.overwritten) == (1, 0)

    later = [start(1, DUE + 5 * S), start(1, DUE + 5 * S + S // 2)]
    report = check([ack(1)], later, [done(1)], [row(1, 1, "done")], faults=[failover])
    assert (report.reclaimed, report.overwritten) == (0, 1)


def test_a_start_after_its_attempt_was_recorded_lost_is_a_stale_start() -> None:
    lost_at = DUE + 5 * S
    report = check(
        [ack(1), ack(2)],
        [
            start(1, DUE + 1_000),  # began in time; its node was then paused, taken over
            start(1, DUE + 6 * S, attempt=2, node="w1-2"),
            start(2, lost_at + 1_000),  # began after the store recorded it lost: stale
            start(2, DUE + 6 * S, attempt=2, node="w1-2"),
        ],
        [done(1, attempts=2), done(2, attempts=2)],
        [
            AttemptRow("k0000001", 1, "w0-1", "lost", lost_at),
            AttemptRow("k0000001", 2, "w1-2", "done", DUE + 7 * S),
            AttemptRow("k0000002", 1, "w0-1", "lost", lost_at),
            AttemptRow("k0000002", 2, "w1-2", "done", DUE + 7 * S),
        ],
        nodes=[NodeFate("w0-1", 0.0, 0), NodeFate("w1-2", 0.0, 0)],
    )
    assert report.stale_starts == 1
    assert report.problems() == ["stale_starts 1"]


def test_a_worker_that_ended_by_itself_fails_the_run_and_a_retry_is_the_handlers() -> None:
    report = check(
        [ack(1)],
        [start(1, DUE + 1_000), start(1, DUE + 2 * S, attempt=2)],
        [done(1, attempts=2)],
        [row(1, 1, "retry"), row(1, 2, "done")],
        nodes=[NodeFate("w0-1", 0.0, 0, exited=1)],
    )
    assert report.worker_exits == 1
    assert report.problems() == ["worker_exits 1"]
    assert report.duplicate_causes == {"the handler failed (a retry)": 1}


def test_an_attempt_claimed_after_it_started_or_started_after_it_finished_fails_the_run() -> None:
    ms = 1_000
    report = check(
        [ack(1), ack(2), ack(3)],
        [start(1, DUE + ms), start(2, DUE + ms), start(3, DUE + ms)],
        [done(1), done(2), done(3)],
        [
            AttemptRow("k0000001", 1, "w0-1", "done", DUE + 9 * ms, DUE - ms, DUE + ms),
            AttemptRow("k0000002", 1, "w0-1", "done", DUE + 9 * ms, DUE + 23 * ms, DUE + ms),
            AttemptRow("k0000003", 1, "w0-1", "done", DUE + ms, DUE - ms, DUE + 2 * ms),
        ],
    )
    assert report.out_of_order == 2
    assert report.problems() == ["out_of_order 2"]
    assert report.examples["out of order"] == [
        "k0000002 attempt 1 on w0-1: claimed 22.000 ms after it started",
        "k0000003 attempt 1 on w0-1: started 1.000 ms after it finished",
    ]


def test_an_attempt_without_a_start_is_in_order() -> None:
    report = check(
        [ack(1)],
        [start(1, DUE + 6 * S, attempt=2, node="w1-2")],
        [done(1, attempts=2)],
        [
            AttemptRow("k0000001", 1, "w0-1", "lost", DUE + 5 * S, DUE - 1_000, None),
            AttemptRow("k0000001", 2, "w1-2", "done", DUE + 7 * S, DUE + 5 * S, DUE + 6 * S),
        ],
        nodes=[NodeFate("w0-1", 0.0, 0), NodeFate("w1-2", 0.0, 0)],
    )
    assert report.out_of_order == 0
