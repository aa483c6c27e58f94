"""A worker's routing from its own subscriptions and the live nodes' (no database needed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from duetime.bus.routes import HANDLER, Fan, Route
from duetime.destinations import WebhookDestination
from duetime.dispatch import Dispatch, live_subscriptions
from duetime.errors import InvalidInput
from duetime.handlers import Handler, HandlerRegistry
from duetime.model import Node, Status, Subscription, Timer

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LEASE = timedelta(seconds=30)
HOOK = WebhookDestination("hook", "http://127.0.0.1:9/hook")


def row(type: str, destination: str | None = None) -> Timer:
    key = "k" if destination is None else f"k@{destination}"
    return Timer(
        1, "ns", key, type, None, None, NOW, Status.RUNNING, 1, 3, NOW, NOW, NOW,
        destination=destination,
    )  # fmt: skip


def node(id: str, *subscriptions: Subscription, beat: datetime = NOW) -> Node:
    return Node(id, "h", 1, NOW, beat, subscriptions=subscriptions)


def registry(*types: str) -> HandlerRegistry:
    handlers = HandlerRegistry()
    for type in types:
        handlers.register(type, lambda event: None)
    return handlers


def test_a_handler_only_node_delivers_events_as_they_are() -> None:
    handlers = registry("order.paid")
    dispatch = Dispatch("ns", "me", handlers)
    assert dispatch.may_fan_out is False
    assert dispatch.target(row("order.paid")) is handlers.get("order.paid")
    assert dispatch.target(row("order.paid", HANDLER)) is handlers.get("order.paid")
    assert dispatch.target(row("other")) is None
    assert dispatch.missing(row("other")) == "no handler is registered for event type 'other'"


def test_the_live_nodes_decide_between_direct_and_fan_out() -> None:
    handlers = registry("order.paid")
    dispatch = Dispatch("ns", "me", handlers, [Route("order.*", ("hook",))], {"hook": HOOK})
    assert dispatch.may_fan_out is True
    assert dispatch.target(row("order.paid")) == Fan((HANDLER, "hook"))
    shipped = dispatch.target(row("order.shipped"))
    assert isinstance(shipped, Handler)
    assert shipped.destination == "hook"
    assert dispatch.target(row("order.paid", "hook")) is shipped
    assert dispatch.target(row("order.paid", "gone")) is None
    assert "'gone' is not configured" in dispatch.missing(row("x", "gone"))

    elsewhere = Subscription("ns", "order.shipped", ("bus",))
    stale = Subscription("ns", "*", ("audit",))
    dispatch.refresh(
        [
            node("other", elsewhere),
            node("dead", stale, beat=NOW - 2 * LEASE),
            node("me", Subscription("ns", "*", ("ignored",))),  # its own row: already known
            node("foreign", Subscription("other-ns", "*", ("x",))),
        ],
        NOW,
        LEASE,
    )
    assert dispatch.target(row("order.shipped")) == Fan(("bus", "hook"))
    assert dispatch.target(row("order.paid")) == Fan((HANDLER, "hook"))
    everyone = dispatch.everyone()
    assert (everyone.types, everyone.patterns) == (("order.paid", "order.shipped"), ("order.*",))
    assert everyone.destinations == ("hook", "bus")


def test_a_single_destination_served_elsewhere_is_fanned_out_to() -> None:
    dispatch = Dispatch("ns", "me", registry(), [Route("a", ("hook",))], {"hook": HOOK})
    dispatch.refresh([node("n2", Subscription("ns", "b", (HANDLER,)))], NOW, LEASE)
    assert dispatch.target(row("b")) == Fan((HANDLER,))


def test_routes_must_name_known_destinations() -> None:
    with pytest.raises(InvalidInput) as caught:
        Dispatch("ns", "me", registry(), [Route("a", ("hook",)), Route("b", ("hook", "no"))])
    assert caught.value.field == "routes[0].to[0]"
    with pytest.raises(InvalidInput) as caught:
        Dispatch("ns", "me", registry(), [Route("b", ("hook", "no"))], {"hook": HOOK})
    assert caught.value.field == "routes[0].to[1]"


def test_live_subscriptions_of_one_namespace() -> None:
    mine = Subscription("ns", "a", (HANDLER,))
    nodes = [node("a", mine), node("b", Subscription("x", "a", (HANDLER,)))]
    assert live_subscriptions(nodes, "ns", NOW + LEASE, LEASE) == (mine,)
    assert live_subscriptions(nodes, "ns", NOW + LEASE + timedelta(microseconds=1), LEASE) == ()
