"""A payload whose integers a worker cannot read back is refused when it is scheduled."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from duetime.errors import InvalidInput
from duetime.validation import MAX_INT_DIGITS, check_payload


@pytest.fixture
def no_digit_limit() -> Iterator[None]:
    """As a client run with PYTHONINTMAXSTRDIGITS=0, which can write such an integer."""
    before = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(before)


@pytest.mark.usefixtures("no_digit_limit")
def test_an_integer_too_long_to_read_back_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_payload({"n": [1, -(10**5000)]}, max_bytes=100_000)
    assert caught.value.field == "payload"
    assert str(MAX_INT_DIGITS) in str(caught.value)


@pytest.mark.usefixtures("no_digit_limit")
def test_the_longest_readable_integer_and_long_digit_strings_pass() -> None:
    longest = 10**MAX_INT_DIGITS - 1
    assert check_payload({"n": longest, "s": "9" * 5000}, max_bytes=100_000) == {
        "n": longest,
        "s": "9" * 5000,
    }
