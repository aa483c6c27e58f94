"""The dashboard in a real headless Chromium against ``duetime serve``: see, search, replay.

Needs /usr/bin/chromium (``apt-get install chromium``): skipped with a reason when it is missing,
except under CI (env ``CI`` set), where a missing browser is a failure. With
``DUETIME_SCREENSHOT`` set, the first test saves ``docs/dashboard.png``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from duetime import App, Dead, Event

from .test_api_serve import Server, make_server, wait_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"

if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium")
    pytest.skip(
        f"{CHROMIUM} is not installed (apt-get install chromium); dashboard tests skipped",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 1100})
    page = context.new_page()
    yield page
    context.close()


def seed(server: Server) -> None:
    """Timers for user 1234, and one dead letter (its type has no handler in the served app)."""
    url = server.env["DUETIME_DATABASE_URL"]
    with App(database_url=url, namespace="shop") as app:

        @app.handler("legacy.sync")
        def legacy(event: Event) -> None:
            raise Dead("the legacy system refused the record")

        app.schedule("legacy.sync", {"record": 7}, delay=0, key="sync-7")
        for n, delay in enumerate(["PT4M", "PT9M", "PT17M", "PT26M", "PT41M", "PT55M"]):
            subject = "user-1234" if n % 2 == 0 else f"user-{2000 + n}"
            app.schedule("followup.email", {"n": n}, delay=delay, key=f"followup-{n}",
                         subject=subject)  # fmt: skip
        app.tick()


def test_dashboard_shows_counts_and_replays_a_dead_timer(tmp_path: Path, page: Page) -> None:
    server = make_server(tmp_path)
    seed(server)
    server.start("--app", "handlers:app")
    try:
        with server.client() as client:
            for n in range(12):
                body = {"type": "followup.email", "key": f"welcome-{n}", "subject": "user-1234"}
                assert client.post("/v1/namespaces/shop/events", json=body).status_code == 201
            wait_for(lambda: len(server.fired()) == 12)

        page.goto(server.base_url)
        counts = page.locator("#counts")
        expect(counts.locator('[data-status="dead"] b')).to_have_text("1")
        expect(counts.locator('[data-status="scheduled"] b')).to_have_text("6")
        expect(counts.locator('[data-status="done"] b')).to_have_text("12")
        expect(page.locator("#next-due tbody tr")).to_have_count(6)
        expect(page.locator("#timeline .dot")).to_have_count(6)
        expect(page.locator("#lateness .bar")).to_have_count(20)
        expect(page.locator("#lateness-summary")).to_contain_text("12 attempts started")
        expect(page.locator("#nodes tbody tr")).to_have_count(2)
        expect(page.locator("#dead tbody tr")).to_contain_text("the legacy system refused")

        page.fill("#search", "user-1234")
        page.click("#search-form button")
        expect(page.locator("#results tbody tr")).to_have_count(15)
        page.locator("#results a", has_text="followup-0").click()
        expect(page.locator("#detail")).to_contain_text("followup.email")

        if os.environ.get("DUETIME_SCREENSHOT"):
            page.screenshot(path=str(SCREENSHOT), full_page=True)

        page.click('#dead button.replay[data-key="sync-7"]')
        expect(page.locator("#notice")).to_contain_text("Replayed sync-7: scheduled")
        expect(counts.locator('[data-status="dead"] b')).to_have_text("0")
        expect(counts.locator('[data-status="scheduled"] b')).to_have_text("7")
        expect(page.locator("#dead tbody")).to_contain_text("No dead letters.")
        with server.client() as client:
            timer = client.get("/v1/namespaces/shop/timers/sync-7").json()["timer"]
            assert timer["status"] == "scheduled"
    finally:
        assert server.stop() == 0, server.log()


def test_with_auth_on_the_dashboard_asks_for_a_token_and_keeps_it(
    tmp_path: Path, page: Page
) -> None:
    server = make_server(tmp_path)
    token = server.create_token("alpha")
    server.create_token("beta")
    server.start("--no-worker")
    try:
        with server.client(token) as client:
            body = {"type": "x", "key": "a-1", "delay": "PT1H"}
            assert client.post("/v1/namespaces/alpha/timers", json=body).status_code == 201
        page.goto(server.base_url)
        expect(page.locator("#token-form")).to_be_visible()
        expect(page.locator("#notice")).to_contain_text("requires a bearer token")
        page.fill("#token", token)
        page.click("#token-form button[type=submit]")
        expect(page.locator("#counts [data-status='scheduled'] b")).to_have_text("1")
        expect(page.locator("#namespace option")).to_have_text(["alpha"])  # beta stays hidden
        assert page.evaluate("localStorage.getItem('duetime.token')") == token
        page.reload()
        expect(page.locator("#counts [data-status='scheduled'] b")).to_have_text("1")
        page.click("#forget-token")
        expect(page.locator("#notice")).to_contain_text("requires a bearer token")
        assert page.evaluate("localStorage.getItem('duetime.token')") is None
    finally:
        assert server.stop() == 0, server.log()
