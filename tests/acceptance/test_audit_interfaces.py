"""The audit log through the CLI, the Python facade and the REST API: who acted (an actor of one
kind each), what exactly a bulk action took, bounded entries, nothing written for an action
that changed nothing, and token names that would read like another actor refused. On SQLite
and PostgreSQL; each entry is read back from the database itself."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from duetime import App, AsyncApp, Dead, Event
from duetime.api import ApiSettings, create_api
from duetime.config import Settings
from duetime.errors import Conflict, InvalidInput
from duetime.model.audit import Actor
from duetime.support import eventloop

from .conftest import Cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with contextlib.ExitStack() as schemas:
        if request.param == "postgres":
            yield schemas.enter_context(pooled_pg_url())
        else:
            yield f"sqlite:///{tmp_path / 'audit.db'}"


def seed(url: str) -> None:
    """Dead ``dead-1`` … ``dead-3`` (payload ``{"n": i}``), pending ``mail`` and ``edit-me``,
    schedule ``nightly``, in the default namespace."""
    with App(database_url=url) as app:

        @app.handler("doomed")
        def refuse(event: Event) -> None:
            raise Dead("refused")

        for n in (1, 2, 3):
            app.schedule("doomed", {"n": n}, key=f"dead-{n}", delay=0)
        app.tick()
        app.schedule("mail.sent", key="mail", delay="P2D")
        app.schedule("mail.sent", key="edit-me", delay="P2D")
        app.schedules.add("nightly", "night", cron="0 3 * * *")


def logged(url: str, namespace: str = "default") -> list[tuple[str, str, str, Any, int]]:
    """The namespace's entries, newest first: (action, actor, via, target, count)."""
    with App(database_url=url, namespace=namespace) as app:
        return [(e.action, e.actor, e.via, e.target, e.count) for e in app.audit.log().items]


@pytest.fixture
def shop(url: str, cli: Cli) -> Cli:
    cli.db_url = url
    cli.env["DUETIME_DATABASE_URL"] = url
    seed(url)
    return cli


