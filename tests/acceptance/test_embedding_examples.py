"""The embedding examples run as their READMEs say: uvicorn serving a FastAPI application with
duetime mounted in it and the worker in the same process; Flask's server beside ``duetime
serve``, which runs the worker for the Flask app's handlers."""

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

pytestmark = pytest.mark.slow  # the embedding examples served by uvicorn, end to end

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Server:
    """A server process started from the repository root, as the READMEs run them."""

    process: subprocess.Popen[str]
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        """SIGTERM; uvicorn re-raises it once shut down, so its clean stop exits -SIGTERM."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"uvicorn did not stop on SIGTERM:\n{self.log()}") from None


def start(command: list[str], tmp_path: Path, *, port: int, ready: str) -> Server:
    """Run ``command`` on the example's own database in ``tmp_path``; wait until ``ready``
    answers without a server error (the mounted /healthz says 503 until duetime started)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUETIME_")}
    env["DUETIME_DATABASE_URL"] = f"sqlite:///{tmp_path / 'example.db'}"
    log_path = tmp_path / f"server-{port}.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True
        )
    server = Server(process, port, log_path)

    def answers() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"{command} exited {process.returncode}:\n{server.log()}")
        try:
            return httpx.get(server.url + ready, timeout=1).status_code < 500
        except httpx.TransportError:
            return False

    try:
        wait_until(answers, 120, f"{command} to answer {ready}", every=0.05, explain=server.log)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return server


def start_uvicorn(target: str, tmp_path: Path, *args: str, ready: str) -> Server:
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", target, "--port", str(port), *args]
    return start(command, tmp_path, port=port, ready=ready)


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Server]:
    server = start_uvicorn("examples.fastapi_app.app:app", tmp_path, ready="/duetime/healthz")
    try:
        yield server
    finally:
        server.stop()


def test_fastapi_example_schedules_in_its_route_and_runs_the_handler_in_process(
    shop: Server,
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


@pytest.fixture
def flask_shop(tmp_path: Path) -> Iterator[tuple[Server, Server]]:
    """``flask run`` for the app, ``duetime serve --app`` for its handlers and the dashboard."""
    port = free_port()
    flask = [sys.executable, "-m", "flask", "--app", "examples.flask_app.app", "run"]
    web = start([*flask, "--port", str(port)], tmp_path, port=port, ready="/signups/nobody")
    duetime_port = free_port()
    serve = [sys.executable, "-m", "duetime", "serve", "--port", str(duetime_port)]
    try:
        worker = start(
            [*serve, "--app", "examples.flask_app.app:scheduler"],
            tmp_path,
            port=duetime_port,
            ready="/healthz",
        )
    except BaseException:
        web.stop()
        raise
    try:
        yield web, worker
    finally:
        web.stop()
        worker.stop()


def test_flask_example_schedules_in_a_request_and_the_worker_beside_it_runs_it(
    flask_shop: tuple[Server, Server],
) -> None:
    web, worker = flask_shop
    with httpx.Client(base_url=web.url, timeout=10) as client:
        made = client.post("/signups", json={"user": "ada", "name": "Ada", "welcome_in": "PT0S"})
        assert made.status_code == 201, made.text

        def welcomed() -> bool:
            return bool(client.get("/signups/ada").json()["welcome"] == "done")

        wait_until(welcomed, 20, "the worker to send the welcome", explain=worker.log)
        assert "welcome, Ada!" in worker.log()
        later = client.post("/signups", json={"user": "kenji", "welcome_in": "P1D"})
        assert later.status_code == 201
        assert client.delete("/signups/kenji").json()["welcome"] == "cancelled"
        assert client.delete("/signups/ada").status_code == 409
        bad = client.post("/signups", json={"user": "sita", "welcome_in": "soon"})
        assert bad.status_code == 422
        assert bad.json()["field"] == "welcome_in"
    seen = httpx.get(f"{worker.url}/v1/namespaces/default/timers/welcome:ada", timeout=10)
    assert seen.json()["timer"]["status"] == "done"  # the dashboard's API sees the same database
    assert "Traceback" not in web.log() + worker.log()
