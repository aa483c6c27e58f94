"""A value refused by its field's pattern is answered with what to give, never the regex."""

from __future__ import annotations

from duetime.api.pattern_errors import MAX_ECHO, pattern_message
from duetime.api.schemas import TYPE_GLOB_PATTERN
from duetime.formats import INSTANT_PATTERN, WHEN_PATTERN


def test_an_instants_pattern_becomes_a_sentence_with_an_example() -> None:
    message = pattern_message(WHEN_PATTERN, "yesterday")
    assert message.startswith("'yesterday' is not valid here: give an ISO 8601 instant")
    assert "'2025-03-15T13:00:00Z'" in message
    assert "(?:" not in message
    assert len(message) < 200
    assert "'2025-03-15T13:00:00Z'" in pattern_message(INSTANT_PATTERN, "x")


def test_a_pattern_wrapped_to_take_the_empty_text_is_known_too() -> None:
    empty_or_glob = f"^(?:{TYPE_GLOB_PATTERN[1:-1]})?$"
    assert "an event type or a glob" in pattern_message(empty_or_glob, "a b")


def test_a_long_value_is_cut_and_an_unknown_pattern_is_not_quoted() -> None:
    message = pattern_message("^[a-z]{3}$", "x" * 1000)
    assert f"'{'x' * MAX_ECHO}'… (1000 characters)" in message
    assert "[a-z]" not in message
    assert len(message) < 120
