"""How many live nodes can deliver a timer: the count every view shows, 0 saying "no subscriber".

A timer of a type that no live node has a handler or a route for waits without a word: nothing
claims it. So the API, the CLI and the console show, beside each timer, how many live nodes
would take it, and ``schedule`` warns when it stores one that none would. The count applies the
rule the stores' claim applies (:func:`duetime.bus.routes.claims`), to the subscriptions the nodes
table holds: one read of that table answers for every timer a request shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from duetime.bus.routes import HANDLER, claim_filter, claims
from duetime.model import JSON, ClaimFilter, Node, Timer

NO_SUBSCRIBER = "no_subscriber"
"""The code of the warning given for a timer no live node would deliver."""


@dataclass(frozen=True, slots=True)
class Subscribers:
    """The live nodes of one namespace, each as the filter of what it claims there."""

    namespace: str
    nodes: tuple[ClaimFilter, ...]

    @classmethod
    def of(
        cls, nodes: Iterable[Node], namespace: str, now: datetime, fresh: timedelta
    ) -> Subscribers:
        """The nodes whose heartbeat is at most ``fresh`` old (the lease: as ``GET /v1/nodes``
        calls them alive) and which subscribe to something in ``namespace``."""
        live = []
        for node in nodes:
            if now - node.heartbeat_at > fresh:
                continue
            mine = [s for s in node.subscriptions if s.namespace == namespace]
            if mine:
                live.append(claim_filter(mine))
        return cls(namespace, tuple(live))

    def count(self, type: str, destination: str | None = None) -> int:
        """How many live nodes claim a pending row of ``type`` (to ``destination``, None for
        an event)."""
        return sum(1 for claim in self.nodes if claims(claim, type, destination))

    def of_timer(self, timer: Timer) -> int:
        return self.count(timer.type, timer.destination)

    def everyone(self) -> ClaimFilter:
        """What the live nodes claim together: the rows nobody claims are the unsubscribed."""
        return ClaimFilter(
            types=_union(c.types for c in self.nodes),
            patterns=_union(c.patterns for c in self.nodes),
            destinations=_union(c.destinations for c in self.nodes),
            handler_types=_union(c.handler_types for c in self.nodes),
        )

    def shown(self, timer: Timer) -> dict[str, JSON]:
        """The timer as the API and the CLI's ``--json`` show it, with its ``subscribers``."""
        return {**timer.to_dict(), "subscribers": self.of_timer(timer)}

    def warnings(self, timer: Timer) -> list[dict[str, JSON]]:
        """What to tell whoever just stored ``timer``: that it will wait, if nobody would take
        it. A timer no longer pending (kept as it was, say) warns of nothing."""
        if not timer.status.is_pending or self.of_timer(timer):
            return []
        return [{"code": NO_SUBSCRIBER, "field": "type", "message": unsubscribed_reason(timer)}]


def unsubscribed_reason(timer: Timer) -> str:
    """Why ``timer`` waits, and what makes it fire."""
    if timer.destination is not None and timer.destination != HANDLER:
        return (
            f"no live node serves destination {timer.destination!r}: this delivery of "
            f"{timer.type!r} waits until a node with that destination runs"
        )
    return (
        f"no subscriber for {timer.type!r}: no live node has a handler or a route for it, so it "
        "waits until one runs (e.g. duetime serve --app module:app, or --routes routes.json)"
    )


def _union(groups: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(item for group in groups for item in group))
