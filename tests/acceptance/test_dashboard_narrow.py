# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console on a 375 px phone screen, in a real headless Chromium against ``duetime serve``:
no view is wider than the screen, lists are cards that keep each timer's key in sight, and
forms stack."""

from __future__ import annotations

import os
import time

import pytest
from playwright.sync_api import Locator, Page, expect

from .test_dashboard import (  # noqa: F401 - fixtures
    DOCS,
    Console,
    browser,
    console,
    page,
    servers,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server

WIDTH = 375

# Each view, and what must be in sight on it: the key of its first timer where it lists timers.
VIEWS = {
    "overview": "#dead tbody tr[data-key] a",
    "timers": "#timers tbody tr[data-key] a",
    "timer/sync-59": "#timer-title .mono",
    "schedules": '#schedules tr[data-name="daily-report"] button.link',
    "events": "#events tbody tr[data-key] a",
    "limits": '#limits tr[data-pattern="email.*"] td',
    "nodes": "#nodes tbody tr td.mono",
    "audit": '#audit tbody tr[data-action="bulk_cancel"] td.target',
}


@pytest.fixture
def phone(page: Page) -> Page:
    """The module's page on a phone's screen."""
    page.set_viewport_size({"width": WIDTH, "height": 800})
    return page


def in_sight(item: Locator) -> None:
    """Shown, with a size, and whole within the screen's width. Measured in one step, until so
    or the wait is up: a live refresh may draw the rows anew meanwhile."""
    expect(item).to_be_visible()
    deadline = time.monotonic() + 15
    while True:
        x, width, height = item.evaluate(
            "node => { const r = node.getBoundingClientRect(); return [r.x, r.width, r.height]; }"
        )
        if (width > 0 and height > 0 and x >= 0 and x + width <= WIDTH) or (
            time.monotonic() > deadline
        ):
            break
        item.page.wait_for_timeout(50)
    assert width > 0, item
    assert height > 0, item
    assert x >= 0, item
    assert x + width <= WIDTH, (item, x, width)


def test_every_view_fits_a_375_px_screen_and_keeps_the_key_in_sight(
    console: Console, phone: Page
) -> None:
    with console.client() as client:
        put = client.put(f"{console.api}/limits/email.*", json={"concurrency": 5})
        assert put.status_code == 200, put.text
        body = {"action": "cancel", "filter": {"keys": ["followup-5"]}}
        bulk = client.post(f"{console.api}/timers/bulk", json=body)
        assert bulk.status_code == 200, bulk.text
    for view, key in VIEWS.items():
        phone.goto(console.url(view))
        first = phone.locator(key).first
        in_sight(first)
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= WIDTH, f"#{view} is {width} px wide"


def test_forms_stack_and_the_selection_works_on_a_phone(console: Console, phone: Page) -> None:
    phone.goto(console.url("timers?status=dead"))
    rows = phone.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(50)
    fields = phone.locator("#filter .field")
    lefts = {round(box["x"]) for box in (f.bounding_box() for f in fields.all()) if box}
    assert len(lefts) == 1, lefts  # one above the other
    for field in ("#n-type", "#n-payload", "#f-due-from", "#f-sort"):
        in_sight(phone.locator(field))
    in_sight(phone.locator("#pick-all"))
    phone.check("#pick-all")
    expect(phone.locator("#selection-count")).to_have_text("50 selected")
    for label in ("Type", "Status", "Due (UTC)"):  # each card names its fields
        in_sight(rows.first.locator(f'td[data-label="{label}"]'))
    if os.environ.get("DUETIME_SCREENSHOT"):
        phone.locator("#selection-bar").scroll_into_view_if_needed()
        phone.screenshot(path=str(DOCS / "dashboard-phone.png"))
    assert phone.evaluate("document.documentElement.scrollWidth") <= WIDTH
