"""API token rows ↔ :class:`~duetime.auth.TokenInfo`, shared by the SQLite and PostgreSQL stores.

Both backends keep the same columns and the same rules (id range, revoke errors); they differ
only in how an instant, a flag and the namespace list are stored. Each backend passes a
:class:`TokenColumns` with its own conversions, so the mapping itself is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from duetime.auth import TokenInfo
from duetime.errors import Conflict, DuetimeError, NotFound

MAX_ID = 2**63 - 1
"""Ids are 64-bit in both backends: a larger one cannot name a token (and would fail to bind)."""


class TokenRow(Protocol):
    """A fetched row, read by column name (``sqlite3.Row`` or a psycopg dict row)."""

    def __getitem__(self, column: str, /) -> Any: ...


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
