"""Webhook destination against a real local HTTP server: body, headers, signature, failures."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

import pytest
from tests.waiting import run as run_within
from tests.waiting import until

from duetime import AsyncApp, Dead, Event, Retry, Status
from duetime.destinations import (
    Delivery,
    DeliveryFailed,
    DestinationSpec,
    WebhookDestination,
    as_handler,
    build_destination,
    envelope,
    verify_signature,
)
from duetime.destinations.webhook import MAX_RETRY_AFTER

SECRET = "whsec_0123456789abcdef"
DUE_AT = datetime(2025, 3, 15, 13, 0, tzinfo=UTC)


def make_event(**changes: Any) -> Event:
    values: dict[str, Any] = {
        "id": 42,
        "namespace": "shop",
        "key": "order-7",
        "type": "order.paid",
        "payload": {"order": 7, "total": "12.50", "note": "café"},
        "subject": "user-9",
        "due_at": DUE_AT,
        "attempt": 1,
        "max_attempts": 5,
        "correlation_id": "req-1",
        "fired_at": DUE_AT,
    }
    values.update(changes)
    return Event(**values)


@dataclass
class Reply:
    status: int = 200
    body: bytes = b"ok"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """A tiny HTTP/1.1 server on the test's loop: records requests, answers queued replies."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[Received] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Receiver:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/hooks/duetime"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            self.requests.append(Received(method, path, headers, body))
            reply = self.replies.pop(0) if self.replies else Reply()
            if reply.delay:
                await asyncio.sleep(reply.delay)
            extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
            writer.write(
                f"HTTP/1.1 {reply.status} X\r\nContent-Length: {len(reply.body)}\r\n"
                f"Connection: close\r\n{extra}\r\n".encode("latin-1")
                + reply.body
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def run(main: Callable[[], Awaitable[None]]) -> None:
    run_within(main, 30)


async def failure_of(destination: WebhookDestination, delivery: Delivery) -> DeliveryFailed:
    with pytest.raises(DeliveryFailed) as caught:
        await destination.deliver(delivery)
    return caught.value


def test_post_carries_envelope_headers_and_a_verifiable_signature() -> None:
    async def main() -> None:
        async with Receiver() as receiver:
            hook = WebhookDestination(
                "billing", receiver.url, secret=SECRET, headers={"Authorization": "Bearer t0k"}
            )
            delivery = Delivery.from_event(make_event(attempt=3), hook.name)
            await hook.deliver(delivery)
            await hook.close()
        (request,) = receiver.requests
        assert request.method == "POST"
        assert request.path == "/hooks/duetime"
        assert json.loads(request.body) == envelope(delivery)
        body = json.loads(request.body)
        assert body["delivery_id"] == "shop:order-7:billing"
        assert body["due_at"] == "2025-03-15T13:00:00Z"
        assert body["payload"]["note"] == "café"
        headers = request.headers
        assert headers["content-type"] == "application/json"
        assert headers["idempotency-key"] == "shop:order-7:billing"
        assert headers["duetime-event-type"] == "order.paid"
        assert headers["duetime-attempt"] == "3"
        assert headers["authorization"] == "Bearer t0k"
        assert headers["user-agent"].startswith("duetime")

        signature = headers["duetime-signature"]
        now = time.time()
        assert verify_signature(SECRET, signature, request.body, now)
        assert not verify_signature("whsec_not-the-right-one", signature, request.body, now)
        assert not verify_signature(SECRET, signature, request.body + b" ", now)
        assert not verify_signature(SECRET, signature, request.body, now + 301)
        assert verify_signature(SECRET, signature, request.body, now + 250, tolerance=600)

    run(main)


def test_unsigned_without_a_secret_and_the_same_delivery_id_on_every_attempt() -> None:
    async def main() -> None:
        async with Receiver() as receiver:
            hook = WebhookDestination("plain", receiver.url)
            for attempt in (1, 2):
                await hook.deliver(Delivery.from_event(make_event(attempt=attempt), hook.name))
            await hook.close()
        first, second = receiver.requests
        assert "duetime-signature" not in first.headers
        assert first.headers["idempotency-key"] == second.headers["idempotency-key"]
        assert (first.headers["duetime-attempt"], second.headers["duetime-attempt"]) == ("1", "2")

    run(main)


def test_5xx_is_retryable_with_the_response_recorded() -> None:
    async def main() -> None:
        async with Receiver(Reply(503, b"down for maintenance")) as receiver:
            hook = WebhookDestination("h", receiver.url)
            failure = await failure_of(hook, Delivery.from_event(make_event(), hook.name))
            await hook.close()
        assert failure.retryable
        assert failure.retry_after is None
        assert failure.response is not None
        assert failure.response.startswith("HTTP 503")
        assert "down for maintenance" in failure.response

    run(main)


def test_429_with_retry_after_seconds_or_date_is_retryable_with_retry_after() -> None:
    async def main() -> None:
        later = datetime.fromtimestamp(time.time() + 120, UTC)
        replies = (
            Reply(429, b"slow down", {"Retry-After": "7"}),
            Reply(429, b"", {"Retry-After": format_datetime(later, usegmt=True)}),
            Reply(503, b"", {"Retry-After": "999999"}),
            Reply(429, b"", {"Retry-After": "soon"}),
        )
        async with Receiver(*replies) as receiver:
            hook = WebhookDestination("h", receiver.url)
            delivery = Delivery.from_event(make_event(), hook.name)
            failures = [await failure_of(hook, delivery) for _ in replies]
            await hook.close()
        assert all(f.retryable for f in failures)
        assert failures[0].retry_after == 7
        assert failures[1].retry_after is not None
        assert 110 <= failures[1].retry_after <= 120
        assert failures[2].retry_after == MAX_RETRY_AFTER
        assert failures[3].retry_after is None

    run(main)


def test_4xx_is_not_retryable_and_records_status_and_first_500_bytes() -> None:
    async def main() -> None:
        long_body = b"unknown order 7; " + b"x" * 2000
        async with Receiver(Reply(400, long_body), Reply(302, b"", {"Location": "/x"})) as rcv:
            hook = WebhookDestination("h", rcv.url)
            delivery = Delivery.from_event(make_event(), hook.name)
            refused = await failure_of(hook, delivery)
            redirected = await failure_of(hook, delivery)
            await hook.close()
        assert not refused.retryable
        assert refused.response is not None
        assert refused.response.startswith("HTTP 400")
        assert "unknown order 7" in refused.response
        assert refused.response.endswith(long_body[:500].decode())
        assert not redirected.retryable
        assert "redirects are not followed" in redirected.message

    run(main)


def test_timeout_and_connection_refused_are_retryable() -> None:
    async def main() -> None:
        async with Receiver(Reply(200, delay=3.0)) as receiver:
            hook = WebhookDestination("h", receiver.url, timeout=0.3)
            # A failure, not the reply that comes after 3 s: the timeout cut the exchange.
            slow = await failure_of(hook, Delivery.from_event(make_event(), hook.name))
            await hook.close()
            url = receiver.url
        refused_hook = WebhookDestination("h", url)  # the server is gone now
        refused = await failure_of(refused_hook, Delivery.from_event(make_event(), "h"))
        await refused_hook.close()
        assert slow.retryable
        assert "timed out" in slow.message
        assert refused.retryable

    run(main)


def test_the_timeout_bounds_the_whole_exchange_not_each_read() -> None:
    trickled: list[int] = []  # one entry a byte the server sent

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        try:
            writer.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
            for _ in range(40):  # a byte every 0.1 s: no single read ever waits a second
                writer.write(b"z")
                await writer.drain()
                trickled.append(1)
                await asyncio.sleep(0.1)
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(trickle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        hook = WebhookDestination("h", f"http://127.0.0.1:{port}/", timeout=1.0)
        failure = await failure_of(hook, Delivery.from_event(make_event(), "h"))
        sent_by_then = len(trickled)
        await hook.close()
        server.close()
        await server.wait_closed()
        assert failure.retryable
        assert "timed out" in failure.message
        # It gave up while the server was still sending: a timeout of each read would have
        # waited for all 40 bytes (no gap between them is near a second).
        assert sent_by_then < 40, sent_by_then

    run(main)


def test_as_handler_turns_failures_into_retry_and_dead() -> None:
    async def main() -> None:
        replies = (Reply(200), Reply(503, headers={"Retry-After": "4"}), Reply(422, b"bad total"))
        async with Receiver(*replies) as receiver:
            hook = WebhookDestination("h", receiver.url)
            handle = as_handler(hook)
            await handle(make_event())  # 200: delivered, no outcome raised
            with pytest.raises(Retry) as retry:
                await handle(make_event())
            assert retry.value.delay is not None
            assert retry.value.delay.total_seconds() == 4
            with pytest.raises(Dead) as dead:
                await handle(make_event())
            assert "bad total" in dead.value.reason
            assert dead.value.reason.startswith("h: ")
            await hook.close()

    run(main)


def test_worker_delivers_through_a_webhook_built_from_a_spec(db_url: str) -> None:
    async def main() -> None:
        async with Receiver(Reply(200), Reply(410, b"gone for good")) as receiver:
            spec = DestinationSpec.from_dict(
                {"kind": "webhook", "url": receiver.url, "secret_env": "HOOK_SECRET"},
                name="hook1",
            )
            hook = build_destination(spec, env={"HOOK_SECRET": SECRET})
            app = AsyncApp(db_url)
            app.handler("order.paid")(as_handler(hook))
            async with app:
                await app.schedule("order.paid", {"order": 1}, delay=0, key="ok")
                await app.schedule("order.paid", {"order": 2}, delay=0, key="refused")
                worker = app.worker()
                running = asyncio.create_task(worker.run())

                async def final() -> bool:
                    return all([(await app.get(k)).status.is_final for k in ("ok", "refused")])

                try:
                    await until(final, 60, "both deliveries to end")
                finally:
                    worker.stop()
                    await running
                delivered = await app.get("ok")
                refused = await app.get("refused")
            await hook.close()
        assert delivered.status is Status.DONE
        assert refused.status is Status.DEAD
        assert refused.last_error is not None
        assert "gone for good" in refused.last_error
        assert len(receiver.requests) == 2
        for request in receiver.requests:
            assert verify_signature(
                SECRET, request.headers["duetime-signature"], request.body, time.time()
            )
            assert request.headers["idempotency-key"].startswith(f"{app.namespace}:")

    run(main)
