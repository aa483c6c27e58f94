"""The overlap decision and the validation of a schedule's overlap policy and catch-up grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import InvalidInput
from duetime.model.schedules import PARKED, OccurrenceState, next_wake, occurrence_row, stranded
from duetime.schedules import ScheduleRequest
from duetime.timemath.recurrence.overlap import (
    BUFFERED,
    SKIPPED_BUFFER_FULL,
    SKIPPED_RUNNING,
    Fate,
    decide,
    parse_catch_up_grace,
    parse_overlap,
    waiting,
)

T = datetime(2025, 3, 8, 12, 0, tzinfo=UTC)
THREE = [T, T + timedelta(minutes=1), T + timedelta(minutes=2)]
F, B, S = Fate.FIRE, Fate.BUFFER, Fate.SKIP


@pytest.mark.parametrize(
    ("policy", "unfinished", "buffered", "fates"),
    [
        ("allow", False, False, [F, F, F]),
        ("allow", True, True, [F, F, F]),
        ("skip", False, False, [F, S, S]),
        ("skip", True, False, [S, S, S]),
        ("buffer_one", False, False, [F, B, S]),
        ("buffer_one", True, False, [B, S, S]),
        ("buffer_one", True, True, [S, S, S]),
        # A buffered one with nothing unfinished cannot last (its release is due): fire.
        ("buffer_one", False, True, [F, S, S]),
    ],
)
def test_decide(policy: str, unfinished: bool, buffered: bool, fates: list[Fate]) -> None:
    assert decide(policy, THREE, unfinished, buffered) == fates  # type: ignore[arg-type]


W = Fate.WAIT


@pytest.mark.parametrize(
    ("policy", "unfinished", "buffered", "fates"),
    [
        ("allow", True, False, [F, F, F]),
        ("skip", False, False, [F, W, W]),
        ("skip", True, False, [S, W, W]),
        ("buffer_one", False, False, [F, W, W]),
        ("buffer_one", True, False, [B, W, W]),
        ("buffer_one", True, True, [S, W, W]),
    ],
)
def test_decide_ahead(policy: str, unfinished: bool, buffered: bool, fates: list[Fate]) -> None:
    """Made at the first instant: the later two, behind an unfinished one, wait for its end."""
    assert decide(policy, THREE, unfinished, buffered, now=T) == fates  # type: ignore[arg-type]


def test_a_waiting_occurrence_is_parked_with_its_reason() -> None:
    row = occurrence_row(W, T, "skip")
    assert (row.status, row.run_at) == ("scheduled", PARKED)
    assert row.error == waiting("skip")
    assert "else is skipped" in waiting("skip")
    assert "else is buffered" in waiting("buffer_one")


def test_decide_nothing_due() -> None:
    assert decide("skip", [], True, False) == []


def test_occurrence_rows() -> None:
    assert occurrence_row(F, T, "skip") == occurrence_row(F, T, None)
    assert occurrence_row(F, T, None).status == "scheduled"
    assert occurrence_row(F, T, None).run_at == T
    assert occurrence_row(B, T, "buffer_one").run_at == PARKED
    assert occurrence_row(B, T, "buffer_one").error == BUFFERED
    assert occurrence_row(S, T, "skip").error == SKIPPED_RUNNING
    assert occurrence_row(S, T, "buffer_one").error == SKIPPED_BUFFER_FULL
    assert occurrence_row(S, T, "skip").status == "cancelled"


def test_next_wake() -> None:
    ahead = timedelta(seconds=2)
    assert next_wake(None, None, ahead) is None
    assert next_wake(T, None, ahead) == T - ahead
    # A schedule with a policy is made ahead too, so that its occurrence starts on time.
    assert next_wake(None, T, ahead) == T - ahead
    assert next_wake(T, T, ahead) == T - ahead
    assert next_wake(T + timedelta(hours=1), T, ahead) == T - ahead


@pytest.mark.parametrize("value", ["allow", "skip", "buffer_one"])
def test_overlap_names(value: str) -> None:
    assert parse_overlap(value) == value


@pytest.mark.parametrize("value", ["Skip", "buffer", "", None, 1])
def test_bad_overlap_names_the_field(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_overlap(value)
    assert caught.value.field == "overlap"
    assert "buffer_one" in caught.value.message


@pytest.mark.parametrize(
    ("value", "grace"),
    [
        (0, timedelta(0)),
        (90, timedelta(seconds=90)),
        (0.5, timedelta(milliseconds=500)),
        ("PT5M", timedelta(minutes=5)),
        ("P1D", timedelta(days=1)),
        (timedelta(hours=2), timedelta(hours=2)),
        ("P31D", timedelta(days=31)),
    ],
)
def test_catch_up_grace(value: object, grace: timedelta) -> None:
    assert parse_catch_up_grace(value) == grace


@pytest.mark.parametrize(
    "value",
    [-1, -0.5, timedelta(seconds=-1), "P32D", "P1Y", 10**9, "soon", "", True, None, [60]],
)
def test_bad_catch_up_grace_names_the_field(value: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_catch_up_grace(value)
    assert caught.value.field == "catch_up_grace"


def test_a_request_validates_both_and_keeps_the_defaults() -> None:
    new = ScheduleRequest(name="s", type="t", every=60).resolve("ns", T, 3, 1024)
    assert (new.overlap, new.catch_up_grace) == ("allow", timedelta(seconds=60))
    for field, value in (("overlap", "sometimes"), ("catch_up_grace", "-PT1S")):
        request = ScheduleRequest.from_dict({"name": "s", "type": "t", "every": 60, field: value})
        with pytest.raises(InvalidInput) as caught:
            request.resolve("ns", T, 3, 1024)
        assert caught.value.field == field


def test_stranded_releases_only_a_buffered_one_with_nothing_before_it() -> None:
    states = {
        1: OccurrenceState(unfinished=True, buffered=True),
        2: OccurrenceState(unfinished=False, buffered=True),
        3: OccurrenceState(unfinished=True, buffered=False),
    }
    stuck, after = stranded(states)
    assert stuck == [2]
    assert after == {**states, 2: OccurrenceState(unfinished=True, buffered=False)}
