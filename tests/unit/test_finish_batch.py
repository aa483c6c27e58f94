"""The arrays an owner's outcomes go to PostgreSQL in (pure: no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.model import Finish, Outcome
from duetime.store.postgres.finish_batch import FinishBatch
from duetime.support.sealing import NO_SEALING

NOW = datetime(2030, 1, 1, tzinfo=UTC)


def test_a_batch_of_plain_completions_sends_only_ids_and_attempts() -> None:
    """outcomes, errors and due times say nothing here: they go empty (the statement's unnest
    pads them with NULLs, and a NULL outcome is done)."""
    batch = FinishBatch.of(
        [Finish(3, 1, Outcome.DONE), Finish(1, 2, Outcome.DONE)], "n1", NOW, NO_SEALING
    )
    assert batch.params["timer_ids"] == [1, 3]  # in id order
    assert batch.params["attempts"] == [2, 1]
    assert (batch.params["outcomes"], batch.params["errors"], batch.params["run_ats"]) == (
        [],
        [],
        [],
    )


def test_one_outcome_that_says_more_sends_every_array_in_full() -> None:
    later = NOW + timedelta(minutes=1)
    batch = FinishBatch.of(
        [
            Finish(1, 1, Outcome.DONE),
            Finish(2, 1, Outcome.RETRY, error="boom", run_at=later),
            Finish(3, 1, Outcome.DEAD, error="gave up"),
        ],
        "n1",
        NOW,
        NO_SEALING,
    )
    assert batch.params["outcomes"] == ["done", "retry", "dead"]
    assert batch.params["errors"] == [None, "boom", "gave up"]
    assert batch.params["run_ats"] == [NOW, later, NOW]


def test_a_repeated_id_applies_once_and_an_owner_cannot_claim_a_loss() -> None:
    batch = FinishBatch.of(
        [Finish(1, 1, Outcome.DONE), Finish(1, 1, Outcome.DONE)], "n1", NOW, NO_SEALING
    )
    assert (batch.params["timer_ids"], batch.repeated) == ([1], frozenset({1}))
    with pytest.raises(ValueError, match="lost"):
        FinishBatch.of([Finish(1, 1, Outcome.LOST)], "n1", NOW, NO_SEALING)
