"""Webhooks behind ``duetime serve``: a real receiver, retries, signatures, dead letters."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from duetime.destinations.webhook import verify_signature

from .test_api_serve import make_server, wait_for

pytestmark = pytest.mark.slow  # a real `duetime serve` delivering to a receiver

SECRET = "s3cret-s3cret-s3cret"  # WebhookDestination wants 16+ characters

HANDLERS = """
import os

from duetime import App
from duetime.destinations.handler import as_handler
from duetime.destinations.webhook import WebhookDestination

SECRET = os.environ["DUETIME_TEST_SECRET"]

base = f"http://127.0.0.1:{os.environ['DUETIME_TEST_RECEIVER_PORT']}"
app = App(namespace="shop")
app.handler("order.paid")(
    as_handler(WebhookDestination("billing", f"{base}/flaky", secret=SECRET))
)
app.handler("order.refused")(as_handler(WebhookDestination("refusals", f"{base}/reject")))
"""


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """Records every POST; ``/flaky`` answers 503 once then 200, ``/reject`` always 400."""

    def __init__(self) -> None:
        self.requests: list[Received] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                with receiver.lock:
                    receiver.requests.append(Received(self.path, dict(self.headers), body))
                    seen = sum(1 for r in receiver.requests if r.path == self.path)
                if self.path == "/flaky":
                    status, text = (503, b"try later") if seen == 1 else (200, b"ok")
                elif self.path == "/reject":
                    status, text = 400, b"bad order"
                else:
                    status, text = 404, b"no such hook"
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def to(self, path: str) -> list[Received]:
        with self.lock:
            return [r for r in self.requests if r.path == path]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    receiver.thread.start()
    yield receiver
    receiver.httpd.shutdown()
    receiver.httpd.server_close()


def test_webhooks_retry_sign_and_dead_letter(tmp_path: Path, receiver: Receiver) -> None:
    server = make_server(tmp_path)
    (server.cwd / "handlers.py").write_text(HANDLERS)
    server.env["DUETIME_TEST_RECEIVER_PORT"] = str(receiver.port)
    server.env["DUETIME_TEST_SECRET"] = SECRET
    server.env["DUETIME_BACKOFF_BASE"] = "0.2"
    server.start("--app", "handlers:app")
    try:
        with server.client() as client:
            for type_, key in (("order.paid", "o1"), ("order.refused", "r1")):
                body = {"type": type_, "key": key, "payload": {"order": key}}
                answer = client.post("/v1/namespaces/shop/events", json=body)
                assert answer.status_code == 201, answer.text

            def status_of(key: str, wanted: str) -> dict[str, Any] | None:
                got: dict[str, Any] = client.get(f"/v1/namespaces/shop/timers/{key}").json()
                return got if got["timer"]["status"] == wanted else None

            o1 = wait_for(lambda: status_of("o1", "done"), timeout=20)
            r1 = wait_for(lambda: status_of("r1", "dead"), timeout=20)
    finally:
        assert server.stop() == 0, server.log()

    flaky = receiver.to("/flaky")
    assert len(flaky) == 2
    first, second = flaky
    assert first.headers["Idempotency-Key"] == second.headers["Idempotency-Key"]
    assert first.headers["Idempotency-Key"] == "shop:o1:billing"
    assert first.headers["Duetime-Attempt"] == "1"
    assert second.headers["Duetime-Attempt"] == "2"
    signature = second.headers["Duetime-Signature"]
    assert verify_signature(SECRET, signature, second.body, time.time())
    assert not verify_signature("wrong", signature, second.body, time.time())
    assert [a["outcome"] for a in o1["attempts"]] == ["retry", "done"]

    assert len(receiver.to("/reject")) == 1
    last_error = r1["timer"]["last_error"]
    assert "400" in last_error
    assert "bad order" in last_error
