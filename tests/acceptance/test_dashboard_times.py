# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""Instants shown whole in a real headless Chromium against ``duetime serve``: the due column and
an attempt's claimed, started and finished columns are never clipped (attempts to the
millisecond), each says the reader's own zone on hover, and errors and tracebacks wrap at word
boundaries, never inside a word."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from duetime import App, Event

from .test_dashboard import (  # noqa: F401 - fixtures
    Console,
    browser,
    console,
    servers,
    stored,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server

ZONE = "America/New_York"
SECONDS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
MILLISECONDS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$")

WORDS_SPLIT = """cell => {
    // The words of the cell's text (a hyphen ends one) whose letters stand on two lines.
    const split = [];
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const word of node.data.matchAll(/[^\\s-]+/g)) {
            const range = document.createRange();
            range.setStart(node, word.index);
            range.setEnd(node, word.index + word[0].length);
            const tops = new Set([...range.getClientRects()].filter(r => r.width > 0)
                .map(r => Math.round(r.top)));
            if (tops.size > 1) split.push(word[0]);
        }
    }
    return split;
}"""


def _wordy(event: Event) -> None:
    accounts = " ".join(f"account-{n} LedgerUnavailableException" for n in range(30))
    raise RuntimeError(f"the ledger answered for {accounts}")


@pytest.fixture(params=[1280, 1920])
def wide_page(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(
        viewport={"width": request.param, "height": 1000}, timezone_id=ZONE
    )
    page = context.new_page()
    yield page
    context.close()


def whole(cells: Locator) -> None:
    """No cell's text is cut off: what it holds fits what it shows."""
    clipped = cells.evaluate_all(
        "cells => cells.filter(c => c.scrollWidth > c.clientWidth).map(c => c.textContent)"
    )
    assert clipped == []


def in_zone(iso: str, ms: bool) -> str:
    at = datetime.fromisoformat(iso).astimezone(ZoneInfo(ZONE))
    offset = at.utcoffset()
    assert offset is not None
    hours = int(offset.total_seconds() // 3600)
    text = at.strftime("%Y-%m-%d %H:%M:%S") + (f".{at.microsecond // 1000:03d}" if ms else "")
    return f"{text} {ZONE} (GMT{hours:+d})"


def test_the_due_column_shows_each_instant_whole_with_the_readers_zone(
    console: Console, wide_page: Page
) -> None:
    page = wide_page
    page.goto(console.url("timers"))
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(50)
    due = page.locator("#timers tbody td.instant")
    expect(due).to_have_count(50)
    assert all(SECONDS.match(text) for text in due.all_inner_texts())
    whole(due)
    with console.client() as client:
        timer = client.get(f"{console.api}/timers/followup-0").json()["timer"]
    cell = page.locator('#timers tr[data-key="followup-0"] td.instant')
    title = cell.get_attribute("title") or ""
    assert title.startswith(f"{timer['due_at'][:19].replace('T', ' ')} UTC\n"), title
    assert f"\n{in_zone(timer['due_at'], ms=False)}, your zone\n" in title, title
    assert title.endswith(("min", "s")), title  # how far off: "in 3.9 min"


def test_attempts_show_instants_to_the_millisecond_and_errors_wrap_by_word(
    console: Console, wide_page: Page
) -> None:
    page = wide_page
    with App(database_url=console.database_url, namespace=console.namespace) as app:
        app.handler("ledger.post")(_wordy)
        app.schedule("ledger.post", {}, delay=0, key="wordy", max_attempts=1)
        app.tick()
    page.goto(console.url("timer/wordy"))
    attempt = page.locator("#attempts tbody tr.attempt")
    expect(attempt).to_have_count(1)
    instants = attempt.locator("td.instant")
    expect(instants).to_have_count(3)
    whole(instants)
    with console.client() as client:
        (stored_attempt,) = client.get(f"{console.api}/timers/wordy").json()["attempts"]
    for cell, name in zip(instants.all(), ("claimed_at", "started_at", "finished_at"), strict=True):
        iso = stored_attempt[name]
        expect(cell).to_have_text(MILLISECONDS)
        assert cell.inner_text() == f"{iso[:10]} {iso[11:23]}"
        assert in_zone(iso, ms=True) in (cell.get_attribute("title") or "")
    fired = page.locator("#timer-fields dt:text-is('fired') + dd")
    with console.client() as client:
        timer = client.get(f"{console.api}/timers/wordy").json()["timer"]
    expect(fired).to_have_attribute(
        "title", re.compile(re.escape(in_zone(timer["fired_at"], ms=True)))
    )
    error = attempt.locator("td.error")
    height = error.evaluate("cell => cell.getBoundingClientRect().height")
    line = error.evaluate("cell => parseFloat(getComputedStyle(cell).lineHeight)")
    assert height > 2 * line  # wrapped over lines...
    assert error.evaluate(WORDS_SPLIT) == []  # ...between words
    traceback = page.locator("#attempts tr.traceback pre")
    expect(traceback).to_contain_text("account-29 LedgerUnavailableException")
    assert traceback.evaluate("pre => pre.scrollWidth <= pre.clientWidth")  # no sideways scroll
    assert traceback.evaluate(WORDS_SPLIT) == []
