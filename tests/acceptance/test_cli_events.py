"""``duetime events`` and ``duetime prune``, the real console script on a real SQLite file."""

from __future__ import annotations

from .conftest import Cli


def fire_two(cli: Cli, app_module: str) -> None:
    """``g1`` (greet: done) and ``d1`` (doomed: dead) fire; ``later`` (the newest) does not."""
    cli.ok("emit", "greet", "--key", "g1", "--subject", "ada")
    cli.ok("emit", "doomed", "--key", "d1")
    assert cli("tick", "--app", app_module).code == 0
    cli.ok("schedule", "greet", "--key", "later", "--delay", "P1D")


def test_events_lists_what_fired_with_its_deliveries(cli: Cli, app_module: str) -> None:
    fire_two(cli, app_module)
    page = cli.ok("events")
    assert [item["key"] for item in page["items"]] == ["d1", "g1"]
    assert page["next_cursor"] is None
    doomed, greet = page["items"]
    assert (greet["status"], greet["subject"]) == ("done", "ada")
    assert [(d["number"], d["outcome"]) for d in greet["deliveries"]] == [(1, "done")]
    assert [d["outcome"] for d in doomed["deliveries"]] == ["dead"]
    assert doomed["deliveries"][0]["error"] == "this one never works"
    assert [i["key"] for i in cli.ok("events", "--type", "gr*")["items"]] == ["g1"]
    assert [i["key"] for i in cli.ok("events", "--type", "doomed")["items"]] == ["d1"]
    assert [i["key"] for i in cli.ok("events", "--since", "PT1H")["items"]] == ["d1", "g1"]
    assert cli.ok("events", "--until", "PT1H")["items"] == []
    assert cli.ok("events", "--since", "2999-01-01T00:00:00Z")["items"] == []
    first = cli.ok("events", "--limit", "1")
    assert [i["key"] for i in first["items"]] == ["d1"]
    rest = cli.ok("events", "--limit", "1", "--cursor", first["next_cursor"])
    assert [i["key"] for i in rest["items"]] == ["g1"]
    human = cli("events")
    assert human.code == 0, human.stderr
    for shown in ("greet", "dead", "g1", "done"):
        assert shown in human.stdout


def test_bad_event_filters_name_the_field(cli: Cli) -> None:
    cli.ok("emit", "greet")  # the namespace exists: only the filters are wrong
    for args, field in [
        (["--since", "yesterday"], "since"),
        (["--since", "2025-03-01T00:00:00"], "since"),
        (["--until", "P2X"], "until"),
        (["--type", "order.["], "type"),
        (["--cursor", "nope"], "cursor"),
        (["--limit", "0"], "limit"),
    ]:
        error = cli.fails("events", *args, code=2)
        assert (error["code"], error["field"]) == ("invalid_input", field), args
    error = cli.fails("events", "--namespace", "nowhere", code=3)
    assert error["field"] == "namespace"


def test_prune_applies_the_retention_once(cli: Cli, app_module: str) -> None:
    fire_two(cli, app_module)
    assert cli.ok("prune") == {
        "archived": 0,
        "deleted": 0,
        "audit_deleted": 0,
        "partitions_created": [],
        "partitions_dropped": [],
    }
    # Finished a process start-up ago at least: past a retention of 2 ms.
    report = cli.ok("prune", "--retention", "0.002", "--archive-after", "0.001")
    assert report["deleted"] == 2
    assert cli.ok("events")["items"] == []
    assert [t["key"] for t in cli.ok("ls")["items"]] == ["later"]
    human = cli("prune", env={"DUETIME_RETENTION": "PT1S", "DUETIME_ARCHIVE_AFTER": "0.5"})
    assert (human.code, human.stdout.strip()) == (0, "archived 0, deleted 0")


def test_bad_retention_is_refused_naming_the_field(cli: Cli) -> None:
    for args, env, field in [
        (["--retention", "soon"], {}, "retention"),
        (["--retention", "PT1M", "--archive-after", "PT1H"], {}, "archive_after"),
        ([], {"DUETIME_RETENTION": "P1X"}, "DUETIME_RETENTION"),
    ]:
        error = cli.fails("prune", *args, code=2, env=env)
        assert (error["code"], error["field"]) == ("invalid_input", field), args
    usage = cli("--help").stdout
    assert "  prune " in usage
    assert "  events " in usage
