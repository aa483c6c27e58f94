"""The console says when nobody would deliver a timer, and keeps its notices, filter errors and
cut cells readable; in headless Chromium against ``duetime serve``, as test_dashboard.py does
(Chromium missing: skipped there, and so here)."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect
from tests.waiting import wait_until

from duetime.bus.routes import HANDLER
from duetime.model import Node, Subscription
from duetime.store import create_store

from .test_dashboard import Console, any_console, browser, console, page, servers, stored

pytestmark = pytest.mark.slow  # a real Chromium against real servers and workers

__all__ = ["any_console", "browser", "console", "page", "servers"]  # the fixtures, shared


def register_node(url: str, *subscriptions: Subscription) -> None:
    """A live node (heartbeat now) with these subscriptions, as a worker registers itself."""

    async def register() -> None:
        store = create_store(url)
        await store.open(migrate=False)
        try:
            now = datetime.now(UTC)
            await store.register_node(
                Node("test-node", "host", 1, now, now, subscriptions=subscriptions)
            )
        finally:
            await store.close()

    with ThreadPoolExecutor(1) as thread:  # Playwright's own loop runs on this one
        thread.submit(asyncio.run, register()).result()


def test_a_timer_nobody_would_deliver_says_so_on_its_page_and_in_the_overview(
    any_console: Console, page: Page
) -> None:
    console = any_console
    page.goto(console.url("timer/followup-0"))  # no worker runs: nobody takes it
    warning = page.locator("#timer-unsubscribed")
    expect(warning).to_be_visible()
    expect(warning).to_contain_text("no subscriber for followup.email")
    expect(warning.locator("code")).to_have_text("followup.email")
    page.goto(console.url("timer/sync-0"))  # dead: it waits for nothing
    expect(page.locator("#timer-title")).to_contain_text("dead")
    expect(warning).to_be_hidden()

    page.goto(console.url())
    waiting = page.locator('#unsubscribed tr[data-type="followup.email"]')
    expect(waiting).to_contain_text("6")
    expect(page.locator('#unsubscribed tr[data-type="legacy.sync"]')).to_have_count(0)
    waiting.locator("a").click()
    expect(page).to_have_url(console.url("timers?type=followup.email"))

    url = console.database_url
    register_node(url, Subscription(console.namespace, "followup.*", (HANDLER,)))
    # The server reads the nodes table at most once a second (NODES_TTL): the page can only
    # show the node once the API answers with it, which may be a moment after it registered.
    with console.client() as client:
        timer = f"{console.api}/timers/followup-0"
        wait_until(
            lambda: client.get(timer).json()["timer"]["subscribers"] == 1,
            10,
            "the API to count the node that just registered as a subscriber of followup-0",
        )
    page.goto(console.url("timer/followup-0"))
    expect(page.locator("#timer-fields")).to_contain_text("followup.email")
    expect(warning).to_be_hidden()
    page.goto(console.url())
    expect(page.locator("#counts [data-status='scheduled'] b")).to_have_text("6")
    expect(page.locator('#unsubscribed tr[data-type="followup.email"]')).to_have_count(0)


def test_a_notice_stays_in_the_view_it_was_given_in(console: Console, page: Page) -> None:
    page.goto(console.url("schedules"))
    page.locator('#schedules tr[data-name="daily-report"] [data-pause]').click()
    notice = page.locator("#notice")
    expect(notice).to_contain_text("Schedule daily-report paused.")
    page.click('.tabs a[data-view="timers"]')
    expect(page.locator("#timers tbody tr[data-key]").first).to_be_visible()
    expect(notice).to_be_hidden()


def test_a_bad_filter_names_its_field_once(console: Console, page: Page) -> None:
    page.goto(console.url("timers"))
    notice = page.locator("#notice")
    page.fill("#f-type", "not a type")
    page.click("#filter button[type=submit]")
    expect(notice).to_contain_text("type: ")
    assert "type: type:" not in notice.inner_text()


def test_the_cut_due_and_error_cells_show_whole_on_hover_and_click(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timers?status=dead"))
    row = page.locator('#timers tbody tr[data-key="sync-59"]')
    due, error = row.locator("td").nth(5), row.locator("td").nth(7)  # after the row's checkbox
    with stored(console) as app:
        timer = app.get("sync-59")
    assert timer.last_error is not None
    shown_due = timer.due_at.strftime("%Y-%m-%d %H:%M:%S")
    expect(due).to_have_attribute("title", re.compile(rf"^{shown_due} UTC\n.*, your zone\n.* ago$"))
    expect(error).to_have_attribute("title", timer.last_error)
    page.set_viewport_size({"width": 1000, "height": 900})  # narrower: the error is cut
    cut = error.evaluate("cell => cell.scrollWidth > cell.clientWidth")
    assert cut, "the error cell was expected to be cut at this width"
    error.click()
    expect(error).to_have_class(re.compile(r"\bwhole\b"))
    assert error.evaluate("cell => cell.scrollWidth <= cell.clientWidth + 1")
    due.click()
    assert due.evaluate("cell => cell.scrollWidth <= cell.clientWidth + 1")
