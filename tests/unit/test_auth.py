"""Tokens: generated with enough entropy, stored only hashed, scoped, revocable at once."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from duetime.errors import Conflict, InvalidInput, NotFound
from duetime.store import create_store
from duetime.tenancy.auth import (
    ALL_NAMESPACES,
    TokenInfo,
    Unauthorized,
    authenticate,
    bearer_token,
    check_token_name,
    check_token_namespaces,
    generate_token,
    hash_token,
    issue_token,
    looks_like_token,
)

NOW = datetime(2031, 1, 1, tzinfo=UTC)


def test_tokens_are_prefixed_random_and_well_formed() -> None:
    tokens = {generate_token() for _ in range(200)}
    assert len(tokens) == 200
    for token in tokens:
        assert token.startswith("dt_")
        assert len(token) == 3 + 43  # 32 bytes, URL-safe base64 without padding
        assert looks_like_token(token)
    assert not looks_like_token("dt_short")
    assert not looks_like_token("xx_" + "a" * 43)


def test_the_hash_is_sha256_hex_of_the_token() -> None:
    token = generate_token()
    assert hash_token(token) == hashlib.sha256(token.encode()).hexdigest()
    assert hash_token(token) != hash_token(generate_token())


def test_scopes_are_validated_deduplicated_and_sorted() -> None:
    assert check_token_namespaces(["b", "a", "b"]) == ("a", "b")
    assert check_token_namespaces(["*"]) == (ALL_NAMESPACES,)
    with pytest.raises(InvalidInput) as empty:
        check_token_namespaces([])
    assert empty.value.field == "namespace"
    with pytest.raises(InvalidInput):
        check_token_namespaces(["Not Valid"])
    with pytest.raises(InvalidInput):
        check_token_namespaces(["*", "a"])


def test_token_names_are_short_printable_labels() -> None:
    assert check_token_name(None) is None
    assert check_token_name("ci deploys") == "ci deploys"
    for bad in ("", "   ", "x" * 101, "tab\there"):
        with pytest.raises(InvalidInput):
            check_token_name(bad)


def test_read_only_and_namespace_scopes() -> None:
    info = TokenInfo(1, None, ("a", "b"), read_only=True, created_at=NOW)
    assert info.can_read("a")
    assert info.can_read("b")
    assert not info.can_read("c")
    assert not info.can_write("a")
    admin = TokenInfo(2, None, (ALL_NAMESPACES,), read_only=False, created_at=NOW)
    assert admin.all_namespaces
    assert admin.can_write("anything")
    revoked = TokenInfo(3, None, ("a",), read_only=False, created_at=NOW, revoked_at=NOW)
    assert not revoked.can_read("a")
    assert info.to_dict()["namespaces"] == ["a", "b"]


@pytest.mark.parametrize(
    ("header", "token"),
    [("Bearer dt_abc", "dt_abc"), ("bearer   dt_abc ", "dt_abc"), ("BEARER dt_abc", "dt_abc")],
)
def test_bearer_header_parsing(header: str, token: str) -> None:
    assert bearer_token(header) == token


@pytest.mark.parametrize("header", [None, "", "Bearer", "Bearer   ", "Basic dt_abc", "dt_abc"])
def test_missing_or_malformed_headers_are_unauthorized(header: str | None) -> None:
    with pytest.raises(Unauthorized) as refused:
        bearer_token(header)
    assert refused.value.code == "unauthorized"
    assert refused.value.field == "authorization"


def test_sqlite_token_store_round_trip(db_url: str) -> None:
    async def main() -> None:
        store = create_store(db_url)
        await store.open()
        try:
            tokens = store.tokens
            assert not await tokens.has_issued_tokens()
            issued = await issue_token(
                tokens, ["shop", "billing"], read_only=True, name="reports", now=NOW
            )
            assert issued.info.namespaces == ("billing", "shop")
            assert issued.info.read_only
            assert issued.info.name == "reports"
            assert await tokens.has_issued_tokens()

            found = await authenticate(tokens, issued.secret)
            assert found.id == issued.info.id
            for wrong in (generate_token(), "dt_nope", issued.secret + "x"):
                with pytest.raises(Unauthorized):
                    await authenticate(tokens, wrong)

            await tokens.touch_token(found.id, NOW)
            (listed,) = await tokens.list_tokens()
            assert listed.last_used_at == NOW

            revoked = await tokens.revoke_token(found.id, NOW)
            assert revoked.revoked_at == NOW
            with pytest.raises(Unauthorized):
                await authenticate(tokens, issued.secret)
            with pytest.raises(Conflict):
                await tokens.revoke_token(found.id, NOW)
            with pytest.raises(NotFound):
                await tokens.revoke_token(999, NOW)
            assert await tokens.list_tokens() == []
            assert len(await tokens.list_tokens(include_revoked=True)) == 1
            assert await tokens.has_issued_tokens()  # protected once, protected still
        finally:
            await store.close()
        path = Path(db_url[len("sqlite:///") :])
        stored = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert hash_token(issued.secret).encode() in stored
        assert issued.secret.encode() not in stored

    asyncio.run(main())
