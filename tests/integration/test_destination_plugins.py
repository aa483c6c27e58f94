"""Destination kinds: the built-in ones by name, others from installed entry points, nothing else.

The plugin here is a real installed distribution: a module and a ``.dist-info`` directory with
its ``entry_points.txt`` on ``sys.path``, found by ``importlib.metadata`` as any package is.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest

from duetime import Event, InvalidInput
from duetime.destinations import (
    Delivery,
    Destination,
    DestinationSpec,
    build_destination,
    envelope,
    parse_destinations,
)
from duetime.destinations.config import KINDS

PLUGIN_MODULE = '''
"""A destination kind from another package: appends each envelope to a JSON-lines file."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from duetime.bus.options import Option
from duetime.destinations import Delivery, envelope_json
from duetime.errors import InvalidInput


def check_path(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "expected a file path")
    return value


class JsonLinesDestination:
    def __init__(self, name: str, path: str, token: str | None = None, **common: Any) -> None:
        self.name = name
        self.path = Path(path)
        self.token = token
        self.common = common

    async def deliver(self, delivery: Delivery) -> None:
        with self.path.open("ab") as file:
            file.write(envelope_json(delivery) + b"\\n")

    async def close(self) -> None:
        pass


class Plugin:
    options = {"path": Option(check_path, required=True)}

    def build(
        self, name: str, options: dict[str, Any], env: Mapping[str, str]
    ) -> JsonLinesDestination:
        return JsonLinesDestination(name, token=env.get("JSONL_TOKEN"), **options)


plugin = Plugin()
not_a_plugin = object()
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Install a distribution offering the kinds ``jsonl``, ``broken`` and ``webhook``."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "duetime_jsonl.py").write_text(PLUGIN_MODULE, encoding="utf-8")
    info = site / "duetime_jsonl-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: duetime-jsonl\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [duetime.destinations]
            jsonl = duetime_jsonl:plugin
            broken = duetime_jsonl:not_a_plugin
            webhook = duetime_jsonl:plugin
            """
        ),
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(site))
    return tmp_path


def event() -> Event:
    return Event(
        id=7,
        namespace="shop",
        key="k",
        type="order.paid",
        payload={"n": 1},
        subject=None,
        due_at=datetime(2025, 3, 15, 13, 0, tzinfo=UTC),
        attempt=1,
        max_attempts=5,
        correlation_id=None,
        fired_at=None,
    )


def test_an_unknown_kind_is_an_error_naming_the_field_and_the_known_kinds() -> None:
    with pytest.raises(InvalidInput) as caught:
        build_destination(DestinationSpec("rabitmq", "orders"))
    assert caught.value.field == "destinations.orders.kind"
    for kind in KINDS:
        assert kind in str(caught.value)

    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"orders": {"kind": "rabitmq", "url": "amqp://x/", "exchange": "o"}})
    assert caught.value.field == "destinations.orders.kind"


def test_a_plugin_kind_is_configured_built_and_delivers(
    installed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = installed / "events.jsonl"
    specs = parse_destinations({"lines": {"kind": "jsonl", "path": str(out), "rate": "5/s"}})
    spec = specs["lines"]
    assert spec.kind == "jsonl"
    assert DestinationSpec.from_dict(spec.to_dict(redact=False)) == spec

    destination = build_destination(spec, env={"JSONL_TOKEN": "t0k"})
    assert isinstance(destination, Destination)
    assert destination.name == "lines"
    assert destination.token == "t0k"  # type: ignore[attr-defined]
    assert destination.common == {"rate": "5/s"}  # type: ignore[attr-defined]

    delivery = Delivery.from_event(event(), "lines")
    asyncio.run(destination.deliver(delivery))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [envelope(delivery)]


def test_the_known_kinds_listed_include_the_installed_plugins(installed: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"x": {"kind": "jsonline", "path": "p"}})
    assert caught.value.field == "destinations.x.kind"
    assert "jsonl" in str(caught.value)


def test_a_plugin_kind_checks_its_options_naming_each_field(installed: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"lines": {"kind": "jsonl"}})
    assert caught.value.field == "destinations.lines.path"
    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"lines": {"kind": "jsonl", "path": "p", "paht": "q"}})
    assert caught.value.field == "destinations.lines.paht"
    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"lines": {"kind": "jsonl", "path": "p", "burst": 3}})
    assert caught.value.field == "destinations.lines.burst"


def test_an_entry_point_that_is_no_plugin_is_an_error_naming_the_kind(installed: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_destinations({"b": {"kind": "broken"}})
    assert caught.value.field == "destinations.b.kind"
    assert "duetime_jsonl:not_a_plugin" in str(caught.value)


def test_a_plugin_cannot_replace_a_built_in_kind(installed: Path) -> None:
    specs = parse_destinations({"hook": {"kind": "webhook", "url": "https://x.example/h"}})
    assert type(build_destination(specs["hook"])).__name__ == "WebhookDestination"
