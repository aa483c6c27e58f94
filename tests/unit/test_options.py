"""The shared option-schema check behind destination and source configurations."""

from __future__ import annotations

import pytest

from duetime.bus.options import Option, at, check_against
from duetime.errors import InvalidInput


def positive(value: object, field: str) -> int:
    if not isinstance(value, int) or value <= 0:
        raise InvalidInput(field, "must be a positive integer")
    return value


SCHEMA = {"url": Option(lambda value, field: str(value), required=True), "batch": Option(positive)}


def test_checked_values_come_back_and_none_means_not_given() -> None:
    assert check_against(SCHEMA, {"url": "nats://h", "batch": None}, "", "nats", "source") == {
        "url": "nats://h"
    }


@pytest.mark.parametrize(
    ("options", "field", "message"),
    [
        (
            {"url": "x", "bogus": 1},
            "sources.in.bogus",
            "unknown option for nats; expected: batch, url",
        ),
        ({"batch": 5}, "sources.in.url", "is required for a nats source"),
        ({"url": None}, "sources.in.url", "is required for a nats source"),
        ({"url": "x", "batch": 0}, "sources.in.batch", "must be a positive integer"),
    ],
)
def test_every_error_names_the_field_by_its_path(
    options: dict[str, object], field: str, message: str
) -> None:
    with pytest.raises(InvalidInput) as raised:
        check_against(SCHEMA, options, "sources.in", "nats", "source")
    assert (raised.value.field, str(raised.value)) == (field, f"{field}: {message}")


def test_paths() -> None:
    assert at("", "url") == "url"
    assert at("destinations.hooks", "url") == "destinations.hooks.url"
