"""Destination specs: parsed from JSON, every mistake an InvalidInput naming the field to fix."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from duetime import Event, InvalidInput, NotFound
from duetime.destinations import (
    Delivery,
    DeliveryFailed,
    Destination,
    Destinations,
    DestinationSpec,
    WebhookDestination,
    build_destination,
    envelope,
    envelope_json,
    parse_destinations,
)

SECRET = "whsec_0123456789abcdef"
CONFIG = {
    "billing-hook": {
        "kind": "webhook",
        "url": "https://billing.example/hooks",
        "secret": SECRET,
        "timeout": 5,
        "headers": {"Authorization": "Bearer x"},
    },
    "bus": {"kind": "nats", "url": ["nats://a:4222", "nats://b:4222"], "subject": "ev.{type}"},
    "audit": {"kind": "redis", "url": "redis://:pw@redis:6379/0", "stream": "a", "maxlen": 1000},
    "orders": {"kind": "rabbitmq", "url": "amqp://u:pw@rabbit/", "exchange": "orders"},
}


def event(**changes: Any) -> Event:
    values: dict[str, Any] = {
        "id": 7,
        "namespace": "shop",
        "key": "k",
        "type": "order.paid",
        "payload": {"n": 1},
        "subject": None,
        "due_at": datetime(2025, 3, 15, 13, 0, tzinfo=UTC),
        "attempt": 2,
        "max_attempts": 5,
        "correlation_id": None,
        "fired_at": None,
    }
    values.update(changes)
    return Event(**values)


def field_of(raw: Any) -> str | None:
    with pytest.raises(InvalidInput) as caught:
        parse_destinations(raw)
    return caught.value.field


def test_a_full_config_parses_into_typed_specs_from_json() -> None:
    specs = parse_destinations(json.loads(json.dumps(CONFIG)))
    assert [s.kind for s in specs.values()] == ["webhook", "nats", "redis", "rabbitmq"]
    hook = specs["billing-hook"]
    assert hook.name == "billing-hook"
    assert hook.options["timeout"] == 5.0
    assert specs["bus"].options["url"] == ["nats://a:4222", "nats://b:4222"]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ([], "destinations"),
        ({"d": "https://x"}, "destinations.d"),
        ({"bad name!": {"kind": "webhook"}}, "destinations.bad name!"),
        ({"d": {"url": "https://x"}}, "destinations.d.kind"),
        ({"d": {"kind": "kinesis"}}, "destinations.d.kind"),
    ],
)
def test_the_shape_and_kind_are_checked(raw: Any, field: str) -> None:
    assert field_of(raw) == field


HOOK = {"kind": "webhook", "url": "https://x"}
BUS = {"kind": "nats", "url": "nats://a"}
STREAM = {"kind": "redis", "url": "redis://r", "stream": "s"}
EXCHANGE = {"kind": "rabbitmq", "url": "amqp://r/", "exchange": "x"}


@pytest.mark.parametrize(
    ("base", "options", "field"),
    [
        ({"kind": "webhook"}, {}, "url"),
        (HOOK, {"url": "ftp://x/"}, "url"),
        (HOOK, {"url": "https://"}, "url"),
        (HOOK, {"url": "http://x:99999/"}, "url"),
        (HOOK, {"secrte": SECRET}, "secrte"),
        (HOOK, {"secret": "short"}, "secret"),
        (HOOK, {"secret": SECRET, "secret_env": "S"}, "secret"),
        (HOOK, {"secret_env": "1BAD"}, "secret_env"),
        (HOOK, {"timeout": 0}, "timeout"),
        (HOOK, {"timeout": 301}, "timeout"),
        (HOOK, {"timeout": "5"}, "timeout"),
        (HOOK, {"timeout": True}, "timeout"),
        (HOOK, {"headers": ["X-A: 1"]}, "headers"),
        (HOOK, {"headers": {"Idempotency-Key": "x"}}, "headers.Idempotency-Key"),
        (HOOK, {"headers": {"X-A": "a\r\nb"}}, "headers.X-A"),
        (HOOK, {"headers": {"X A": "a"}}, "headers"),
        (BUS, {}, "subject"),
        (BUS, {"url": [], "subject": "a"}, "url"),
        (BUS, {"url": ["nats://a", "http://b"], "subject": "a"}, "url[1]"),
        (BUS, {"subject": "a.*"}, "subject"),
        (BUS, {"subject": "a.>"}, "subject"),
        (BUS, {"subject": "a..b"}, "subject"),
        (BUS, {"subject": "a b"}, "subject"),
        (BUS, {"subject": "ev.{user}"}, "subject"),
        (BUS, {"subject": "ev.{type!r}"}, "subject"),
        (BUS, {"subject": "ev.{type"}, "subject"),
        (BUS, {"subject": "a", "credentials": ""}, "credentials"),
        (STREAM, {"stream": ""}, "stream"),
        (STREAM, {"maxlen": 0}, "maxlen"),
        (STREAM, {"maxlen": 1.5}, "maxlen"),
        (STREAM, {"url": "http://r"}, "url"),
        ({"kind": "rabbitmq", "url": "amqp://r/"}, {}, "exchange"),
        (EXCHANGE, {"exchange": "x" * 256}, "exchange"),
        (EXCHANGE, {"routing_key": 5}, "routing_key"),
        (EXCHANGE, {"url": "amqp://r:0x/"}, "url"),
        (HOOK, {"rate": "fast"}, "rate"),
        (HOOK, {"rate": 100}, "rate"),
        (HOOK, {"rate": "0/s"}, "rate"),
        (BUS, {"subject": "a", "rate": "5/week"}, "rate"),
        (HOOK, {"rate": "100/s", "burst": 0}, "burst"),
        (HOOK, {"rate": "100/s", "burst": "5"}, "burst"),
        (STREAM, {"burst": 5}, "burst"),
    ],
)
def test_every_option_mistake_names_its_field(
    base: dict[str, Any], options: dict[str, Any], field: str
) -> None:
    assert field_of({"d": {**base, **options}}) == f"destinations.d.{field}"


def test_a_rate_and_burst_reach_every_kind_of_destination() -> None:
    hook = build_destination(
        DestinationSpec.from_dict({**HOOK, "rate": "100/s", "burst": 10}, name="h")
    )
    assert (str(getattr(hook, "rate", None)), getattr(hook, "burst", None)) == ("100/s", 10)
    bus = build_destination(
        DestinationSpec.from_dict({**BUS, "subject": "a", "rate": "6000/min"}, name="b")
    )
    assert (str(getattr(bus, "rate", None)), getattr(bus, "burst", None)) == ("6000/min", None)
    plain = build_destination(DestinationSpec.from_dict(HOOK, name="p"))
    assert getattr(plain, "rate", "?") is None
    with pytest.raises(InvalidInput) as caught:
        WebhookDestination("h", "https://x/", rate="100/s", burst=-1)
    assert caught.value.field == "burst"
    with pytest.raises(InvalidInput) as caught:
        WebhookDestination("h", "https://x/", burst=3)
    assert caught.value.field == "burst"
    with pytest.raises(InvalidInput) as caught:
        WebhookDestination("h", "https://x/", rate="lots")
    assert caught.value.field == "rate"


def test_unknown_kind_without_a_path_is_field_kind() -> None:
    with pytest.raises(InvalidInput) as caught:
        DestinationSpec.from_dict({"kind": "sqs", "name": "q"})
    assert caught.value.field == "kind"
    assert caught.value.code == "invalid_input"


def test_options_set_to_null_mean_the_default() -> None:
    spec = DestinationSpec.from_dict(
        {"kind": "webhook", "url": "https://x", "timeout": None}, name="h"
    )
    assert "timeout" not in spec.options
    hook = build_destination(spec)
    assert isinstance(hook, WebhookDestination)
    assert hook.timeout == 10.0


def test_to_dict_round_trips_and_hides_secrets_and_passwords() -> None:
    specs = parse_destinations(CONFIG)
    shown = {name: spec.to_dict() for name, spec in specs.items()}
    assert shown["billing-hook"]["secret"] == "***"
    assert shown["audit"]["url"] == "redis://:***@redis:6379/0"
    assert shown["orders"]["url"] == "amqp://u:***@rabbit/"
    assert shown["billing-hook"]["url"] == "https://billing.example/…"
    assert SECRET not in repr(specs["billing-hook"])
    tokened = WebhookDestination("h", "https://u:pw@hooks.example/T0/B1/s3cr3t?token=t")
    assert "s3cr3t" not in repr(tokened)
    assert "pw" not in repr(tokened)
    assert "pw" not in repr(specs["orders"])
    for spec in specs.values():
        again = DestinationSpec.from_dict(spec.to_dict(redact=False))
        assert again == spec


def test_build_destination_makes_each_kind_without_connecting() -> None:
    specs = parse_destinations(CONFIG)
    built = {name: build_destination(spec) for name, spec in specs.items()}
    assert {type(d).__name__ for d in built.values()} == {
        "WebhookDestination",
        "NatsDestination",
        "RedisStreamDestination",
        "RabbitMQDestination",
    }
    for name, destination in built.items():
        assert destination.name == name
        assert isinstance(destination, Destination)
    assert "pw" not in repr(built["audit"])


def test_secret_env_is_read_when_built_and_must_be_set() -> None:
    spec = DestinationSpec.from_dict(
        {"kind": "webhook", "url": "https://x", "secret_env": "HOOK_SECRET"}, name="h"
    )
    assert "secret" not in spec.to_dict(redact=False)
    hook = build_destination(spec, env={"HOOK_SECRET": SECRET})
    assert isinstance(hook, WebhookDestination)
    assert hook.secret == SECRET
    with pytest.raises(InvalidInput) as caught:
        build_destination(spec, env={})
    assert caught.value.field == "secret_env"


def test_constructors_check_their_arguments_too() -> None:
    with pytest.raises(InvalidInput) as caught:
        WebhookDestination("h", "not a url")
    assert caught.value.field == "url"
    with pytest.raises(InvalidInput) as caught:
        WebhookDestination("no spaces please", "https://x")
    assert caught.value.field == "name"


def test_envelope_is_stable_json_with_the_documented_fields() -> None:
    delivery = Delivery.from_event(event(), "hook1")
    assert delivery.delivery_id == "shop:k:hook1"
    body = envelope_json(delivery)
    assert body.startswith(b'{"version":1,"id":7,"key":"k","namespace":"shop","type":"order.paid"')
    assert json.loads(body) == envelope(delivery)
    assert list(envelope(delivery)) == [
        "version",
        "id",
        "key",
        "namespace",
        "type",
        "payload",
        "subject",
        "due_at",
        "fired_at",
        "attempt",
        "max_attempts",
        "correlation_id",
        "destination",
        "delivery_id",
        "emitted_at",
        "producer",
        "redelivery",
        "message_id",
    ]
    assert envelope(delivery)["due_at"] == "2025-03-15T13:00:00Z"
    assert envelope(delivery)["message_id"] == delivery.delivery_id
    retry = Delivery.from_event(event(attempt=3), "hook1")
    assert retry.delivery_id == delivery.delivery_id


def test_an_envelope_json_cannot_carry_is_a_permanent_failure() -> None:
    with pytest.raises(DeliveryFailed) as caught:
        envelope_json(Delivery.from_event(event(payload={"x": float("nan")}), "h"))
    assert not caught.value.retryable


class Recorder:
    """A destination double: records deliveries, counts closes, may fail on close."""

    def __init__(self, name: str, *, fail_close: bool = False) -> None:
        self.name = name
        self.closed = 0
        self.fail_close = fail_close

    async def deliver(self, delivery: Delivery) -> None:
        return None

    async def close(self) -> None:
        self.closed += 1
        if self.fail_close:
            raise RuntimeError("boom")


def test_destinations_by_name_close_all_even_when_one_fails() -> None:
    async def main() -> None:
        a, b = Recorder("a", fail_close=True), Recorder("b")
        async with Destinations([a, b]) as destinations:
            assert destinations.get("b") is b
            assert "a" in destinations
            assert len(destinations) == 2
            with pytest.raises(NotFound):
                destinations.get("c")
            with pytest.raises(InvalidInput):
                destinations.add(Recorder("a"))
        assert (a.closed, b.closed) == (1, 1)

    asyncio.run(main())


def test_destinations_from_specs_builds_them_all() -> None:
    destinations = Destinations.from_specs(parse_destinations(CONFIG).values())
    assert sorted(d.name for d in destinations) == ["audit", "billing-hook", "bus", "orders"]
    asyncio.run(destinations.close())
