"""The facade's audit log: operator actions written with who asked for them, and read back.

An action is written once it is done (a bulk action once its last batch is, with the count it
reached even when it stopped early), when the facade knows who acts: the ``actor`` given to the
call, else the app's own (:attr:`AppContext.actor`; the CLI's is ``cli:<user>@<host>``). The
REST API passes each request's token. Plain Python calls without one are the application's own
work, not an operator's, and are not written. Creating a timer is written only when an operator
interface names its actor (:meth:`Audit.record_put`). An action that changed nothing (a
bulk action that took no timer, a schedule kept as it was) is not written: there is nothing to
answer for, and a request repeated in a loop cannot grow the log.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from duetime.app.context import AppContext
from duetime.model import JSON, Page, PutResult
from duetime.model.audit import Actor, AuditEntry, AuditRecord
from duetime.support.jsontext import json_text
from duetime.validation import check_limit

log = logging.getLogger("duetime.audit")


class Audit:
    """The audit log of the app's namespace (``app.audit``): read it, write to it; the other
    parts write their operator actions through :meth:`note`."""

    def __init__(self, context: AppContext) -> None:
        self._context = context

    async def log(self, *, cursor: str | None = None, limit: int = 50) -> Page[AuditEntry]:
        """The namespace's audit log, newest first; pass ``next_cursor`` back for more."""
        check_limit(limit)
        context = self._context
        await context.open()
        return await context.store.audit.list_entries(context.namespace, cursor, limit)

    async def record(
        self,
        action: str,
        target: dict[str, JSON],
        count: int = 1,
        *,
        actor: Actor | None = None,
    ) -> None:
        """Write an action done by other means (several calls that make one operator action,
        or a tool of your own) to the namespace's audit log, by ``actor`` or the app's own."""
        await self._context.open()
        await self.note(actor, action, target, count, done=False)

    async def record_put(self, actor: Actor | None, action: str, result: PutResult) -> None:
        """Write a timer an operator created or updated (``schedule``, ``emit``) by ``actor``;
        nothing without one (an application's own write: the timer is its record) or when the
        timer was kept as it was (nothing changed)."""
        if actor is None or result.action == "kept":
            return
        target: dict[str, JSON] = {"key": result.timer.key, "outcome": result.action}
        await self.note(actor, action, target)

    async def note(
        self,
        actor: Actor | None,
        action: str,
        target: dict[str, JSON],
        count: int = 1,
        *,
        namespaces: Sequence[str] | None = None,
        done: bool = True,
    ) -> None:
        """Write ``action`` to the log of the app's namespace (or of each of ``namespaces``),
        by ``actor`` or the app's own; nothing when neither is known.

        ``done``: the action has committed already, in a transaction of its own, so the
        entry's failure (the store gone meanwhile) is logged with the entry and not raised: the
        action's answer must not say that nothing was done when it was. False when the entry
        is itself the write asked for (:meth:`record`)."""
        context = self._context
        who = actor or context.actor
        if who is None:
            return
        where = [context.namespace] if namespaces is None else list(namespaces)
        records = [AuditRecord(namespace, who, action, target, count) for namespace in where]
        try:
            await context.store.audit.record(records, context.clock.now())
        except Exception:
            if not done:
                raise
            log.exception(
                "the audit entry of an action that was done could not be written: %s by %s "
                "(%s) on %s, count %d, in %s",
                action,
                who.name,
                who.via,
                json_text(target),
                count,
                ", ".join(where),
            )
