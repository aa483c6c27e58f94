# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console on a server without the key a timer was sealed with: the payload reads as
sealed, naming the key, and so does the traceback; nothing of either reaches the page."""

from __future__ import annotations

import base64

import pytest
from playwright.sync_api import Page, expect

from duetime import App, Event

from .test_dashboard import (  # noqa: F401 - fixtures
    Console,
    browser,
    console,
    page,
    servers,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server

K1 = f"k1:{base64.b64encode(b'1' * 32).decode()}"


def _refuse(event: Event) -> None:
    raise RuntimeError(f"no mailbox {event.payload['email']}")


def test_a_timer_sealed_with_a_key_the_server_lacks_shows_sealed(
    console: Console, page: Page
) -> None:
    with App(database_url=console.database_url, namespace=console.namespace, seal_keys=K1) as app:
        app.handler("signup.mail")(_refuse)
        app.schedule("signup.mail", {"email": "ui@example.com"}, delay=0, key="sealed-1",
                     max_attempts=1)  # fmt: skip
        app.tick()
    page.goto(console.url("timer/sealed-1"))
    expect(page.locator("#timer-title")).to_contain_text("sealed-1")
    expect(page.locator("#timer-payload")).to_contain_text("sealed (with key k1")
    traceback = page.locator("#attempts tr.traceback pre")
    expect(traceback).to_have_text("sealed")
    assert "ui@example.com" not in page.content()
