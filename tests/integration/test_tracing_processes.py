"""A trace crosses processes: the test schedules inside its span, a ``duetime worker``
subprocess runs the handler, and the worker's spans (written to a file by its app module's
exporter) continue the test's trace, and its JSON log lines name that trace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import run, wait_until
from tracing_kit import Traced, traceparent

from duetime import AsyncApp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import pooled_pg_url

APP_MODULE = Path(__file__).with_name("tracing_worker_app.py")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'traced.db'}"
        return
    with pooled_pg_url() as found:
        yield found


def spans_in(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def test_the_worker_processes_spans_continue_the_schedulers_trace(url: str, tmp_path: Path) -> None:
    traced = Traced()
    spans_file = tmp_path / "worker-spans.jsonl"
    shutil.copy(APP_MODULE, tmp_path / "traced_app.py")

    async def schedule() -> None:
        async with AsyncApp(url, tracer_provider=traced.provider) as app:
            with traced.tracer.start_as_current_span("checkout"):
                await app.schedule("greet", delay=0, key="hello")
                await app.schedule("fragile", delay=0, key="broken", max_attempts=1)

    run(schedule)  # stored before the worker starts: its first claim takes it
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env |= {"DUETIME_DATABASE_URL": url, "DUETIME_TEST_SPANS": str(spans_file)}
    env["DUETIME_LOG_FORMAT"] = "json"
    worker = subprocess.Popen(
        [sys.executable, "-m", "duetime", "worker", "--app", "traced_app:app"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(
            lambda: (
                {"greeting", "duetime process fragile"} <= {s["name"] for s in spans_in(spans_file)}
            ),
            30,
            "the worker's handler spans",
            explain=lambda: f"spans: {spans_in(spans_file)}",
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 0, stderr

    schedule_span = traced.one("duetime schedule greet")
    trace_id, span_id = traceparent(schedule_span).split("-")[1:3]
    by_name = {s["name"]: s for s in spans_in(spans_file)}
    process = by_name["duetime process greet"]
    assert (process["trace_id"], process["parent_id"]) == (trace_id, span_id)
    assert process["kind"] == "CONSUMER"
    assert process["attributes"]["messaging.message.id"] == "hello"
    greeting = by_name["greeting"]
    assert (greeting["trace_id"], greeting["parent_id"]) == (trace_id, process["span_id"])
    failed = by_name["duetime process fragile"]
    assert failed["trace_id"] == trace_id
    logged = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    (line,) = [entry for entry in logged if entry.get("key") == "broken"]
    assert "the printer is on fire" in line["message"]
    assert (line["trace_id"], line["span_id"]) == (trace_id, failed["span_id"])
