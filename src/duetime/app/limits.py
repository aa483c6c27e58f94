"""The limits part of an app (``app.limits``), its flow control: limits and pauses per event
type or glob in the app's namespace.

They are rows in the database (the store's ``limits`` part), so every worker on every node
obeys them, and a change reaches them within a second (``worker.flow.RULES_REFRESH``) without a
restart. The rules are :mod:`duetime.model.flow_rules`'s; the rate math
:mod:`duetime.timemath.ratelimit`'s.
"""

from __future__ import annotations

import builtins

from duetime.app.audit import Audit
from duetime.app.context import AppContext
from duetime.app.deprecation import warn_moved
from duetime.errors import NotFound
from duetime.model import Page
from duetime.model.audit import Actor
from duetime.model.flow_rules import FlowRule, FlowStatus, check_pattern, new_rule
from duetime.timemath.ratelimit import Rate, parse_rate
from duetime.validation import check_limit


class Limits:
    """Limits, pause and resume; each change is audited."""

    def __init__(self, context: AppContext, audit: Audit) -> None:
        self._context = context
        self._audit = audit

    async def set(
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
        context = self._context
        rule = new_rule(
            context.namespace,
            pattern,
            concurrency=concurrency,
            rate=parsed,
            burst=burst,
            partition_by=partition_by,
        )
        await context.open()
        if rule.partition_by not in (None, "subject"):
            context.store.sealing.refuse(context.namespace, "partition_by")
        cap = context.settings.max_limits
        stored = await context.store.limits.put_limit(rule, context.clock.now(), cap)
        limit = {
            name: value
            for name, value in stored.to_dict().items()
            if name in ("concurrency", "rate", "burst", "partition_by") and value is not None
        }
        await self._audit.note(actor, "limit_set", {"pattern": pattern, "limit": limit})
        return stored

    async def remove(self, pattern: str, *, actor: Actor | None = None) -> None:
        """Drop the pattern's limit (a pause stays); NotFound when it has none."""
        check_pattern(pattern)
        context = self._context
        await context.open()
        now = context.clock.now()
        if not await context.store.limits.remove_limit(context.namespace, pattern, now):
            raise NotFound(f"no limit on {pattern!r} in namespace {context.namespace!r}")
        await self._audit.note(actor, "limit_remove", {"pattern": pattern})

    async def pause(self, pattern: str, *, actor: Actor | None = None) -> FlowRule:
        """Stop starting the types ``pattern`` matches, on every node: their timers stay
        scheduled, in order, until :meth:`resume`."""
        check_pattern(pattern)
        context = self._context
        await context.open()
        now = context.clock.now()
        cap = context.settings.max_limits
        rule = await context.store.limits.set_paused(context.namespace, pattern, True, now, cap)
        assert rule is not None  # a paused row is never pruned
        await self._audit.note(actor, "pause", {"pattern": pattern})
        return rule

    async def resume(self, pattern: str, *, actor: Actor | None = None) -> None:
        """Let the paused types run again: their due timers start oldest first (expiry rules
        apply as after downtime). NotFound when ``pattern`` is not paused."""
        check_pattern(pattern)
        context = self._context
        await context.open()
        rules = await context.store.limits.list_rules(context.namespace)
        if not any(r.pattern == pattern and r.paused for r in rules):
            raise NotFound(f"{pattern!r} is not paused in namespace {context.namespace!r}")
        now = context.clock.now()
        await context.store.limits.set_paused(context.namespace, pattern, False, now)
        await self._audit.note(actor, "resume", {"pattern": pattern})

    async def list(self) -> builtins.list[FlowStatus]:
        """The namespace's rules with what each holds now (running, held back, oldest held):
        all of them (at most ``max_limits``); :meth:`page` pages them."""
        context = self._context
        await context.open()
        return (await context.store.limits.status(context.namespace, context.clock.now())).items

    async def page(self, *, cursor: str | None = None, limit: int = 100) -> Page[FlowStatus]:
        """One page of :meth:`list`, by pattern; pass ``next_cursor`` back for the next."""
        check_limit(limit)
        context = self._context
        await context.open()
        now = context.clock.now()
        return await context.store.limits.status(context.namespace, now, cursor, limit)

    async def __call__(self) -> builtins.list[FlowStatus]:
        """Deprecated: ``app.limits()`` is :meth:`list`."""
        warn_moved("limits()", "limits.list()")
        return await self.list()
