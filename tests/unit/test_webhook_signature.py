"""verify_signature is pure: a signed body verifies, anything else — never raising — does not."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.destinations.webhook import parse_retry_after, sign, verify_signature

SECRET = "whsec_0123456789abcdef"
BODY = b'{"id":1,"type":"order.paid"}'
T = 1_741_000_000


def test_sign_is_stripe_style_hmac_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, T, BODY) == f"t={T},v1={expected}"


def test_a_fresh_signature_verifies_as_bytes_or_str_body_and_bytes_secret() -> None:
    header = sign(SECRET, T, BODY)
    assert verify_signature(SECRET, header, BODY, T)
    assert verify_signature(SECRET, header, BODY.decode(), T + 10)
    assert verify_signature(SECRET.encode(), header, BODY, T - 10)


def test_wrong_secret_or_tampered_body_fails() -> None:
    header = sign(SECRET, T, BODY)
    assert not verify_signature("whsec_another-secret-0000", header, BODY, T)
    assert not verify_signature(SECRET, header, BODY.replace(b"1", b"2"), T)


@pytest.mark.parametrize("skew", [-301, 301, 10_000])
def test_timestamps_outside_the_tolerance_fail_either_direction(skew: int) -> None:
    header = sign(SECRET, T, BODY)
    assert verify_signature(SECRET, header, BODY, T + 300)
    assert verify_signature(SECRET, header, BODY, T - 300)
    assert not verify_signature(SECRET, header, BODY, T + skew)


def test_the_tolerance_is_configurable() -> None:
    header = sign(SECRET, T, BODY)
    assert not verify_signature(SECRET, header, BODY, T + 60, tolerance=30)
    assert verify_signature(SECRET, header, BODY, T + 3600, tolerance=3600)


def test_a_timestamp_moved_to_now_breaks_the_signature() -> None:
    old = sign(SECRET, T, BODY)
    replayed = old.replace(f"t={T}", f"t={T + 10_000}")
    assert not verify_signature(SECRET, replayed, BODY, T + 10_000)


def test_any_of_several_v1_values_may_match_for_secret_rotation() -> None:
    new = sign(SECRET, T, BODY)
    old = sign("whsec_the-old-secret-0000", T, BODY)
    both = f"{old},{new.split(',')[1]}"
    assert verify_signature(SECRET, both, BODY, T)
    assert verify_signature("whsec_the-old-secret-0000", both, BODY, T)
    assert not verify_signature("whsec_neither-of-them-00", both, BODY, T)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "garbage",
        "t=,v1=",
        f"t={T}",
        "v1=abc",
        f"t=-{T},v1=00",
        f"t={T}.5,v1=00",
        "t=１２３,v1=00",  # noqa: RUF001 - non-ASCII digits must not parse as a time
        f"t={T},v1=é",
        f" t = {T} , v1 = 00 ",
    ],
)
def test_malformed_headers_are_simply_invalid(header: str | None) -> None:
    assert not verify_signature(SECRET, header, BODY, T)


def test_whitespace_around_items_is_tolerated() -> None:
    t, v1 = sign(SECRET, T, BODY).split(",")
    assert verify_signature(SECRET, f" {t} , {v1} ", BODY, T)


@given(st.text(max_size=200), st.binary(max_size=200), st.floats(allow_nan=False))
def test_verify_never_raises(header: str, body: bytes, now: float) -> None:
    assert verify_signature(SECRET, header, body, now) in (True, False)


@given(st.binary(max_size=500), st.integers(min_value=0, max_value=2**40))
def test_every_signed_body_verifies(body: bytes, timestamp: int) -> None:
    assert verify_signature(SECRET, sign(SECRET, timestamp, body), body, timestamp)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("soon", None),
        ("0", 0.0),
        ("120", 120.0),
        ("Thu, 01 Jan 1970 00:00:00 GMT", 0.0),
        ("99999999", 3600.0),
    ],
)
def test_retry_after_parsing(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value, now=T) == expected


def test_retry_after_as_an_http_date_counts_from_now() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412420.0) == 60.0
