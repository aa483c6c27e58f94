"""Bearer tokens for the REST API, so one tenant can never read or change another's timers.

A token is ``dt_`` + 32 random bytes (URL-safe base64), shown once when it is created and stored
only as its SHA-256 hash, so a copy of the database does not hand out access. Each token is
scoped to one or more namespaces (or ``*`` for all of them) and is read-only or read-write.
This module is pure logic plus the :class:`TokenStore` protocol each backend implements.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from duetime.errors import DuetimeError, InvalidInput
from duetime.model import JSON, iso
from duetime.validation import check_namespace

if TYPE_CHECKING:
    from duetime.store.protocol import Store

TOKEN_PREFIX = "dt_"
TOKEN_BYTES = 32
ALL_NAMESPACES = "*"
MAX_TOKEN_NAME = 100
_TOKEN = re.compile(r"dt_[A-Za-z0-9_-]{43}")


class Unauthorized(DuetimeError):
    """No token, a malformed one, or one that is unknown or revoked."""

    code = "unauthorized"


class Forbidden(DuetimeError):
    """The token may read this namespace but not change it."""

    code = "forbidden"


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """What is stored about a token: never the token itself, only its hash (kept out of here)."""

    id: int
    name: str | None
    namespaces: tuple[str, ...]
    read_only: bool
    created_at: datetime
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None

    @property
    def all_namespaces(self) -> bool:
        return ALL_NAMESPACES in self.namespaces

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def can_read(self, namespace: str) -> bool:
        """Whether the token may see ``namespace`` at all (otherwise it looks unknown)."""
        return self.active and (self.all_namespaces or namespace in self.namespaces)

    def can_write(self, namespace: str) -> bool:
        return self.can_read(namespace) and not self.read_only

    def to_dict(self) -> dict[str, JSON]:
        return {
            "id": self.id,
            "name": self.name,
            "namespaces": list(self.namespaces),
            "read_only": self.read_only,
            "created_at": iso(self.created_at),
            "revoked_at": iso(self.revoked_at),
            "last_used_at": iso(self.last_used_at),
        }


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: ``secret`` is shown to the caller once and never stored."""

    secret: str
    info: TokenInfo


class TokenStore(Protocol):
    """Durable storage of token hashes; every backend (SQLite, PostgreSQL) implements it."""

    async def add_token(
        self,
        name: str | None,
        token_hash: str,
        namespaces: Sequence[str],
        read_only: bool,
        now: datetime,
    ) -> TokenInfo: ...

    async def find_token(self, token_hash: str) -> TokenInfo | None:
        """The active (not revoked) token with this hash, or None."""
        ...

    async def list_tokens(self, *, include_revoked: bool = False) -> list[TokenInfo]: ...

    async def revoke_token(self, token_id: int, now: datetime) -> TokenInfo:
        """Revoke at once; NotFound for an unknown id, Conflict when already revoked."""
        ...

    async def touch_token(self, token_id: int, now: datetime) -> None:
        """Record that the token was just used (callers throttle this write)."""
        ...

    async def has_active_tokens(self) -> bool: ...


def generate_token() -> str:
    """A fresh secret: ``dt_`` + 32 random bytes, URL-safe base64 without padding."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def hash_token(token: str) -> str:
    """SHA-256 hex: what is stored and looked up, so the database never holds a usable token.

    The token carries 256 random bits, so a fast unsalted hash is enough (no guessable input).
    """
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def looks_like_token(token: str) -> bool:
    return _TOKEN.fullmatch(token) is not None


def check_token_namespaces(namespaces: Iterable[str]) -> tuple[str, ...]:
    """Validate a token's scope: namespace names, or ``*`` alone for every namespace."""
    names: list[str] = []
    for name in namespaces:
        if name != ALL_NAMESPACES:
            check_namespace(name)
        if name not in names:
            names.append(name)
    if not names:
        raise InvalidInput("namespace", "a token needs at least one namespace (or '*' for all)")
    if ALL_NAMESPACES in names and len(names) > 1:
        raise InvalidInput("namespace", "'*' already covers every namespace; give it alone")
    return tuple(sorted(names))


def check_token_name(name: str | None) -> str | None:
    if name is None:
        return None
    if not name.strip() or len(name) > MAX_TOKEN_NAME or any(ord(ch) < 32 for ch in name):
        raise InvalidInput("name", f"must be 1-{MAX_TOKEN_NAME} printable characters")
    return name


def bearer_token(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer dt_…`` header; Unauthorized when there is none."""
    if not authorization:
        raise Unauthorized(
            "a bearer token is required: Authorization: Bearer dt_…", field="authorization"
        )
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized(
            "the Authorization header must be 'Bearer <token>'", field="authorization"
        )
    return token


async def authenticate(tokens: TokenStore, token: str) -> TokenInfo:
    """The active token matching ``token``; Unauthorized (never saying why) otherwise."""
    if not looks_like_token(token):
        raise Unauthorized("the token is not valid", field="authorization")
    info = await tokens.find_token(hash_token(token))
    if info is None or not info.active:
        raise Unauthorized("the token is not valid", field="authorization")
    return info


async def issue_token(
    tokens: TokenStore,
    namespaces: Iterable[str],
    *,
    read_only: bool,
    name: str | None,
    now: datetime,
) -> IssuedToken:
    """Create and store a token; the returned secret is the only copy there will ever be."""
    scope = check_token_namespaces(namespaces)
    name = check_token_name(name)
    secret = generate_token()
    info = await tokens.add_token(name, hash_token(secret), scope, read_only, now)
    return IssuedToken(secret, info)


def token_store_for(store: Store) -> TokenStore:
    """The token store sharing ``store``'s database (InvalidInput for backends without one)."""
    from duetime.store.sqlite.store import SqliteStore

    if isinstance(store, SqliteStore):
        from duetime.store.sqlite.tokens import SqliteTokenStore

        return SqliteTokenStore(store)
    if store.url.startswith(("postgresql://", "postgres://")):
        from duetime.store.postgres.store import PostgresStore
        from duetime.store.postgres.tokens import PostgresTokenStore

        if isinstance(store, PostgresStore):
            return PostgresTokenStore(store)
    raise InvalidInput(
        "database_url", f"API tokens are not supported on {store.url.split(':', 1)[0]} yet"
    )
