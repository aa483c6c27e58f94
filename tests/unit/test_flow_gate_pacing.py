"""The flow gate paces only the rows whose paced instant is still ahead.

A rate's grant says from which instant each row's pacing counts (the grant's, earlier by the
rate's slack); a row is held until that instant plus ``RATE_START_DELAY``. When the instant has
passed already — a rate far from its bound, its slack covering the whole pacing — the row starts
as any other would, without a round through the pacing's timer and the queue behind it.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from duetime.clock import FrozenClock
from duetime.model.flow_rules import FlowPlan, RuledClaim
from duetime.worker.flow import RATE_START_DELAY, FlowGate
from duetime.worker.leases import Leases
from duetime.worker.shared import Shared

NOW = datetime(2026, 3, 1, 12, tzinfo=UTC)
D = RATE_START_DELAY
MS = timedelta(milliseconds=1)


class GrantingLimits:
    """The store's flow control part, answering every claim with the grant it was given."""

    def __init__(self, granted_at: dict[int, datetime]) -> None:
        self.granted_at = granted_at

    async def claim(self, *args: Any, **kwargs: Any) -> RuledClaim:
        return RuledClaim(granted_at=dict(self.granted_at))


def paced_by_gate(granted_at: dict[int, datetime]) -> dict[int, datetime]:
    store: Any = SimpleNamespace(limits=GrantingLimits(granted_at))
    shared = Shared(store, FrozenClock(NOW), "n1", (), Leases(D * 300))
    dispatch: Any = SimpleNamespace(claim_filter=None)
    gate = FlowGate(shared, "ns", dispatch)
    lease_until = NOW + timedelta(seconds=30)
    _, paced = asyncio.run(gate.claim(FlowPlan(), NOW, NOW, 10, lease_until))
    return dict(paced)


def test_rows_whose_paced_instant_has_passed_are_not_paced() -> None:
    granted_at = {
        1: NOW - D - MS,  # slack beyond the whole pacing: its instant passed a millisecond ago
        2: NOW - D,  # its instant is now: nothing to wait for
        3: NOW - D + MS,  # a millisecond to go
        4: NOW,  # a rate at its bound: the whole pacing
    }
    assert paced_by_gate(granted_at) == {3: NOW + MS, 4: NOW + D}


def test_a_rate_far_from_its_bound_leaves_nothing_to_pace() -> None:
    assert paced_by_gate({n: NOW - D - n * MS for n in range(1, 50)}) == {}