def test_cli_commands_are_written_by_the_user_running_them(shop: Cli) -> None:
    cli, me = shop, Actor.cli().name
    assert me.startswith("cli:")
    assert "@" in me
    lines = [{"type": "filed", "key": f"filed-{n}", "delay": "P1D"} for n in (1, 2)]
    (cli.cwd / "timers.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    cli.ok("schedule", "--from-file", "timers.jsonl")
    cli.ok("schedule", "--from-file", "timers.jsonl", "--on-conflict", "keep")  # all kept
    cli.ok("edit", "edit-me", "--delay", "P3D")
    cli.ok("schedule", "made.here", "--key", "new-1", "--delay", "P1D")
    cli.ok("emit", "said.here", "--key", "ev-1")
    cli.ok("schedules", "add", "weekly", "w", "--cron", "0 9 * * 1")
    cli.ok("schedules", "update", "weekly", "--payload", '{"v": 2}')
    cli.ok("schedules", "run-next", "nightly")
    cli.ok("schedules", "pause", "nightly")
    cli.ok("schedules", "pause", "nightly")  # paused already: nothing changed, nothing written
    cli.ok("schedules", "resume", "nightly")
    cli.ok("schedules", "add", "weekly", "w", "--cron", "0 9 * * 1", "--payload", '{"v": 2}')
    cli.ok("namespaces", "create", "beta")
    entries = logged(cli.db_url)
    run_key = entries[2][3]["key"]
    assert run_key.startswith("schedule:nightly:")
    assert [(action, target, count) for action, _, _, target, count in entries] == [
        ("schedule_resume", {"schedule": "nightly"}, 1),
        ("schedule_pause", {"schedule": "nightly"}, 1),
        ("schedule_run_next", {"schedule": "nightly", "key": run_key}, 1),
        ("schedule_change", {"schedule": "weekly", "fields": ["payload"]}, 1),
        ("schedule_define", {"schedule": "weekly", "outcome": "created"}, 1),
        ("emit", {"key": "ev-1", "outcome": "created"}, 1),
        ("schedule", {"key": "new-1", "outcome": "created"}, 1),
        ("edit", {"key": "edit-me", "fields": ["delay"]}, 1),
        ("schedule_file", {"file": "timers.jsonl", "created": 2, "updated": 0}, 2),
    ]
    assert {(actor, via) for _, actor, via, _, _ in entries} == {(me, "cli")}
    assert logged(cli.db_url, "beta") == [("namespace_create", me, "cli", {"namespace": "beta"}, 1)]


def test_python_calls_name_their_actor_and_plain_calls_are_the_applications(url: str) -> None:
    seed(url)

    async def act() -> None:
        reconciler = Actor("reconciler")
        async with AsyncApp(database_url=url, actor=reconciler) as app:
            await app.timers.edit("edit-me", {"payload": {"v": 2}})
            await app.schedules.run_next_now("nightly")
            await app.schedules.update("nightly", payload={"v": 3})
        async with AsyncApp(database_url=url) as app:  # the application's own work
            await app.timers.edit("mail", {"delay": "P5D"})
            await app.schedule("x", key="plain", delay="P1D")

    eventloop.run(act())
    entries = logged(url)
    assert [(a, actor, via) for a, actor, via, _, _ in entries] == [
        ("schedule_change", "python:reconciler", "python"),
        ("schedule_run_next", "python:reconciler", "python"),
        ("edit", "python:reconciler", "python"),
    ]
    assert Actor("token:ops").name == "python:token:ops"  # a caller cannot pass for a token
    assert Actor("python").name == "python"


def test_reserved_and_duplicate_token_names_are_refused(shop: Cli) -> None:
    cli = shop
    made = cli.ok("tokens", "create", "--namespace", "default", "--name", "ops")
    again = cli.fails("tokens", "create", "--namespace", "default", "--name", "ops", code=4)
    assert again["field"] == "name"
    assert "exists already" in again["message"]
    cli.ok("tokens", "revoke", str(made["id"]))
    reused = cli.fails("tokens", "create", "--namespace", "new-ns", "--name", "ops", code=4)
    assert reused["field"] == "name"
    assert "new-ns" not in cli.ok("namespaces", "ls")["namespaces"]  # refused before any was made
    for name in ("local", "Local", "cli:root@host", "#3", "anonymous", "python"):
        refused = cli.fails("tokens", "create", "--namespace", "default", "--name", name, code=2)
        assert refused["field"] == "name", name
        assert "would read like another actor" in refused["message"]

    async def issue() -> None:
        async with AsyncApp(database_url=cli.db_url) as app:
            with pytest.raises(Conflict) as taken:
                await app.tokens.issue(["default"], name="ops")
            assert taken.value.field == "name"
            with pytest.raises(InvalidInput) as reserved:
                await app.tokens.issue(["default"], name="local")
            assert reserved.value.field == "name"

    eventloop.run(issue())


@pytest.fixture
def api(url: str) -> Iterator[TestClient]:
    seed(url)

    async def issue() -> str:
        async with AsyncApp(database_url=url) as app:
            return (await app.tokens.issue(["default"], name="on-call")).secret

    secret = eventloop.run(issue())
    with TestClient(create_api(ApiSettings(core=Settings(database_url=url)))) as client:
        client.headers["Authorization"] = f"Bearer {secret}"
        yield client


BULK = "/v1/namespaces/default/timers/bulk"


def test_a_bulk_entry_names_its_selection_and_every_filter_field(api: TestClient, url: str) -> None:
    filter_ = {"type": "doomed", "payload": "n=1", "keys": ["dead-1", "dead-2"]}
    body = {"action": "replay", "keys": ["dead-1"], "filter": filter_}
    assert api.post(BULK, json=body).json()["count"] == 1
    (entry,) = logged(url)[:1]
    assert entry == (
        "bulk_replay",
        "token:on-call",
        "api",
        {"keys": ["dead-1"], "filter": filter_},
        1,
    )


def test_a_long_selection_is_written_as_its_count_and_digest(api: TestClient, url: str) -> None:
    keys = ["mail"] + [f"missing-{n:04d}-" + "x" * 200 for n in range(999)]
    assert api.post(BULK, json={"action": "cancel", "keys": keys}).json()["count"] == 1
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    (entry,) = logged(url)[:1]
    assert entry[3] == {"keys": {"count": 1000, "sha256": digest}}
    assert len(json.dumps(entry[3])) < 200


def test_a_bulk_that_changes_nothing_writes_nothing(api: TestClient, url: str) -> None:
    keys = [f"missing-{n:04d}-" + "x" * 200 for n in range(1000)]
    before = logged(url)
    for action in ("cancel", "replay", "run_now", "delete"):
        answer = api.post(BULK, json={"action": action, "keys": keys})
        assert answer.json()["count"] == 0, answer.text
    nothing = {"action": "cancel", "filter": {"type": "no.such.type"}}
    assert api.post(BULK, json=nothing).json()["count"] == 0
    assert logged(url) == before
