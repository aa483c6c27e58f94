"""Which way PostgreSQL writes a batch of timers, decided from the batch's shape alone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from duetime.model import NewTimer, OnConflict
from duetime.store.postgres.write_plan import (
    PUT_CHUNK,
    PutCall,
    Strategy,
    at_once,
    drawn_keys_only,
    plan_put,
    spans,
)

NOW = datetime(2025, 3, 21, 12, 0, tzinfo=UTC)


def timer(key: str | None, namespace: str = "ns") -> NewTimer:
    return NewTimer(namespace=namespace, key=key, type="t", payload={}, due_at=NOW, max_attempts=3)


def call(keys: list[str | None], on_conflict: OnConflict = "error") -> PutCall:
    return PutCall([timer(key) for key in keys], on_conflict, NOW)


def keyless(count: int) -> PutCall:
    return call([None] * count, "update")


@pytest.mark.parametrize("rule", ["error", "keep", "update"])
def test_keys_the_store_draws_go_in_one_fresh_insert(rule: OnConflict) -> None:
    assert plan_put([call([None, None], rule)]) is Strategy.FRESH
    assert plan_put([keyless(1), keyless(PUT_CHUNK - 1)]) is Strategy.FRESH


def test_keyless_timers_past_one_statement_are_not_fresh() -> None:
    assert plan_put([keyless(PUT_CHUNK + 1)]) is Strategy.APART
    assert plan_put([keyless(PUT_CHUNK), keyless(1)]) is Strategy.GROUPED


@pytest.mark.parametrize("rule", ["error", "keep", "update"])
def test_single_timers_with_keys_of_their_own_are_written_at_once(rule: OnConflict) -> None:
    assert plan_put([call(["a"], rule)]) is Strategy.AT_ONCE
    assert plan_put([call(["a"], rule), call(["b"], "update"), call(["c"], "keep")]) is (
        Strategy.AT_ONCE
    )


def test_a_call_of_several_timers_is_at_once_only_when_it_keeps() -> None:
    """Its timers then stand or fall alone: nothing to undo after the commit."""
    assert plan_put([call(["a", "b"], "keep")]) is Strategy.AT_ONCE
    assert plan_put([call(["a", "b"], "error")]) is Strategy.APART
    assert plan_put([call(["a", "b"], "update")]) is Strategy.APART
    assert plan_put([call(["a", "b"], "update"), call(["c"])]) is Strategy.GROUPED


def test_a_key_given_twice_is_not_at_once() -> None:
    """One statement cannot write the same row twice: the pipeline's rounds do."""
    assert plan_put([call(["a", "a"], "keep")]) is Strategy.APART
    assert plan_put([call(["a"]), call(["a"], "update")]) is Strategy.GROUPED
    other = PutCall([timer("a", namespace="other")], "error", NOW)
    assert plan_put([call(["a"]), other]) is Strategy.AT_ONCE  # keys are per namespace


def test_keys_given_and_drawn_in_one_batch_go_the_long_way() -> None:
    assert plan_put([call(["a", None], "keep")]) is Strategy.APART
    assert plan_put([call(["a"]), keyless(1)]) is Strategy.GROUPED


def test_more_than_one_statement_of_keys_is_not_at_once() -> None:
    many = [call([f"k{i}"], "keep") for i in range(PUT_CHUNK + 1)]
    assert plan_put(many[:PUT_CHUNK]) is Strategy.AT_ONCE
    assert plan_put(many) is Strategy.GROUPED
    assert plan_put([call([f"k{i}" for i in range(PUT_CHUNK + 1)], "keep")]) is Strategy.APART


def test_an_empty_call_is_written_the_long_way() -> None:
    assert plan_put([call([])]) is Strategy.APART
    assert plan_put([call([]), call(["a"])]) is Strategy.GROUPED
    assert not drawn_keys_only([call([])])
    assert not at_once([call([])])


def test_spans_are_each_calls_positions_in_order() -> None:
    assert spans([call(["a", "b"]), call([]), call(["c"])]) == [
        range(2),
        range(2, 2),
        range(2, 3),
    ]
