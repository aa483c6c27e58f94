"""Destinations' own rate limits kept as rules: a destination's ``rate`` becomes the rule of
its deliveries (:func:`duetime.model.flow_rules.destination_rule`), written when the app or a worker
opens, and removed once the destination has no rate any more.

Only the destinations this process knows are brought in step: another process may serve (and
limit) others in the same namespace, and a user's rules on event types are never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from duetime.destinations.base import Destination, own_rate
from duetime.model.flow_rules import FlowRule, destination_rule
from duetime.store import Store


def wanted_rule(namespace: str, destination: Destination) -> FlowRule | None:
    """The rule ``destination``'s rate asks for (None: it has no rate)."""
    found = own_rate(destination)
    if found is None:
        return None
    return destination_rule(namespace, destination.name, *found)


async def keep_destination_limits(
    store: Store, namespace: str, destinations: Iterable[Destination], now: datetime
) -> None:
    """Write the rules of the destinations' rates that differ from the stored ones, and remove
    those of destinations that no longer have a rate."""
    stored = {
        rule.destination: rule
        for rule in await store.limits.list_rules(namespace)
        if rule.destination is not None and rule.limits
    }
    for destination in destinations:
        want = wanted_rule(namespace, destination)
        have = stored.get(destination.name)
        if want is not None:
            if have is None or (have.rate, have.burst) != (want.rate, want.burst):
                await store.limits.put_limit(want, now)
        elif have is not None:
            await store.limits.remove_limit(namespace, have.pattern, now)
