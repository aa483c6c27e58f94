"""The parts of a store that say who may reach it and what they did: API tokens, the database
roles granted the SQL functions (and the schedule changes they request), and the audit log.

Like every part (see :mod:`duetime.store.parts`), each is an attribute of the store; both
built-in backends keep all three.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol

from duetime.model import Page, Schedule
from duetime.model.audit import AuditEntry, AuditRecord
from duetime.model.sql_requests import ScheduleChange
from duetime.model.tokens import TokenInfo


class SqlAccessStore(Protocol):
    """Which database roles may use the SQL functions (``schedule(...)`` and the rest, run as
    the schema's owner), and in which namespaces."""

    async def grant_sql(self, role: str, namespaces: Sequence[str], now: datetime) -> list[str]:
        """Let ``role`` call the SQL functions in ``namespaces`` (USAGE on the schema, EXECUTE
        on the functions, no right on any table); the functions granted."""
        ...

    async def revoke_sql(self, role: str, namespaces: Sequence[str]) -> int:
        """Take ``namespaces`` back from ``role``; how many it held."""
        ...

    async def sql_grants(self) -> list[tuple[str, str]]:
        """Every ``(role, namespace)`` granted, by role and namespace."""
        ...

    async def pending_schedule_requests(self, limit: int) -> list[ScheduleChange]:
        """Schedule changes made from SQL that no worker has applied yet, oldest first."""
        ...

    async def finish_schedule_request(
        self, id: int, failed: bool, outcome: str, now: datetime
    ) -> bool:
        """Record what applying a request did (or why it failed); False if another worker
        recorded it first."""
        ...

    async def previous_schedule(self, request_id: int) -> Schedule | None:
        """The schedule as it was planned before request ``request_id`` changed it (None
        when the request made it), for restoring when the change fails duetime's checks."""
        ...

    async def keep_settings(self, settings: Mapping[str, int], now: datetime) -> None:
        """Make the SQL functions obey these settings (``max_payload_bytes``,
        ``max_attempts``, ``max_schedules``), as the Python path obeys the app's."""
        ...


class AuditStore(Protocol):
    """The audit log: operator actions, who asked for them and what they took; both built-in
    backends keep it."""

    async def record(self, records: Sequence[AuditRecord], now: datetime) -> None:
        """Write each action to its namespace's log, at ``now``."""
        ...

    async def list_entries(
        self, namespace: str, cursor: str | None, limit: int
    ) -> Page[AuditEntry]:
        """Newest first, cursor-paginated (``audit.<id>`` cursors)."""
        ...

    async def prune(self, before: datetime, limit: int) -> int:
        """Delete up to ``limit`` of the oldest entries written before ``before`` (every
        namespace's); how many. The retention step calls it until it returns 0."""
        ...


class TokenStore(Protocol):
    """Durable storage of token hashes; both built-in backends keep them."""

    async def add_token(
        self,
        name: str | None,
        token_hash: str,
        namespaces: Sequence[str],
        read_only: bool,
        now: datetime,
        cap: int | None = None,
    ) -> TokenInfo:
        """Store a token; with ``cap``, only while fewer than ``cap`` are active, counted in
        the insert's transaction (CapReached otherwise, even while other creations race).
        Conflict naming ``name`` when a token, even a revoked one, has that name already."""
        ...

    async def token_named(self, name: str) -> TokenInfo | None:
        """The token (active or revoked) named ``name``, or None."""
        ...

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        """The active (not revoked) token with this hash, or None."""
        ...

    async def list_tokens(
        self, *, include_revoked: bool = False, after: int = 0, limit: int | None = None
    ) -> list[TokenInfo]:
        """Active tokens (and revoked ones with ``include_revoked``), oldest first: those
        after the id ``after``, at most ``limit`` (None: all)."""
        ...

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        """Revoke at once; NotFound for an unknown id, Conflict when already revoked."""
        ...

    async def touch_token(self, token_id: int, now: datetime) -> None:
        """Record that the token was just used (callers throttle this write)."""
        ...

    async def has_issued_tokens(self) -> bool:
        """Whether any token was ever issued, revoked ones included: a database whose API was
        once protected stays protected when its last token is revoked."""
        ...
