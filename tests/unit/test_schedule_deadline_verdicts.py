"""The verdict on one occurrence at its deadline, and the deadline settings' checks: pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.errors import InvalidInput
from duetime.timemath.recurrence.deadline import (
    MissReason,
    OccurrenceFacts,
    Verdict,
    judge,
    parse_deadline,
    parse_pause_after,
)
from duetime.timemath.recurrence.overlap import SKIPPED_RUNNING

AT = datetime(2025, 3, 3, 2, 0, tzinfo=UTC)
WITHIN = timedelta(minutes=30)
HANDLED = AT - timedelta(seconds=1)
"""The materialiser's place: before the occurrence (it has not passed it)."""


@pytest.mark.parametrize(
    ("facts", "after_at", "reason"),
    [
        (OccurrenceFacts("done", AT + WITHIN), HANDLED, None),
        (OccurrenceFacts("done", AT + WITHIN + timedelta(seconds=1)), HANDLED, MissReason.LATE),
        (OccurrenceFacts("dead", AT), HANDLED, MissReason.DEAD),
        (OccurrenceFacts("expired", AT), HANDLED, MissReason.EXPIRED),
        (OccurrenceFacts("running"), HANDLED, MissReason.STILL_RUNNING),
        (OccurrenceFacts("retrying"), HANDLED, MissReason.RETRYING),
        (OccurrenceFacts("scheduled"), HANDLED, MissReason.NOT_STARTED),
        (OccurrenceFacts("cancelled", AT, SKIPPED_RUNNING), HANDLED, MissReason.SKIPPED_OVERLAP),
        (OccurrenceFacts("cancelled", AT, None), HANDLED, MissReason.CANCELLED),
        (OccurrenceFacts(None), AT, MissReason.DROPPED_CATCH_UP),
        (OccurrenceFacts(None), HANDLED, MissReason.NOT_CREATED),
    ],
)
def test_the_reason_an_occurrence_missed_its_deadline(
    facts: OccurrenceFacts, after_at: datetime, reason: MissReason | None
) -> None:
    verdict = judge(facts, AT, WITHIN, after_at)
    assert verdict == ((Verdict.SUCCESS, None) if reason is None else (Verdict.MISS, reason))


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ("done", Verdict.SUCCESS),
        ("dead", Verdict.FAILURE),
        ("cancelled", Verdict.PASS),
        ("running", Verdict.WAIT),
        ("retrying", Verdict.WAIT),
    ],
)
def test_without_a_deadline_only_the_end_is_judged(status: str, verdict: Verdict) -> None:
    assert judge(OccurrenceFacts(status, AT), AT, None, HANDLED)[0] is verdict


def test_the_settings_read_as_spans_and_counts() -> None:
    assert parse_deadline("PT30M") == WITHIN
    assert parse_deadline(1) == timedelta(seconds=1)
    assert parse_deadline(None) is None
    assert parse_pause_after(3.0) == 3
    with pytest.raises(InvalidInput, match="at most 366 days"):
        parse_deadline("P400D")
    with pytest.raises(InvalidInput) as caught:
        parse_pause_after(True)
    assert caught.value.field == "pause_after_failures"
