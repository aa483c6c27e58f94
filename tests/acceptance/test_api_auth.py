"""Per-namespace bearer tokens over HTTP, so one tenant can never touch or discover another.

401 without a valid token, 404 across namespaces (never 403: names do not leak), 403 for writes
with a read-only token, and revocation that takes effect at once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest

from duetime import AsyncApp
from duetime.model import Node, Subscription

from .test_api_serve import Server, Tokens, secured_server


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Tokens]]:
    yield from secured_server(tmp_path_factory)


def test_auth_is_on_by_default_once_tokens_exist(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    with server.client() as anonymous:
        assert anonymous.get("/v1/info").json()["auth"] is True
        assert anonymous.get("/healthz").status_code == 200
    with server.client(tokens.alpha) as alpha:
        assert alpha.get("/v1/namespaces").json()["items"] == ["alpha"]
    with server.client(tokens.admin) as admin:
        assert admin.get("/v1/namespaces").json()["items"] == ["alpha", "beta"]


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer dt_" + "x" * 43},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": "Basic YWxhZGRpbjpvcGVuc2VzYW1l"},
        {"Authorization": "Bearer"},
    ],
    ids=["missing", "unknown", "malformed", "basic", "empty"],
)
def test_missing_or_bad_tokens_get_401(
    secured: tuple[Server, Tokens], headers: dict[str, str]
) -> None:
    server, _ = secured
    with httpx.Client(base_url=server.base_url, headers=headers) as client:
        for method, path in [
            ("GET", "/v1/namespaces/alpha/timers"),
            ("POST", "/v1/namespaces/alpha/timers"),
            ("GET", "/v1/nodes"),
            ("GET", "/metrics"),
        ]:
            answer = client.request(method, path, json={"type": "x", "delay": 1})
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json()["code"] == "unauthorized"
            assert answer.json()["field"] == "authorization"
            assert answer.headers["www-authenticate"] == "Bearer"


def test_a_token_cannot_see_another_namespace(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as alpha, server.client(tokens.beta) as beta:
        made = alpha.post("/v1/namespaces/alpha/timers", json={"type": "x", "key": "secret"})
        assert made.status_code == 422  # no "when": validated, nothing stored
        body = {"type": "x", "key": "secret", "delay": "P1D"}
        assert alpha.post("/v1/namespaces/alpha/timers", json=body).status_code == 201
        assert alpha.get("/v1/namespaces/alpha/timers/secret").status_code == 200
        for method, path in [
            ("GET", "/v1/namespaces/alpha/timers"),
            ("GET", "/v1/namespaces/alpha/timers/secret"),
            ("DELETE", "/v1/namespaces/alpha/timers/secret"),
            ("POST", "/v1/namespaces/alpha/timers/secret/purge"),
            ("POST", "/v1/namespaces/alpha/timers"),
            ("POST", "/v1/namespaces/alpha/events"),
            ("GET", "/v1/namespaces/alpha/dead"),
            ("POST", "/v1/namespaces/alpha/dead/secret/replay"),
            ("GET", "/v1/namespaces/alpha/stats"),
        ]:
            across = beta.request(method, path, json=body)
            assert across.status_code == 404, (method, path, across.text)
            # Exactly what a namespace that does not exist answers: the name does not leak.
            missing = beta.request(method, path.replace("alpha", "nosuch"), json=body)
            assert across.json() == {
                "code": "unknown_namespace",
                "message": "unknown namespace 'alpha': create it first (duetime namespaces create)",
                "field": "namespace",
            }
            assert missing.json() == {
                **across.json(),
                "message": across.json()["message"].replace("alpha", "nosuch"),
            }
        assert alpha.get("/v1/namespaces/alpha/timers/secret").json()["timer"]["status"] == (
            "scheduled"
        )
        assert beta.get("/metrics").status_code == 403


def test_a_read_only_token_reads_but_gets_403_on_writes(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    with server.client(tokens.alpha) as alpha, server.client(tokens.alpha_ro) as reader:
        body = {"type": "x", "key": "ro-1", "delay": "P1D"}
        assert alpha.post("/v1/namespaces/alpha/timers", json=body).status_code == 201
        assert reader.get("/v1/namespaces/alpha/timers/ro-1").status_code == 200
        assert reader.get("/v1/namespaces/alpha/stats").status_code == 200
        for method, path in [
            ("POST", "/v1/namespaces/alpha/timers"),
            ("POST", "/v1/namespaces/alpha/events"),
            ("DELETE", "/v1/namespaces/alpha/timers/ro-1"),
            ("POST", "/v1/namespaces/alpha/timers/ro-1/purge"),
            ("POST", "/v1/namespaces/alpha/dead/ro-1/replay"),
        ]:
            refused = reader.request(method, path, json=body)
            assert refused.status_code == 403, (method, path, refused.text)
            assert refused.json()["code"] == "forbidden"
            assert refused.json()["field"] == "namespace"
        assert alpha.get("/v1/namespaces/alpha/timers/ro-1").json()["timer"]["status"] == (
            "scheduled"
        )
        beta = reader.get("/v1/namespaces/beta/timers")
        assert beta.status_code == 404  # not 403: other namespaces stay invisible


def test_with_auth_on_namespaces_come_only_from_tokens(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    with server.client(tokens.admin) as admin:
        answer = admin.post("/v1/namespaces/newcomer/timers", json={"type": "x", "delay": 1})
        assert answer.status_code == 404
        assert answer.json()["field"] == "namespace"
        assert "newcomer" not in admin.get("/v1/namespaces").json()["items"]
        assert admin.get("/metrics").status_code == 200
        assert admin.post("/v1/namespaces/beta/timers", json={"type": "x", "delay": 1}).is_success


def test_a_revoked_token_is_refused_at_once(secured: tuple[Server, Tokens]) -> None:
    server, _ = secured
    token = server.create_token("beta")
    with server.client(token) as client:
        assert client.get("/v1/namespaces/beta/timers").status_code == 200
        listed = server.cli("tokens", "ls", "--json")
        assert listed.returncode == 0, listed.stderr
        listing = json.loads(listed.stdout)["items"]
        token_id = max(t["id"] for t in listing)
        assert next(t for t in listing if t["id"] == token_id)["last_used_at"] is not None
        revoked = server.cli("tokens", "revoke", str(token_id), "--json")
        assert revoked.returncode == 0, revoked.stderr
        assert client.get("/v1/namespaces/beta/timers").status_code == 401
        again = server.cli("tokens", "revoke", str(token_id), "--json")
        assert again.returncode == 4


def test_tokens_are_stored_only_as_hashes(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    database = (server.cwd / "duetime.db").read_bytes()
    for token in (tokens.alpha, tokens.beta, tokens.admin):
        assert token.startswith("dt_")
        assert token.encode() not in database


def test_a_scoped_token_sees_only_its_namespaces_nodes(secured: tuple[Server, Tokens]) -> None:
    server, tokens = secured
    now = datetime.now(UTC)
    both = (Subscription("alpha", "order.*", ("handler",)), Subscription("beta", "pay.*", ("q",)))
    nodes = [
        Node("n-both", "host-ab", 11, now, now, subscriptions=both),
        Node("n-beta", "host-b", 12, now, now, subscriptions=both[1:]),
    ]

    async def register() -> None:
        async with AsyncApp(server.env["DUETIME_DATABASE_URL"], "alpha") as app:
            for node in nodes:
                await app.store.register_node(node)

    asyncio.run(register())
    with server.client(tokens.alpha) as alpha, server.client(tokens.admin) as admin:
        seen = alpha.get("/v1/nodes").json()["items"]
        assert [node["id"] for node in seen] == ["n-both"]
        assert seen[0]["subscriptions"] == [
            {"namespace": "alpha", "type": "order.*", "to": ["handler"]}
        ]
        everything = {node["id"] for node in admin.get("/v1/nodes").json()["items"]}
        assert {"n-both", "n-beta"} <= everything
        assert any(node["role"] == "api" for node in admin.get("/v1/nodes").json()["items"])


def test_a_token_may_create_only_the_namespaces_it_can_write(
    secured: tuple[Server, Tokens],
) -> None:
    server, tokens = secured
    with server.client(tokens.beta) as beta, server.client(tokens.alpha_ro) as reader:
        refused = beta.post("/v1/namespaces", json={"name": "gamma"})
        assert (refused.status_code, refused.json()["field"]) == (403, "name")
        assert reader.post("/v1/namespaces", json={"name": "alpha"}).status_code == 403
        assert beta.post("/v1/namespaces", json={"name": "beta"}).status_code in (200, 201)


def test_me_says_which_token_asks_its_scopes_and_namespaces(
    secured: tuple[Server, Tokens],
) -> None:
    server, tokens = secured
    with server.client(tokens.alpha_ro) as reader, server.client(tokens.admin) as admin:
        seen = reader.get("/v1/me")
        assert seen.status_code == 200
        me = seen.json()
        assert me["auth"] is True
        assert me["scopes"] == ["read"]
        assert me["namespaces"] == ["alpha"]
        assert me["writable"] == []
        assert isinstance(me["token_id"], int)
        every = admin.get("/v1/me").json()
        assert every["scopes"] == ["read", "write", "metrics"]
        assert every["namespaces"] == every["writable"] == ["*"]
    with server.client(tokens.alpha) as writer:
        assert writer.get("/v1/me").json()["writable"] == ["alpha"]
    with server.client() as anonymous:
        assert anonymous.get("/v1/me").status_code == 401
