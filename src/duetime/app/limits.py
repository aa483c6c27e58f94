"""The facade's flow control: limits and pauses per event type or glob in the app's namespace.

They are rows in the database (the store's ``limits`` part), so every worker on every node
obeys them, and a change reaches them within a second (``worker.flow.RULES_REFRESH``) without a
restart. The rules are :mod:`duetime.model.flow_rules`'s; the rate math
:mod:`duetime.timemath.ratelimit`'s.
"""

from __future__ import annotations

from duetime.app.audit import AuditMethods
from duetime.clock import Clock
from duetime.config import Settings
from duetime.errors import NotFound
from duetime.model import Page
from duetime.model.audit import Actor
from duetime.model.flow_rules import FlowRule, FlowStatus, check_pattern, new_rule
from duetime.store import Store
from duetime.timemath.ratelimit import Rate, parse_rate
from duetime.validation import check_limit


class LimitMethods(AuditMethods):
    """Limits, pause and resume (mixed into the facade); each change is audited."""

    store: Store
    clock: Clock
    namespace: str
    settings: Settings

    async def set_limit(
        self,
        pattern: str,
        *,
        concurrency: int | None = None,
        rate: str | Rate | None = None,
        burst: int | None = None,
        partition_by: str | None = None,
        actor: Actor | None = None,
    ) -> FlowRule:
        """Limit the types ``pattern`` matches (``email.*``) on every node: at most
        ``concurrency`` attempts running at once, at most ``rate`` starts (``"100/s"``,
        ``"6000/min"``; smooth, with up to ``burst`` at once). Replaces the pattern's limit.
        A namespace holds at most ``max_limits`` rules (limits and pauses): CapReached past
        it."""
        parsed = rate if isinstance(rate, Rate) or rate is None else parse_rate(rate)
        rule = new_rule(
            self.namespace,
            pattern,
            concurrency=concurrency,
            rate=parsed,
            burst=burst,
            partition_by=partition_by,
        )
        await self.open()
        if rule.partition_by not in (None, "subject"):
            self.store.sealing.refuse(self.namespace, "partition_by")
        cap = self.settings.max_limits
        stored = await self.store.limits.put_limit(rule, self.clock.now(), cap)
        limit = {
            name: value
            for name, value in stored.to_dict().items()
            if name in ("concurrency", "rate", "burst", "partition_by") and value is not None
        }
        await self._audit(actor, "limit_set", {"pattern": pattern, "limit": limit})
        return stored

    async def remove_limit(self, pattern: str, *, actor: Actor | None = None) -> None:
        """Drop the pattern's limit (a pause stays); NotFound when it has none."""
        check_pattern(pattern)
        await self.open()
        if not await self.store.limits.remove_limit(self.namespace, pattern, self.clock.now()):
            raise NotFound(f"no limit on {pattern!r} in namespace {self.namespace!r}")
        await self._audit(actor, "limit_remove", {"pattern": pattern})

    async def pause(self, pattern: str, *, actor: Actor | None = None) -> FlowRule:
        """Stop starting the types ``pattern`` matches, on every node: their timers stay
        scheduled, in order, until :meth:`resume`."""
        check_pattern(pattern)
        await self.open()
        now = self.clock.now()
        cap = self.settings.max_limits
        rule = await self.store.limits.set_paused(self.namespace, pattern, True, now, cap)
        assert rule is not None  # a paused row is never pruned
        await self._audit(actor, "pause", {"pattern": pattern})
        return rule

    async def resume(self, pattern: str, *, actor: Actor | None = None) -> None:
        """Let the paused types run again: their due timers start oldest first (expiry rules
        apply as after downtime). NotFound when ``pattern`` is not paused."""
        check_pattern(pattern)
        await self.open()
        rules = await self.store.limits.list_rules(self.namespace)
        if not any(r.pattern == pattern and r.paused for r in rules):
            raise NotFound(f"{pattern!r} is not paused in namespace {self.namespace!r}")
        await self.store.limits.set_paused(self.namespace, pattern, False, self.clock.now())
        await self._audit(actor, "resume", {"pattern": pattern})

    async def limits(self) -> list[FlowStatus]:
        """The namespace's rules with what each holds now (running, held back, oldest held):
        all of them (at most ``max_limits``); :meth:`list_limits` pages them."""
        await self.open()
        return (await self.store.limits.status(self.namespace, self.clock.now())).items

    async def list_limits(self, *, cursor: str | None = None, limit: int = 100) -> Page[FlowStatus]:
        """One page of :meth:`limits`, by pattern; pass ``next_cursor`` back for the next."""
        check_limit(limit)
        await self.open()
        return await self.store.limits.status(self.namespace, self.clock.now(), cursor, limit)
