"""``duetime delete`` and ``duetime audit`` as a user runs them, on SQLite and PostgreSQL; each
effect is read back from the database itself."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App, Dead, Event
from duetime.errors import NotFound
from duetime.model.audit import Actor

from .conftest import Cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url


@pytest.fixture(params=["sqlite", "postgres"])
def shop(request: pytest.FixtureRequest, cli: Cli) -> Iterator[Cli]:
    """The CLI on a database with 3 dead ``order.paid``, one ``order.seen`` done and one
    ``mail.sent`` pending, in the default namespace."""
    with contextlib.ExitStack() as schemas:
        if request.param == "postgres":
            cli.db_url = schemas.enter_context(pooled_pg_url())
            cli.env["DUETIME_DATABASE_URL"] = cli.db_url
        with App(database_url=cli.db_url) as app:

            @app.handler("order.paid")
            def refuse(event: Event) -> None:
                raise Dead("ledger refused it")

            @app.handler("order.seen")
            def see(event: Event) -> None:
                return None

            for n in range(3):
                app.schedule("order.paid", {"n": n}, delay=0, key=f"paid-{n}")
            app.schedule("order.seen", delay=0, key="seen")
            app.tick()
            app.schedule("mail.sent", delay="P2D", key="mail")
        yield cli


def status(cli: Cli, key: str) -> str | None:
    with App(database_url=cli.db_url) as app:
        try:
            return app.get(key).status.value
        except NotFound:
            return None


def test_delete_one_a_selection_or_a_filter_after_counting(shop: Cli) -> None:
    cli = shop
    deleted = cli.ok("delete", "seen")
    assert (deleted["action"], deleted["timer"]["status"]) == ("deleted", "done")
    assert status(cli, "seen") is None
    refused = cli.fails("delete", "mail", code=4)
    assert refused["field"] == "key"
    assert "is scheduled" in refused["message"]
    assert "cancel it first" in refused["message"]
    assert cli.fails("delete", "nope", code=3)["field"] == "key"
    assert status(cli, "mail") == "scheduled"

    assert cli.ok("delete", "paid-0", "mail", "--dry-run") == {
        "action": "delete",
        "dry_run": True,
        "count": 1,
    }
    assert cli.ok("delete", "paid-0", "mail")["count"] == 1
    assert (status(cli, "paid-0"), status(cli, "mail")) == (None, "scheduled")

    counted = cli.ok("delete", "--all", "--status", "dead", "--dry-run")
    assert counted == {"action": "delete", "dry_run": True, "count": 2}
    unattended = cli("delete", "--all", "--status", "dead")  # stdin is no terminal
    assert unattended.code == 2
    assert "2 timers would be deleted (status=dead): pass --yes" in unattended.stderr
    assert [status(cli, f"paid-{n}") for n in (1, 2)] == ["dead", "dead"]
    done = cli("delete", "--all", "--status", "dead", "--yes")
    assert done.code == 0, done.stderr
    assert "deleted 2 finished timers" in done.stdout
    assert [status(cli, f"paid-{n}") for n in (1, 2)] == [None, None]
    assert cli("delete").code == 2
    assert cli("delete", "mail", "--all").code == 2

    log = cli.ok("audit")
    assert [(e["action"], e["target"], e["count"]) for e in log["items"]] == [
        ("bulk_delete", {"filter": {"status": "dead"}}, 2),
        ("bulk_delete", {"keys": ["paid-0", "mail"]}, 1),
        ("delete", {"key": "seen"}, 1),
    ]
    assert {(e["actor"], e["via"]) for e in log["items"]} == {(Actor.cli().name, "cli")}
    assert Actor.cli().name.startswith("cli:")
    assert log["next_cursor"] is None
    first = cli.ok("audit", "--limit", "1")
    assert [e["action"] for e in first["items"]] == ["bulk_delete"]
    rest = cli.ok("audit", "--limit", "5", "--cursor", first["next_cursor"])
    assert [e["target"] for e in rest["items"]] == [{"keys": ["paid-0", "mail"]}, {"key": "seen"}]

    table = cli("audit")
    assert table.code == 0
    assert "bulk_delete" in table.stdout
    assert "status=dead" in table.stdout
    assert "cli:" in table.stdout


def test_operator_commands_are_audited(shop: Cli) -> None:
    cli = shop
    cli.ok("cancel", "mail")
    cli.ok("dead", "replay", "paid-0")
    cli.ok("dead", "replay", "--all", "--type", "order.*")
    cli.ok("pause", "report.*")
    cli.ok("limits", "set", "email.*", "--concurrency", "3")
    log = cli.ok("audit")["items"]
    assert [(e["action"], e["target"], e["count"]) for e in log] == [
        ("limit_set", {"pattern": "email.*", "limit": {"concurrency": 3}}, 1),
        ("pause", {"pattern": "report.*"}, 1),
        ("bulk_replay", {"filter": {"status": "dead", "type": "order.*"}}, 2),
        ("replay", {"key": "paid-0"}, 1),
        ("cancel", {"key": "mail"}, 1),
    ]
