"""Deleting finished timers and the audit log over HTTP, against a real ``duetime serve`` with
tokens, on SQLite and on PostgreSQL; each effect is read back from the database itself."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from duetime import App, Dead, Event
from duetime.errors import NotFound
from duetime.model.audit import Actor
from duetime.store import create_store

from .test_api_serve import Server, SharedServers, fresh_namespace

pytestmark = pytest.mark.slow  # a real `duetime serve` and its worker


class Shop:
    """A test's tenants on its store's shared server: ``shop`` (seeded) and ``beta`` (empty),
    namespaces no other test uses, with a token for each (``on-call`` for shop, ``beta``), each
    named after its namespace too (a database's token names are unique)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.url = server.env["DUETIME_DATABASE_URL"]
        self.shop, self.beta = fresh_namespace("shop"), fresh_namespace("beta")
        self.ns = f"/v1/namespaces/{self.shop}"
        seed(self.url, self.shop, self.beta)
        self.token_names = {"on-call": f"on-call-{self.shop}", "beta": f"beta-{self.beta}"}
        made = {
            name: token_for(server, namespace, self.token_names[name])
            for name, namespace in (("on-call", self.shop), ("beta", self.beta))
        }
        self.tokens = {name: token["token"] for name, token in made.items()}
        self.token_ids = {name: token["id"] for name, token in made.items()}

    def stored(self, key: str) -> str | None:
        """The timer's status as the database has it (None: no such timer), and its attempts
        gone with it."""
        with App(database_url=self.url, namespace=self.shop) as app:
            try:
                return app.get(key).status.value
            except NotFound:
                return None


def seed(url: str, shop: str, beta: str) -> None:
    """4 dead ``order.paid``, 2 done ``order.seen``, 2 pending ``mail.sent`` in namespace
    ``shop``; namespace ``beta``, empty."""
    with App(database_url=url, namespace=shop) as app:

        @app.handler("order.paid")
        def refuse(event: Event) -> None:
            raise Dead(f"ledger refused order {event.payload['n']}")

        @app.handler("order.seen")
        def see(event: Event) -> None:
            return None

        for n in range(4):
            app.schedule("order.paid", {"n": n}, delay=0, key=f"paid-{n}")
        for n in range(2):
            app.schedule("order.seen", {"n": n}, delay=0, key=f"seen-{n}")
        app.tick()
        for n in range(2):
            app.schedule("mail.sent", {"n": n}, delay="P2D", key=f"mail-{n}")
    with App(database_url=url, namespace=beta):
        pass


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    """A server without workers a store; each test has tenants of its own (:class:`Shop`).
    A token exists before it starts, so auth is on from its first request (a token made while
    it serves turns auth on only once the server has read it)."""
    shared = SharedServers(
        tmp_path_factory, "--no-worker", before_start=lambda server: server.issue_token("ops")
    )
    yield shared
    shared.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def served(request: pytest.FixtureRequest, servers: SharedServers) -> Shop:
    return Shop(servers(request.param))


def token_for(server: Server, namespace: str, name: str) -> dict[str, Any]:
    """``duetime tokens create``, run in this process (Click's runner, the command's own entry
    point): the audit log then says the command made it, by ``local`` via ``cli``."""
    args = ("tokens", "create", "--namespace", namespace, "--name", name)
    made: dict[str, Any] = server.shell().ok(*args)
    return made


def audit(client: httpx.Client, namespace: str, **params: Any) -> list[dict[str, Any]]:
    """Every entry of the namespace's audit log, walking its pages."""
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        answer = client.get(
            f"/v1/namespaces/{namespace}/audit",
            params={**params, **({"cursor": cursor} if cursor else {})},
        )
        assert answer.status_code == 200, answer.text
        found += answer.json()["items"]
        cursor = answer.json()["next_cursor"]
        if cursor is None:
            return found


def test_delete_takes_finished_timers_and_the_audit_log_says_who(
    served: Shop,
) -> None:
    server, tokens, stored, ns = served.server, served.tokens, served.stored, served.ns
    with server.client(tokens["on-call"]) as client:
        gone = client.post(f"{ns}/timers/paid-0/purge")
        assert gone.status_code == 200, gone.text
        assert (gone.json()["action"], gone.json()["timer"]["status"]) == ("deleted", "dead")
        assert client.get(f"{ns}/timers/paid-0").status_code == 404
        assert stored("paid-0") is None

        cancelled = client.delete(f"{ns}/timers/mail-0")  # pending: cancelled
        assert cancelled.json()["action"] == "cancelled"
        assert stored("mail-0") == "cancelled"
        again = client.delete(f"{ns}/timers/mail-0")  # a retried cancel: the same answer
        assert (again.status_code, again.json()["action"]) == (200, "cancelled")
        assert stored("mail-0") == "cancelled"
        assert client.post(f"{ns}/timers/mail-0/purge").json()["action"] == "deleted"
        assert stored("mail-0") is None
        assert client.post(f"{ns}/timers/mail-0/purge").status_code == 404

        filter_ = {"status": "dead", "type": "order.*"}
        dry = client.post(
            f"{ns}/timers/bulk", json={"action": "delete", "filter": filter_, "dry_run": True}
        )
        assert dry.json() == {"action": "delete", "dry_run": True, "count": 3}
        assert [stored(f"paid-{n}") for n in (1, 2, 3)] == ["dead"] * 3
        done = client.post(f"{ns}/timers/bulk", json={"action": "delete", "filter": filter_})
        assert done.json() == {"action": "delete", "dry_run": False, "count": 3}
        assert [stored(f"paid-{n}") for n in (1, 2, 3)] == [None] * 3

        chosen = {"action": "delete", "keys": ["seen-0", "mail-1", "no-such-key"]}
        assert (
            client.post(f"{ns}/timers/bulk", json={**chosen, "dry_run": True}).json()["count"] == 1
        )
        assert client.post(f"{ns}/timers/bulk", json=chosen).json()["count"] == 1
        assert (stored("seen-0"), stored("mail-1")) == (None, "scheduled")
        for bad in ([], "seen-1", [""], ["a"] * 1001):
            refused = client.post(f"{ns}/timers/bulk", json={"action": "delete", "keys": bad})
            assert refused.status_code == 422, bad
            assert refused.json()["field"].startswith("keys"), refused.json()

        entries = audit(client, served.shop, limit=2)
        assert [(e["action"], e["target"], e["count"]) for e in entries] == [
            ("bulk_delete", {"keys": ["seen-0", "mail-1", "no-such-key"]}, 1),
            ("bulk_delete", {"filter": filter_}, 3),
            ("delete", {"key": "mail-0"}, 1),
            ("cancel", {"key": "mail-0"}, 1),
            ("delete", {"key": "paid-0"}, 1),
            (
                "token_create",
                {
                    "token": served.token_ids["on-call"],
                    "name": served.token_names["on-call"],
                    "namespaces": [served.shop],
                    "read_only": False,
                },
                1,
            ),
        ]
        assert {(e["actor"], e["via"]) for e in entries[:-1]} == {
            (f"token:{served.token_names['on-call']}", "api")
        }
        assert (entries[-1]["actor"], entries[-1]["via"]) == (Actor.cli().name, "cli")
        assert entries[0]["at"] >= entries[-1]["at"]
        assert client.get(f"{ns}/audit", params={"cursor": "id.3"}).status_code == 422

    with server.client(tokens["beta"]) as beta:  # a tenant sees its own log, never another's
        assert beta.get(f"{ns}/audit").status_code == 404
        assert [e["action"] for e in audit(beta, served.beta)] == ["token_create"]


def test_a_running_timer_is_not_deleted_and_the_error_says_why(
    served: Shop,
) -> None:
    server, tokens, stored, ns = served.server, served.tokens, served.stored, served.ns
    url = served.url
    with App(database_url=url, namespace=served.shop) as app:
        app.schedule("slow.job", key="busy", delay=0)
    asyncio.run(claim(url, served.shop, "busy"))  # a worker holds it: running
    with server.client(tokens["on-call"]) as client:
        refused = client.post(f"{ns}/timers/busy/purge")
        assert refused.status_code == 409
        assert refused.json()["field"] == "key"
        assert "is running" in refused.json()["message"]
        assert "let it finish" in refused.json()["message"]
        not_cancelled = client.delete(f"{ns}/timers/busy")
        assert not_cancelled.status_code == 409
        assert "is running" in not_cancelled.json()["message"]
        assert stored("busy") == "running"
        # nothing done: nothing written
        assert audit(client, served.shop)[0]["action"] == "token_create"


async def claim(url: str, namespace: str, key: str) -> None:
    store = create_store(url)
    await store.open()
    try:
        now = datetime.now(UTC)
        (claimed,) = await store.claim_due(
            namespace, None, now, 1, "elsewhere", now + timedelta(minutes=5)
        )
        assert claimed.timer.key == key
    finally:
        await store.close()


def test_a_cancel_sent_again_never_erases_a_timer_or_its_history(served: Shop) -> None:
    """What an HTTP client does when a DELETE's answer is lost: it sends it again. The timer it
    cancelled stays cancelled, and a timer that finished otherwise is a 409, never deleted;
    only ``POST …/purge`` deletes."""
    server, tokens, stored, ns = served.server, served.tokens, served.stored, served.ns
    with server.client(tokens["on-call"]) as client:
        answers = [client.delete(f"{ns}/timers/mail-1") for _ in range(3)]
        assert [(a.status_code, a.json()["action"]) for a in answers] == [(200, "cancelled")] * 3
        assert {a.json()["timer"]["status"] for a in answers} == {"cancelled"}
        assert stored("mail-1") == "cancelled"

        for key, status in (("paid-1", "dead"), ("seen-1", "done")):
            for _ in range(2):
                refused = client.delete(f"{ns}/timers/{key}")
                assert refused.status_code == 409, refused.text
                assert (refused.json()["code"], refused.json()["field"]) == ("conflict", "key")
                assert f"is {status}" in refused.json()["message"]
            assert stored(key) == status
            shown = client.get(f"{ns}/timers/{key}").json()
            assert [a["number"] for a in shown["attempts"]] == [1]  # its history kept

        pending = client.post(f"{ns}/timers/mail-0/purge")  # a pending timer: cancel it first
        assert pending.status_code == 409
        assert "cancel it first" in pending.json()["message"]
        assert stored("mail-0") == "scheduled"

        # one cancel, written once: a repeat changed nothing and is not an operator's action
        assert [(e["action"], e["target"]) for e in audit(client, served.shop)[:-1]] == [
            ("cancel", {"key": "mail-1"})
        ]
