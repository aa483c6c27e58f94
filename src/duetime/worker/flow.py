"""Flow control at the claim: the worker's flow gate.

A namespace's flow control rules (:mod:`duetime.model.flow_rules`: limits, rates, pauses) are read
again every :data:`RULES_REFRESH`; while any is in force, claims go through the store's ruled
claim, which holds back the rows a full limit or a paused type may not take, and says which
limits held rows back and when the first of them may allow more. It hands forward, with the
claimed rows, the instant each row a rate granted may start (:data:`RATE_START_DELAY`); the
starter holds them until then.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from duetime.dispatch import Dispatch
from duetime.model import Claimed
from duetime.model.flow_rules import FlowPlan, plan_of
from duetime.worker.shared import Shared

log = logging.getLogger("duetime.worker")

RATE_START_DELAY = timedelta(milliseconds=100)
"""A row a rate limit granted starts this long after the grant (on the database's clock), not
as soon as its claim is back: the lag from grant to start differs between workers and claims
(a commit, a busy event loop), and starts taken at once would bunch the grants of one window
into a shorter one. Held to the grant's instant, the starts keep the rate's spacing unless a
worker lags by more than this."""
RULES_REFRESH = 1.0
"""Seconds a worker uses its namespace's flow control rules (:mod:`duetime.model.flow_rules`) before
reading them again: a limit, pause or resume set anywhere reaches every worker within this.
While any rule is in force a worker sleeps at most this long, so it sees a resume in time."""

NEVER = datetime.max.replace(tzinfo=UTC)
"""No type free of rules is due at all (see :attr:`FlowGate.clear_until`)."""


class FlowGate:
    """The namespace's rules as last read, and what they held back."""

    def __init__(self, shared: Shared, namespace: str, dispatch: Dispatch) -> None:
        self.shared = shared
        self.store = shared.store
        self.clock = shared.clock
        self.namespace = namespace
        self.dispatch = dispatch
        self.plan = FlowPlan()  # the namespace's flow control rules, as last read …
        self._plan_read = -RULES_REFRESH  # … at this loop time
        self._plan_known = False  # whether they were ever read
        self.held: tuple[str, ...] = ()  # limits that held rows back at the last claim …
        self.retry_at: datetime | None = None  # … and when the first of them may allow more
        self.clear_until: datetime | None = None
        """No type free of rules is due before this instant (None: not known). Set when their
        claim comes back short, so claims under rules stop stepping over held-back rows to look
        for them; forgotten at a wake-up hint (:meth:`hinted` counts them) and at each re-read
        of the rules."""
        self._hints = 0

    def hinted(self) -> None:
        """A store heard of new work: a type free of rules may be due sooner than was known."""
        self.shared.owner.check("FlowGate.hinted")
        self.clear_until = None
        self._hints += 1

    async def rules(self, loop: asyncio.AbstractEventLoop) -> FlowPlan:
        """The namespace's flow control rules, read again every :data:`RULES_REFRESH`. Until
        they have been read once, a failed read raises: claiming as if there were none would
        start what a pause holds and take past a limit."""
        now = loop.time()
        if now - self._plan_read >= RULES_REFRESH:
            self._plan_read = now
            try:
                plan = plan_of(await self.store.limits.list_rules(self.namespace, claiming=True))
            except Exception:
                if not self._plan_known:
                    self._plan_read = -RULES_REFRESH  # the next claim reads them again
                    raise
                log.exception("reading the flow control rules failed; using the last ones")
            else:
                self._plan_known = True
                if plan.empty:
                    self.held, self.retry_at = (), None
                self.plan, self.clear_until = plan, None
        return self.plan

    async def next_run_at(self) -> datetime | None:
        """When the next row the rules (:attr:`plan`, not empty) let through is due."""
        clear = self.clear_until
        next_run = await self.store.limits.next_run_at(
            self.namespace,
            self.dispatch.claim_filter,
            self.plan,
            self.held,
            ungoverned=clear is None,
        )
        if clear is not None and clear != NEVER:
            next_run = clear if next_run is None else min(next_run, clear)
        return next_run

    async def claim(
        self, plan: FlowPlan, now: datetime, cutoff: datetime, limit: int, lease_until: datetime
    ) -> tuple[list[Claimed], dict[int, datetime]]:
        """The claim under flow control rules (see ``store.limits.claim``) made at ``now`` of
        the rows due by ``cutoff``, and the instant each row a rate granted may start."""
        hints, clear = self._hints, self.clear_until
        ungoverned = clear is None or cutoff >= clear
        limits, types = self.store.limits, self.dispatch.claim_filter
        ruled = await limits.claim(
            self.namespace,
            types,
            now,
            limit,
            self.shared.node_id,
            lease_until,
            plan,
            ungoverned=ungoverned,
            due_by=cutoff,
        )
        self.held, self.retry_at = ruled.held, ruled.retry_at
        for pattern in ruled.held:
            for observer in self.shared.observers:
                try:
                    observer.held_back(self.namespace, pattern)
                except Exception:  # a metrics hook must not stop the claims
                    log.exception("a worker observer failed on a held-back limit")
        if ungoverned and ruled.ungoverned_short:
            every = tuple(g.rule.pattern for g in plan.limits)
            later = await limits.next_run_at(self.namespace, types, plan, every)
            if hints == self._hints:  # no hint meanwhile: what it says still holds
                self.clear_until = NEVER if later is None else later
        # A row whose paced instant has passed already (its rate far from the bound: the slack
        # covers the whole pacing) starts as any other, without going through the pacing.
        passed = self.clock.now() - RATE_START_DELAY
        granted = ruled.granted_at.items()
        return ruled.claimed, {key: at + RATE_START_DELAY for key, at in granted if at > passed}
