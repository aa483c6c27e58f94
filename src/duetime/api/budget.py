"""Every request's database work under a budget (:mod:`duetime.support.budgets`): at most
``statement_timeout`` a statement, at most ``connection_wait`` for a connection; past either
the request is answered 503 with ``Retry-After`` (:class:`~duetime.errors.StoreBusy`) and the
connection goes back to the other tenants."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from duetime.config import Settings
from duetime.support import budgets
from duetime.support.budgets import Budget


def request_budget(settings: Settings) -> Budget:
    return Budget(
        statement_timeout=settings.statement_timeout.total_seconds(),
        connection_wait=settings.connection_wait.total_seconds(),
        page_bytes=settings.page_bytes,
    )


class RequestBudget:
    """ASGI middleware: the request's handler and whatever it awaits run within the budget."""

    def __init__(self, app: ASGIApp, budget: Budget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with budgets.within(self.budget):
            await self.app(scope, receive, send)
