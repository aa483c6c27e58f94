"""Field checks shared by every interface: each failure names its field."""

from __future__ import annotations

from datetime import timedelta

import pytest

from duetime.errors import InvalidInput
from duetime.validation import (
    check_expires_after,
    check_key,
    check_max_attempts,
    check_namespace,
    check_payload,
    check_subject,
    check_type,
    parse_payload_text,
)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: check_key(""), "key"),
        (lambda: check_key("   "), "key"),
        (lambda: check_key("x" * 256), "key"),
        (lambda: check_key("a\nb"), "key"),
        (lambda: check_key(12), "key"),
        (lambda: check_type(""), "type"),
        (lambda: check_type("has space"), "type"),
        (lambda: check_subject(""), "subject"),
        (lambda: check_namespace("Bad Name"), "namespace"),
        (lambda: check_namespace(""), "namespace"),
        (lambda: check_payload({"x": float("nan")}), "payload"),
        (lambda: check_payload({"x": object()}), "payload"),
        (lambda: check_payload("x" * 100, max_bytes=50), "payload"),
        (lambda: parse_payload_text("{nope"), "payload"),
        (lambda: check_max_attempts(0), "max_attempts"),
        (lambda: check_max_attempts(True), "max_attempts"),
        (lambda: check_expires_after(-5), "expires_after"),
        (lambda: check_expires_after("soon"), "expires_after"),
    ],
)
def test_bad_values_name_their_field(call: object, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        call()  # type: ignore[operator]
    assert info.value.field == field
    assert field in str(info.value)


def test_missing_key_is_generated_and_unique() -> None:
    keys = {check_key(None) for _ in range(10_000)}
    assert len(keys) == 10_000
    assert all(len(key) == 32 and set(key) <= set("0123456789abcdef") for key in keys)


def test_payload_round_trips_through_json() -> None:
    assert check_payload({"a": [1, 2.5, None, True], "b": "é"}) == {
        "a": [1, 2.5, None, True],
        "b": "é",
    }
    assert check_payload((1, 2)) == [1, 2]


def test_expires_after_accepts_seconds_iso_and_timedelta() -> None:
    assert check_expires_after(90) == timedelta(seconds=90)
    assert check_expires_after("PT1H") == timedelta(hours=1)
    assert check_expires_after(timedelta(minutes=5)) == timedelta(minutes=5)
    assert check_expires_after(None) is None


def test_numeric_subject_becomes_text() -> None:
    assert check_subject(1234) == "1234"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: check_key("\ud800"), "key"),
        (lambda: check_subject("user\ud800"), "subject"),
        (lambda: check_subject("a\x00b"), "subject"),
        (lambda: check_payload({"text": "\ud800"}), "payload"),
        (lambda: check_payload({"text": "nul\x00here"}), "payload"),
        (lambda: check_payload({"k\x00": 1}), "payload"),
    ],
)
def test_text_no_backend_can_store_is_refused(call: object, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        call()  # type: ignore[operator]
    assert info.value.field == field


def test_a_literal_backslash_u0000_is_fine() -> None:
    assert check_payload({"text": "\\u0000"}) == {"text": "\\u0000"}
