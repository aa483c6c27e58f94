"""API token hashes, the same on both backends: the ``tokens`` part of a store.

Both backends keep the same columns and the same rules (id range, revoke errors); they differ
only in how an instant, a flag and the namespace list are stored, and in how a named query of
their ``tokens.sql`` is run. Each passes a :class:`TokenColumns` with its conversions and a
:data:`RunQuery`, so the logic of :class:`Tokens` is written once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from duetime.errors import Conflict, DuetimeError, NotFound
from duetime.model.tokens import TokenInfo
from duetime.store.room import tokens_full

MAX_ID = 2**63 - 1
"""Ids are 64-bit in both backends: a larger one cannot name a token (and would fail to bind)."""


class TokenRow(Protocol):
    """A fetched row, read by column name (``sqlite3.Row`` or a psycopg dict row)."""

    def __getitem__(self, column: str, /) -> Any: ...


RunQuery = Callable[[str, Mapping[str, Any], bool], Awaitable[list[TokenRow]]]
"""Run the named query of the backend's ``tokens.sql`` with these parameters (in a write
transaction when the flag says it writes); its rows."""


@dataclass(frozen=True, slots=True)
class TokenColumns:
    """How one backend stores the token columns whose types differ between databases."""

    instant_to_column: Callable[[datetime], Any]
    instant_from_column: Callable[[Any], datetime]
    namespaces_to_column: Callable[[list[str]], Any]
    namespaces_from_column: Callable[[Any], Iterable[str]]
    flag_to_column: Callable[[bool], Any]

    def new_token(
        self,
        name: str | None,
        token_hash: str,
        namespaces: Sequence[str],
        read_only: bool,
        now: datetime,
    ) -> dict[str, Any]:
        """The parameters of ``add_token``."""
        return {
            "name": name,
            "hash": token_hash,
            "namespaces": self.namespaces_to_column(list(namespaces)),
            "read_only": self.flag_to_column(read_only),
            "now": self.instant_to_column(now),
        }

    def stamp(self, token_id: int, now: datetime) -> dict[str, Any]:
        """The parameters of ``revoke_token`` and ``touch_token``: which token, and when."""
        return {"id": token_id, "now": self.instant_to_column(now)}

    def token(self, row: TokenRow) -> TokenInfo:
        """The record of a row of the ``tokens`` table."""
        return TokenInfo(
            id=row["id"],
            name=row["name"],
            namespaces=tuple(self.namespaces_from_column(row["namespaces"])),
            read_only=bool(row["read_only"]),
            created_at=self.instant_from_column(row["created_at"]),
            revoked_at=self._maybe_instant(row["revoked_at"]),
            last_used_at=self._maybe_instant(row["last_used_at"]),
        )

    def _maybe_instant(self, value: Any) -> datetime | None:
        return None if value is None else self.instant_from_column(value)


def name_taken(name: str) -> Conflict:
    """Another token, active or revoked, has ``name``: the audit log would not tell the two
    apart."""
    return Conflict(
        f"a token named {name!r} exists already (revoked ones keep their names, so the audit "
        "log names one token each): choose another name",
        field="name",
    )


def can_name_a_token(token_id: int) -> bool:
    """Whether ``token_id`` is in the id range; outside it no query is sent at all."""
    return 0 < token_id <= MAX_ID


def no_such_token(token_id: int) -> NotFound:
    return NotFound(f"no token with id {token_id}", field="id")


def revoke_refused(token_id: int, *, exists: bool) -> DuetimeError:
    """Why a revoke changed no row: the token is unknown, or it was revoked already."""
    if not exists:
        return no_such_token(token_id)
    return Conflict(f"token {token_id} is already revoked", field="id")


class Tokens:
    """The :class:`~duetime.store.parts.TokenStore` of a backend, given its columns and queries."""

    def __init__(self, columns: TokenColumns, run: RunQuery) -> None:
        self._columns = columns
        self._run = run

    async def add_token(
        self,
        name: str | None,
        token_hash: str,
        namespaces: Sequence[str],
        read_only: bool,
        now: datetime,
        cap: int | None = None,
    ) -> TokenInfo:
        params = self._columns.new_token(name, token_hash, namespaces, read_only, now)
        rows = await self._run("add_token", {**params, "cap": cap}, True)
        if not rows:
            if name is not None and await self.token_named(name) is not None:
                raise name_taken(name)
            assert cap is not None  # only a cap or a taken name leaves the insert without a row
            raise tokens_full(cap)
        return self._columns.token(rows[0])

    async def token_named(self, name: str) -> TokenInfo | None:
        rows = await self._run("token_named", {"name": name}, False)
        return self._columns.token(rows[0]) if rows else None

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        rows = await self._run("find_token", {"hash": token_hash}, False)
        return self._columns.token(rows[0]) if rows else None

    async def list_tokens(
        self, *, include_revoked: bool = False, after: int = 0, limit: int | None = None
    ) -> list[TokenInfo]:
        params = {
            "include_revoked": self._columns.flag_to_column(include_revoked),
            "after": max(0, min(after, MAX_ID)),
            "limit": limit,
        }
        return [self._columns.token(row) for row in await self._run("list_tokens", params, False)]

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        """A token is never deleted, so when the revoke changes no row, whether it exists
        tells an unknown id (NotFound) from one revoked already (Conflict)."""
        if not can_name_a_token(token_id):
            raise no_such_token(token_id)
        rows = await self._run("revoke_token", self._columns.stamp(token_id, now), True)
        if rows:
            return self._columns.token(rows[0])
        exists = bool(await self._run("get_token", {"id": token_id}, False))
        raise revoke_refused(token_id, exists=exists)

    async def touch_token(self, token_id: int, now: datetime) -> None:
        if can_name_a_token(token_id):
            await self._run("touch_token", self._columns.stamp(token_id, now), True)

    async def has_issued_tokens(self) -> bool:
        (row,) = await self._run("has_issued_tokens", {}, False)
        return bool(row["issued"])
