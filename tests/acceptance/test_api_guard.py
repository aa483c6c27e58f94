"""The API against the browser: CSRF, DNS rebinding, framing, and auth that follows the tokens.

A ``duetime serve`` with auth off listens on loopback, where any page the user visits can reach
it. Real requests with the headers a browser (or an attacker's rebinding page) would send.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .test_api_serve import Server, make_server, wait_for

BODY = {"type": "x", "delay": "P1D"}
TIMERS = "/v1/namespaces/default/timers"


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Auth off (no token), bound to 127.0.0.1, answering one extra host name too."""
    server = make_server(tmp_path_factory.mktemp("guard"))
    server.start("--no-worker", "--allowed-host", "timers.internal")
    yield server
    assert server.stop() == 0, server.log()


def keys(client: httpx.Client) -> list[str]:
    return [t["key"] for t in client.get(TIMERS, params={"limit": 1000}).json()["items"]]


@pytest.mark.parametrize(
    ("content_type", "content"),
    [
        ("text/plain", b'{"type": "x", "delay": "P1D", "key": "csrf"}'),
        ("application/x-www-form-urlencoded", b"type=x&delay=P1D&key=csrf"),
        ("multipart/form-data; boundary=b", b"--b\r\n\r\n--b--"),
        (None, b'{"type": "x", "delay": "P1D", "key": "csrf"}'),
    ],
)
def test_a_body_must_be_json(open_server: Server, content_type: str | None, content: bytes) -> None:
    headers = {} if content_type is None else {"Content-Type": content_type}
    with open_server.client() as client:
        answer = client.post(TIMERS, content=content, headers=headers)
        assert answer.status_code == 415
        assert (answer.json()["code"], answer.json()["field"]) == ("unsupported_media_type", "body")
        assert "csrf" not in keys(client)
        with_charset = {"Content-Type": "application/json; charset=utf-8"}
        assert client.post(TIMERS, content=b'{"type": "x", "delay": 1}', headers=with_charset)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8080", "10.0.0.7", "[fe80::1]"])
def test_a_foreign_host_header_is_refused(open_server: Server, host: str) -> None:
    with open_server.client() as client:
        for method, path in [("GET", TIMERS), ("POST", TIMERS), ("GET", "/")]:
            answer = client.request(method, path, json=BODY, headers={"Host": host})
            assert answer.status_code == 400, (method, path)
            assert answer.json()["code"] == "host_not_allowed"


@pytest.mark.parametrize(
    "host", ["localhost", "127.0.0.1", "[::1]", "timers.internal", "LOCALHOST:8080"]
)
def test_loopback_names_the_bound_address_and_configured_hosts_are_answered(
    open_server: Server, host: str
) -> None:
    with open_server.client() as client:
        assert client.get(TIMERS, headers={"Host": host}).status_code == 200


def test_a_cross_site_origin_cannot_change_anything(open_server: Server) -> None:
    own = f"http://127.0.0.1:{open_server.port}"
    with open_server.client() as client:
        for origin in ("https://evil.example", "null", "http://127.0.0.1.evil.example"):
            body = {**BODY, "key": "cross"}
            answer = client.post(TIMERS, json=body, headers={"Origin": origin})
            assert (answer.status_code, answer.json()["code"]) == (403, "origin_not_allowed")
        assert "cross" not in keys(client)
        assert client.get(TIMERS, headers={"Origin": "https://evil.example"}).status_code == 200
        made = client.post(TIMERS, json={**BODY, "key": "same"}, headers={"Origin": own})
        assert made.status_code == 201


def test_every_answer_refuses_sniffing_and_framing_and_the_dashboard_has_a_csp(
    open_server: Server,
) -> None:
    with open_server.client() as client:
        for path in ("/healthz", TIMERS, "/", "/static/app.js", "/v1/namespaces/nope/timers"):
            answer = client.get(path)
            assert answer.headers["x-content-type-options"] == "nosniff", path
            assert answer.headers["x-frame-options"] == "DENY", path
        csp = client.get("/").headers["content-security-policy"]
        assert "default-src 'self'" in csp
        assert "frame-ancestors 'none'" in csp
        assert "'unsafe-inline'" not in csp


