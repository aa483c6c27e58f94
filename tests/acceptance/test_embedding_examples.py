"""The embedding examples run as their READMEs say: uvicorn serving the user's own application,
duetime mounted in it at /duetime, the worker in the same process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Uvicorn:
    """``python -m uvicorn <target>`` from the repository root, as the README runs it."""

    process: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        """SIGTERM; uvicorn re-raises it once shut down, so a clean stop exits -SIGTERM."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"uvicorn did not stop on SIGTERM:\n{self.log()}") from None


def start_uvicorn(target: str, tmp_path: Path, *args: str, ready: str) -> Uvicorn:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'shop.db'}"
    log_path = tmp_path / f"uvicorn-{port}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", target, "--port", str(port), *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    server = Uvicorn(process, port, log_path)

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"uvicorn exited {process.returncode}:\n{server.log()}")
        try:
            return httpx.get(server.url + ready, timeout=1).status_code == 200
        except httpx.TransportError:
            return False

    wait_until(answers, 30, f"{target} to answer {ready}", every=0.05, explain=server.log)
    return server


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Uvicorn]:
    server = start_uvicorn("examples.fastapi_app.app:app", tmp_path, ready="/duetime/healthz")
    try:
        yield server
    finally:
        server.stop()


def test_fastapi_example_schedules_in_its_route_and_runs_the_handler_in_process(
    shop: Uvicorn,
) -> None:
    with httpx.Client(base_url=shop.url, timeout=10) as client:
        placed = client.post(
            "/orders", json={"order_id": "A1", "email": "ada@example.com", "remind_in": "PT1S"}
        )
        assert placed.status_code == 201, placed.text
        assert client.get("/orders/A1").json()["reminder"] in {"scheduled", "running", "done"}

        def reminded() -> bool:
            return client.get("/orders/A1").json()["reminded_at"] is not None

        wait_until(reminded, 20, "the reminder handler to run", explain=shop.log)
        assert client.get("/orders/A1").json()["reminder"] == "done"
        assert "reminding ada@example.com to pay order A1" in shop.log()

        # duetime's own API and dashboard, under the prefix, on the same store
        timer = client.get("/duetime/v1/namespaces/default/timers/order:A1:payment-reminder")
        assert timer.status_code == 200, timer.text
        assert timer.json()["timer"]["status"] == "done"
        assert timer.json()["timer"]["subject"] == "ada@example.com"
        page = client.get("/duetime/")
        assert page.status_code == 200
        assert "<html" in page.text
        assert client.get("/duetime/static/app.js").status_code == 200
        made = client.post(
            "/duetime/v1/namespaces/default/timers",
            json={
                "type": "order.payment-reminder",
                "payload": {"order_id": "B2"},
                "key": "order:B2:payment-reminder",
                "subject": "kenji@example.com",
                "delay": "PT0S",
            },
        )
        assert made.status_code == 201, made.text
        wait_until(
            lambda: client.get("/orders/B2").json()["reminded_at"] is not None,
            20,
            "the API's timer to reach the in-process handler",
            explain=shop.log,
        )

        bad = client.post(
            "/orders", json={"order_id": "C3", "email": "c@example.com", "remind_in": "soon"}
        )
        assert bad.status_code == 422
        assert bad.json()["detail"]["field"] == "remind_in"
    assert shop.stop() in {0, -signal.SIGTERM}
    assert "Application shutdown complete" in shop.log()  # the worker stopped, the store closed
    assert "Traceback" not in shop.log()


def test_fastapi_example_behind_a_proxy_prefix(tmp_path: Path) -> None:
    """``uvicorn --root-path /shop``, as behind a proxy that serves the app at /shop and strips
    it: the docs page and the OpenAPI document carry /shop/duetime."""
    server = start_uvicorn(
        "examples.fastapi_app.app:app", tmp_path, "--root-path", "/shop", ready="/duetime/healthz"
    )
    try:
        with httpx.Client(base_url=server.url, timeout=10) as client:
            docs = client.get("/duetime/docs")
            assert docs.status_code == 200
            assert "/shop/duetime/docs-assets/swagger-ui-bundle.js" in docs.text
            assert "/shop/duetime/openapi.json" in docs.text
            spec: Any = client.get("/duetime/openapi.json").json()
            assert spec["servers"] == [{"url": "/shop/duetime"}]
            assert client.get("/duetime/docs-assets/swagger-ui.css").status_code == 200
            assert client.get("/duetime/").status_code == 200
    finally:
        server.stop()
