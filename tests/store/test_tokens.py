"""Token store conformance: create, find by hash, list, revoke, last_used_at.

Every test runs against each backend (SQLite and PostgreSQL) and must behave identically.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from storekit import NOW, StoreFactory

from duetime.errors import Conflict, NotFound
from duetime.store import Store
from duetime.store.parts import TokenStore
from duetime.tenancy.auth import (
    authenticate,
    generate_token,
    hash_token,
    issue_token,
)


def tokens(store: Store) -> TokenStore:
    return store.tokens


async def test_a_new_store_has_no_tokens(store: Store) -> None:
    assert await tokens(store).has_issued_tokens() is False
    assert await tokens(store).list_tokens(include_revoked=True) == []


async def test_create_and_find_by_hash(store: Store) -> None:
    token_store = tokens(store)
    secret = generate_token()
    info = await token_store.add_token("ci", hash_token(secret), ("alpha", "beta"), False, NOW)
    assert info.id > 0
    assert (info.name, info.namespaces, info.read_only) == ("ci", ("alpha", "beta"), False)
    assert info.created_at == NOW
    assert info.revoked_at is None
    assert info.last_used_at is None
    assert await token_store.find_token(hash_token(secret)) == info
    assert await token_store.find_token(hash_token(generate_token())) is None
    assert await token_store.has_issued_tokens() is True


async def test_issue_stores_only_the_hash_and_authenticates(store: Store) -> None:
    token_store = tokens(store)
    issued = await issue_token(token_store, ["*"], read_only=True, name=None, now=NOW)
    assert issued.info.namespaces == ("*",)
    assert issued.info.read_only
    assert issued.info.all_namespaces
    assert await authenticate(token_store, issued.secret) == issued.info
    listed = await token_store.list_tokens()
    assert [info.id for info in listed] == [issued.info.id]


async def test_list_in_id_order_and_revoked_only_on_request(store: Store) -> None:
    token_store = tokens(store)
    first = await token_store.add_token("a", hash_token(generate_token()), ["a"], False, NOW)
    second = await token_store.add_token("b", hash_token(generate_token()), ["b"], True, NOW)
    third = await token_store.add_token(None, hash_token(generate_token()), ["*"], False, NOW)
    assert [i.id for i in await token_store.list_tokens()] == [first.id, second.id, third.id]
    await token_store.revoke_token(second.id, NOW)
    assert [i.id for i in await token_store.list_tokens()] == [first.id, third.id]
    everything = await token_store.list_tokens(include_revoked=True)
    assert [i.id for i in everything] == [first.id, second.id, third.id]
    assert everything[1].revoked_at == NOW
    assert not everything[1].active


async def test_revoke_at_once_then_conflict_and_unknown_ids(store: Store) -> None:
    token_store = tokens(store)
    secret = generate_token()
    info = await token_store.add_token("x", hash_token(secret), ["alpha"], False, NOW)
    later = NOW + timedelta(minutes=5)
    revoked = await token_store.revoke_token(info.id, later)
    assert revoked.revoked_at == later
    assert not revoked.active
    assert await token_store.find_token(hash_token(secret)) is None
    assert await token_store.has_issued_tokens() is True  # the API stays protected
    with pytest.raises(Conflict) as conflict:
        await token_store.revoke_token(info.id, later)
    assert conflict.value.field == "id"
    for unknown in (info.id + 1000, 0, -1, 2**63, 10**30):
        with pytest.raises(NotFound) as missing:
            await token_store.revoke_token(unknown, later)
        assert missing.value.field == "id"


async def test_touch_records_last_used_at(store: Store) -> None:
    token_store = tokens(store)
    secret = generate_token()
    info = await token_store.add_token("x", hash_token(secret), ["alpha"], False, NOW)
    used = NOW + timedelta(seconds=90, microseconds=123456)
    await token_store.touch_token(info.id, used)
    found = await token_store.find_token(hash_token(secret))
    assert found is not None
    assert found.last_used_at == used
    await token_store.touch_token(info.id + 1000, used)  # unknown: nothing happens
    await token_store.touch_token(2**64, used)


async def test_tokens_are_shared_by_every_store_on_the_database(
    store: Store, make_store: StoreFactory
) -> None:
    secret = generate_token()
    info = await tokens(store).add_token("x", hash_token(secret), ["alpha"], False, NOW)
    other = await make_store()
    assert await tokens(other).find_token(hash_token(secret)) == info
    await tokens(other).revoke_token(info.id, NOW)
    assert await tokens(store).find_token(hash_token(secret)) is None
