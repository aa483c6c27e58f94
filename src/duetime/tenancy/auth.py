"""Bearer tokens for the REST API, so one tenant can never read or change another's timers.

A token is ``dt_`` + 32 random bytes (URL-safe base64), shown once when it is created and stored
only as its SHA-256 hash, so a copy of the database does not hand out access. Each token is
scoped to one or more namespaces (or ``*`` for all of them) and is read-only or read-write.
This module is pure logic: the hashes live in the store's ``tokens`` part
(:class:`~duetime.store.parts.TokenStore`), the record in :mod:`duetime.model.tokens`.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from duetime.errors import DuetimeError, InvalidInput
from duetime.model.tokens import ALL_NAMESPACES as ALL_NAMESPACES
from duetime.model.tokens import TokenInfo as TokenInfo
from duetime.store.parts import TokenStore as TokenStore
from duetime.validation import check_identifier_text, check_namespace

TOKEN_PREFIX = "dt_"
TOKEN_BYTES = 32
MAX_TOKEN_NAME = 100
_TOKEN = re.compile(r"dt_[A-Za-z0-9_-]{43}")


class Unauthorized(DuetimeError):
    """No token, a malformed one, or one that is unknown or revoked."""

    code = "unauthorized"


class Forbidden(DuetimeError):
    """The token may read this namespace but not change it."""

    code = "forbidden"


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """A token just created: ``secret`` is shown to the caller once and never stored."""

    secret: str
    info: TokenInfo


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


RESERVED_TOKEN_NAMES = frozenset({"local", "anonymous", "api", "cli", "python", "token"})
"""Names of other actors, or of kinds of actor: a token so named would read like one of them."""


def check_token_name(name: str | None) -> str | None:
    """A label for ``tokens ls`` and the audit log's ``token:<name>``: an identifier, as every
    name is (no control characters), with no ``:`` (which separates an actor's kind from its
    name), not starting with ``#`` (an unnamed token is ``token:#<id>``) and none of
    :data:`RESERVED_TOKEN_NAMES`."""
    if name is None:
        return None
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_TOKEN_NAME:
        raise InvalidInput("name", f"must be 1-{MAX_TOKEN_NAME} printable characters")
    name = check_identifier_text(name, "name")
    if ":" in name or name.startswith("#") or name.strip().lower() in RESERVED_TOKEN_NAMES:
        reserved = ", ".join(sorted(RESERVED_TOKEN_NAMES))
        raise InvalidInput(
            "name",
            f"{name!r} would read like another actor in the audit log: a token's name holds no "
            f"':', does not start with '#' and is none of {reserved}",
        )
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
    cap: int | None = None,
) -> IssuedToken:
    """Create and store a token; the returned secret is the only copy there will ever be.
    ``cap``: refused (CapReached) when that many tokens are active already."""
    scope = check_token_namespaces(namespaces)
    name = check_token_name(name)
    secret = generate_token()
    info = await tokens.add_token(name, hash_token(secret), scope, read_only, now, cap)
    return IssuedToken(secret, info)
