"""``DUETIME_LOG_FORMAT=json``: every line a worker or ``serve`` writes on stderr is JSON."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import Cli
from .test_api_serve import make_server
from .test_cli_worker import jsonl, running, wait_for

pytestmark = pytest.mark.slow  # the logs of real `duetime serve` and worker processes

FAILING_APP = """
from duetime import App

app = App()


@app.handler("flaky")
def flaky(event):
    raise ValueError("no route to host\\nERROR forged line")
"""


def json_lines(text: str) -> list[dict[str, Any]]:
    """Each non-empty line parsed; a line that is not JSON fails the test by its text."""
    records = []
    for line in text.splitlines():
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise AssertionError(f"not a JSON log line: {line!r}") from exc
    return records


def test_a_worker_logs_one_json_object_a_line_naming_the_failing_timer(cli: Cli) -> None:
    (cli.cwd / "flakyapp.py").write_text(FAILING_APP)
    request = {"type": "flaky", "delay": 0, "key": "f1", "max_attempts": 1}
    cli.ok("schedule", "--from-file", "-", input=jsonl(request))
    env = {"DUETIME_LOG_FORMAT": "json"}
    with running(cli, "worker", "--app", "flakyapp:app", env=env) as worker:
        wait_for(lambda: cli.ok("show", "f1")["timer"]["status"] == "dead")
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=15)
    assert worker.returncode == 0, stderr
    records = json_lines(stderr)
    assert all({"timestamp", "level", "logger", "message"} <= r.keys() for r in records)
    assert any(r["logger"] == "duetime.cli" and "starting" in r["message"] for r in records)
    (failed,) = [r for r in records if r.get("key") == "f1"]
    assert failed["level"] == "WARNING"
    assert (failed["namespace"], failed["type"], failed["attempt"]) == ("default", "flaky", 1)
    assert failed["node"] == cli.ok("show", "f1")["attempts"][0]["node_id"]
    assert failed["message"].endswith("no route to host\\nERROR forged line")


def test_log_format_flag_and_text_default(cli: Cli) -> None:
    (cli.cwd / "flakyapp.py").write_text(FAILING_APP)
    cli.ok("schedule", "flaky", "--delay", "0", "--key", "f2", "--max-attempts", "1")
    as_json = cli("tick", "--app", "flakyapp:app", "--log-format", "json")
    assert as_json.code == 0, as_json.stderr
    assert any(r.get("key") == "f2" for r in json_lines(as_json.stderr))
    cli.ok("schedule", "flaky", "--delay", "0", "--key", "f3", "--max-attempts", "1")
    text = cli("tick", "--app", "flakyapp:app")
    assert text.code == 0
    assert "WARNING duetime.worker: handler for flaky (key f3) failed" in text.stderr
    assert not text.stderr.lstrip().startswith("{")


def test_serve_logs_uvicorn_lines_as_json_too(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    server.env["DUETIME_LOG_FORMAT"] = "json"
    try:
        server.start("--no-worker", "--access-log")
        assert httpx.get(f"{server.base_url}/healthz", timeout=5).status_code == 200
    finally:
        assert server.stop() == 0, server.log()
    records = json_lines(server.log())
    loggers = {r["logger"] for r in records}
    assert {"uvicorn.error", "uvicorn.access", "duetime.cli"} <= loggers, loggers
    assert any("Application startup complete" in r["message"] for r in records)
    assert any("/healthz" in r["message"] for r in records if r["logger"] == "uvicorn.access")


def test_serve_access_log_in_text_is_one_line_a_request(tmp_path: Path) -> None:
    server = make_server(tmp_path)
    try:
        server.start("--no-worker", "--access-log")
        for path in ("/healthz", "/v1/namespaces/default/timers/a%1B%5B31m%0Ab"):
            httpx.get(f"{server.base_url}{path}", timeout=5)
    finally:
        assert server.stop() == 0, server.log()
    log = server.log()
    assert "Logging error" not in log
    access = [line for line in log.splitlines() if '"GET /' in line]
    assert access[-2].endswith('"GET /healthz HTTP/1.1" 200 OK'), log
    assert access[-1].endswith('/timers/a%1B%5B31m%0Ab HTTP/1.1" 404 Not Found'), log
    assert "\x1b" not in log