@pytest.mark.slow
def test_a_token_created_while_serving_turns_auth_on(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    server.start("--no-worker")
    try:
        with server.client() as anonymous:
            assert anonymous.get("/v1/info").json()["auth"] is False
            assert anonymous.get("/v1/me").json() == {
                "auth": False,
                "token": None,
                "token_id": None,
                "scopes": ["read", "write", "metrics"],
                "namespaces": ["*"],
                "writable": ["*"],
            }
            assert anonymous.get(TIMERS).status_code == 200
            token = server.issue_token("default").secret  # another writer of the database
            wait_for(lambda: anonymous.get(TIMERS).status_code == 401)
            assert anonymous.get("/v1/info").json()["auth"] is True
            refused = anonymous.post(TIMERS, json=BODY)
            assert refused.status_code == 401
            # auth is on: the Host check is the token's job now
            assert anonymous.get(TIMERS, headers={"Host": "evil.example"}).status_code == 401
        with server.client(token) as holder:
            assert holder.post(TIMERS, json=BODY).status_code == 201
    finally:
        assert server.stop() == 0, server.log()


SCHEDULES = "/v1/namespaces/default/schedules"


def _schedule_and_timer(client: httpx.Client, name: str) -> None:
    schedule = {"name": name, "type": "x", "cron": "0 9 * * *", "timezone": "UTC"}
    assert client.post(SCHEDULES, json=schedule).status_code == 201
    assert client.post(TIMERS, json={**BODY, "key": name}).status_code == 201


def _untouched(client: httpx.Client, name: str) -> None:
    assert client.get(f"{SCHEDULES}/{name}").json()["schedule"]["active"] is True
    answer = client.get(f"{TIMERS}/{name}").json()
    timer = answer.get("timer", answer)
    assert timer["run_at"] == timer["due_at"], "the timer was made due now"


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://127.0.0.1:9999"},  # another port of the same host: another site
        {"Origin": "http://localhost:9999"},
        {"Origin": "https://127.0.0.1"},
        {"Sec-Fetch-Site": "same-site"},  # a browser that says so without an Origin
        {"Sec-Fetch-Site": "cross-site"},
        {"Content-Type": "application/x-www-form-urlencoded"},  # an empty form post
        {"Content-Type": "text/plain"},
    ],
    ids=lambda headers: "+".join(f"{k}={v}" for k, v in headers.items()),
)
def test_a_bodiless_request_from_another_origin_changes_nothing(
    open_server: Server, headers: dict[str, str]
) -> None:
    """A page on another local port sent body-less POSTs: no pre-flight, no body type to check."""
    name = "csrf-" + str(abs(hash(tuple(headers.items()))))
    with open_server.client() as client:
        _schedule_and_timer(client, name)
        for path in (f"{SCHEDULES}/{name}/pause", f"{TIMERS}/{name}/run-now"):
            answer = client.post(path, headers=headers)
            assert answer.status_code in (403, 415), (path, answer.text)
        assert client.delete(f"{TIMERS}/{name}", headers=headers).status_code in (403, 415)
        _untouched(client, name)


def test_the_dashboard_and_a_script_without_origin_still_change_things(
    open_server: Server,
) -> None:
    own = {"Origin": f"http://127.0.0.1:{open_server.port}", "Sec-Fetch-Site": "same-origin"}
    with open_server.client() as client:
        _schedule_and_timer(client, "own-page")
        assert client.post(f"{SCHEDULES}/own-page/pause", headers=own).status_code == 200
        by_name = {"Origin": f"http://localhost:{open_server.port}", "Host": "localhost"}
        by_name["Host"] += f":{open_server.port}"
        assert client.post(f"{SCHEDULES}/own-page/resume", headers=by_name).status_code == 200
        _schedule_and_timer(client, "curl")  # curl -X POST: no Origin, no body, no type
        assert client.post(f"{SCHEDULES}/curl/pause").status_code == 200
        assert client.post(f"{TIMERS}/curl/run-now").status_code == 200


@pytest.mark.slow
def test_revoking_the_last_token_keeps_the_api_protected(tmp_path: Path) -> None:
    """Once protected, a database's API stays protected: only --no-auth opens it again."""
    server = make_server(tmp_path)
    server.start("--no-worker")
    try:
        issued = server.issue_token("default")
        token = issued.secret
        with server.client() as anonymous:
            wait_for(lambda: anonymous.get(TIMERS).status_code == 401)
        revoked = server.cli("tokens", "revoke", str(issued.info.id))
        assert revoked.returncode == 0, revoked.stderr
        assert revoked.stdout.strip() == f"revoked token {issued.info.id}; 0 active token(s) left"
        assert "stays protected" in revoked.stderr
        assert "--no-auth" in revoked.stderr
    finally:
        assert server.stop() == 0, server.log()
    server.start("--no-worker")  # decides afresh from the database at start
    try:
        with server.client() as anonymous, server.client(token) as revoked_holder:
            assert anonymous.get("/v1/info").json()["auth"] is True
            assert anonymous.get(TIMERS).status_code == 401
            assert anonymous.post(TIMERS, json=BODY).status_code == 401
            assert revoked_holder.get(TIMERS).status_code == 401
    finally:
        assert server.stop() == 0, server.log()
    server.start("--no-worker", "--no-auth")  # the operator says so explicitly
    try:
        with server.client() as anonymous:
            assert anonymous.get(TIMERS).status_code == 200
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.slow
def test_tokens_revoke_says_how_many_are_left(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    one, two = (server.issue_token("default").info.id for _ in range(2))
    first = server.cli("tokens", "revoke", str(one), "--json")
    assert json.loads(first.stdout)["active_tokens"] == 1
    assert first.stderr == ""
    second = server.cli("tokens", "revoke", str(two))
    assert second.stdout.strip() == f"revoked token {two}; 0 active token(s) left"
    assert "401" in second.stderr
