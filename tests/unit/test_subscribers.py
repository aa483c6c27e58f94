"""How many live nodes would deliver a timer: liveness, namespaces, globs, deliveries, warnings."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from duetime.bus.routes import HANDLER
from duetime.bus.subscribers import NO_SUBSCRIBER, Subscribers
from duetime.model import ClaimFilter, Node, Status, Subscription, Timer

NOW = datetime(2030, 1, 1, tzinfo=UTC)
LEASE = timedelta(seconds=30)


def node(id: str, *subscriptions: Subscription, age: float = 1.0) -> Node:
    beat = NOW - timedelta(seconds=age)
    return Node(id, "host", 1, beat, beat, subscriptions=subscriptions)


def timer(type: str, destination: str | None = None, status: Status = Status.SCHEDULED) -> Timer:
    return Timer(
        1, "shop", "k", type, None, None, NOW, status, 0, 20, NOW, NOW, NOW, destination=destination
    )


NODES = [
    node("billing", Subscription("shop", "order.paid", (HANDLER,))),
    node("router", Subscription("shop", "order.*", ("hook", "bus"))),
    node("gone", Subscription("shop", "user.created", (HANDLER,)), age=31),
    node("elsewhere", Subscription("other", "audit.*", ("bus",))),
    node("api"),
]


def test_counts_the_live_nodes_of_the_namespace_whose_subscriptions_take_the_type() -> None:
    found = Subscribers.of(NODES, "shop", NOW, LEASE)
    assert found.count("order.paid") == 2
    assert found.count("order.shipped") == 1
    assert found.count("user.created") == 0  # its only node's heartbeat is older than the lease
    assert found.count("audit.logged") == 0  # subscribed in another namespace only
    assert found.count("order") == 0
    assert found.count("order.paid", "hook") == 1  # a delivery: the nodes serving "hook"
    assert found.count("invoice.sent", "bus") == 1
    assert found.count("order.paid", HANDLER) == 1
    assert found.count("order.shipped", HANDLER) == 0


def test_a_heartbeat_exactly_a_lease_old_is_alive_as_the_nodes_listing_says() -> None:
    edge = [node("edge", Subscription("shop", "t", (HANDLER,)), age=30)]
    assert Subscribers.of(edge, "shop", NOW, LEASE).count("t") == 1


def test_everyone_is_the_union_of_what_the_live_nodes_claim() -> None:
    found = Subscribers.of(NODES, "shop", NOW, LEASE)
    assert found.everyone() == ClaimFilter(
        types=("order.paid",),
        patterns=("order.*",),
        destinations=("hook", "bus"),
        handler_types=("order.paid",),
    )
    assert Subscribers.of([], "shop", NOW, LEASE).everyone() == ClaimFilter()


def test_shown_carries_the_count_and_warnings_name_the_type() -> None:
    found = Subscribers.of(NODES, "shop", NOW, LEASE)
    assert found.shown(timer("order.paid"))["subscribers"] == 2
    assert found.warnings(timer("order.paid")) == []
    (warning,) = found.warnings(timer("user.created"))
    assert warning["code"] == NO_SUBSCRIBER
    assert warning["field"] == "type"
    assert "no subscriber for 'user.created'" in warning["message"]
    (delivery,) = found.warnings(timer("order.paid", "gone-hook"))
    assert "destination 'gone-hook'" in delivery["message"]


def test_a_timer_no_longer_pending_warns_of_nothing() -> None:
    found = Subscribers.of([], "shop", NOW, LEASE)
    assert found.warnings(timer("t", status=Status.RETRYING)) != []
    for status in (Status.DONE, Status.DEAD, Status.CANCELLED, Status.RUNNING):
        assert found.warnings(replace(timer("t"), status=status)) == []
