"""``duetime worker --sources`` and ``duetime serve --sources``: broker messages become timers.

A real Redis stream (``DUETIME_TEST_REDIS``; skipped without one, failed under CI): a schedule
request XADDed to the stream is stored, fired by the app's handler, and counted in /metrics; a
malformed one is dead-lettered with the reason. Each test uses streams of its own, deleted after.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import Cli
from .test_api_serve import Server, make_server, wait_for
from .test_cli_worker import handled, running

# The broker probes live beside the integration tests; pytest does not put them on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from brokers import require_redis

if not os.environ.get("CI"):  # under CI a missing client library is an error, not a skip
    pytest.importorskip("redis", reason="the broker clients come with duetime[brokers]")

from redis import Redis


@pytest.fixture
def stream() -> Iterator[str]:
    """A stream name no other test uses; it and its dead-letter stream are deleted afterwards."""
    url = require_redis()
    name = f"duetime-test-{uuid.uuid4().hex[:12]}"
    yield name
    with Redis.from_url(url) as client:
        client.delete(name, f"{name}:dead")


def sources_file(directory: Path, stream: str, name: str = "orders") -> Path:
    path = directory / "sources.json"
    spec = {"kind": "redis", "url": require_redis(), "stream": stream, "block": 0.2}
    path.write_text(json.dumps({name: spec}))
    return path


def xadd(stream: str, body: Any) -> None:
    data = body if isinstance(body, str) else json.dumps(body)
    with Redis.from_url(require_redis()) as client:
        client.xadd(stream, {"body": data})


def dead_letters(stream: str) -> list[dict[str, str]]:
    with Redis.from_url(require_redis(), decode_responses=True) as client:
        return [fields for _, fields in client.xrange(f"{stream}:dead")]


@pytest.mark.slow
def test_worker_consumes_a_redis_stream_and_fires_the_handler(
    cli: Cli, app_module: str, stream: str
) -> None:
    sources = sources_file(cli.cwd, stream)
    with running(cli, "worker", "--app", app_module, "--sources", str(sources), "--json") as work:
        xadd(stream, {"type": "greet", "key": "from-redis", "delay": 0})
        xadd(stream, {"type": "greet", "at": "2031-03-15T09:00:00"})  # naive: dead-lettered
        wait_for(lambda: handled(cli) == ["from-redis"], timeout=15)
        wait_for(lambda: len(dead_letters(stream)) == 1, timeout=10)
        work.send_signal(signal.SIGTERM)
        stdout, stderr = work.communicate(timeout=30)
    assert work.returncode == 0, stderr
    assert "Traceback" not in stderr
    assert "orders" in stderr  # the source is named in the log
    assert json.loads(stdout)["outcomes"] == {"done": 1}
    (dead,) = dead_letters(stream)
    assert dead["dead_field"] == "at"
    assert dead["body"] == json.dumps({"type": "greet", "at": "2031-03-15T09:00:00"})
    (timer,) = cli.ok("ls")["items"]
    assert (timer["key"], timer["status"]) == ("from-redis", "done")


@pytest.mark.slow
def test_sources_may_come_inline_from_the_environment(
    cli: Cli, app_module: str, stream: str
) -> None:
    cli.env["DUETIME_SOURCES"] = sources_file(cli.cwd, stream, name="inline").read_text()
    with running(cli, "worker", "--app", app_module) as work:
        xadd(stream, {"type": "greet", "key": "inline-1", "delay": 0})
        wait_for(lambda: handled(cli) == ["inline-1"], timeout=15)
        work.send_signal(signal.SIGTERM)
        _, stderr = work.communicate(timeout=30)
    assert work.returncode == 0, stderr


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"orders": {"kind": "redis"}}', "sources.orders.url"),
        ('{"orders": {"kind": "kinesis", "url": "x"}}', "sources.orders.kind"),
        ('{"orders": {"kind": "redis", "url": "redis://h", "stream": "s", "colour": 1}}',
         "sources.orders.colour"),
        ("[1, 2]", "sources"),
        ("{not json", "sources"),
    ],
    ids=["no-url", "unknown-kind", "unknown-option", "not-an-object", "not-json"],
)  # fmt: skip
def test_a_bad_sources_file_is_refused_before_anything_runs(
    cli: Cli, app_module: str, content: str, field: str
) -> None:
    (cli.cwd / "sources.json").write_text(content)
    error = cli.fails("worker", "--app", app_module, "--sources", "sources.json", code=2)
    assert error["field"] == field
    assert cli.ok("nodes")["items"] == []  # no worker ever started


def test_a_missing_sources_file_names_the_option(cli: Cli, app_module: str) -> None:
    error = cli.fails("worker", "--app", app_module, "--sources", "nowhere.json", code=2)
    assert error["field"] == "sources"
    assert "nowhere.json" in error["message"]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    server = make_server(tmp_path)
    yield server
    server.stop()


@pytest.mark.slow
def test_serve_runs_sources_and_counts_their_messages(server: Server, stream: str) -> None:
    sources = sources_file(server.cwd, stream)
    server.start("--app", "handlers:app", "--sources", str(sources))
    xadd(stream, {"type": "followup.email", "key": "via-serve", "delay": 0})
    xadd(stream, "not json at all")
    wait_for(lambda: server.fired() == ["via-serve"], timeout=15)
    with server.client() as client:
        timer = client.get("/v1/namespaces/shop/timers/via-serve").json()["timer"]
        assert timer["type"] == "followup.email"

        def counted() -> dict[str, float]:
            samples = {}
            for line in client.get("/metrics").text.splitlines():
                if line.startswith("duetime_source_messages_total{"):
                    labels, _, value = line.partition("} ")
                    samples[labels.split('outcome="')[1].split('"')[0]] = float(value)
                    assert 'source="orders"' in labels
            return samples if samples.get("dead_lettered") == 1.0 else {}

        samples = wait_for(counted, timeout=10)
    assert samples["created"] == 1.0
    assert samples["updated"] == samples["kept"] == samples["deferred"] == 0.0
    assert server.stop() == 0, server.log()
    assert "sources into namespace shop: orders" in server.log()
