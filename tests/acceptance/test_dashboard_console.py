# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console's reading aids in a real headless Chromium against ``duetime serve``: trimmed
tracebacks, what a read-only token is shown, schedules made and edited with a preview, the
theme switch, charts steered from the address, node handlers, error backoff and an edit form
that sees its timer fire."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect

from .test_api_serve import make_server
from .test_dashboard import (  # noqa: F401 - fixtures
    Console,
    browser,
    console,
    page,
    seed,
    servers,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server


def test_a_traceback_shows_the_handlers_frames_and_the_whole_one_is_a_click_away(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timer/sync-3"))
    traceback = page.locator("#attempts tr.traceback pre")
    expect(traceback).to_contain_text("RuntimeError: the legacy system refused record 3")
    expect(traceback).to_contain_text("frames folded]")
    expect(traceback).not_to_contain_text("executor.py")
    expect(traceback).to_contain_text(", in _refuse")
    page.click("[data-full-traceback='1']")
    expect(traceback).to_contain_text("executor.py")
    expect(traceback).to_contain_text(", in _refuse")
    page.click("[data-full-traceback='1']")
    expect(traceback).not_to_contain_text("executor.py")


WRITE_WORDS = re.compile(
    r"\b(replay|delete|cancel|run|retry|pause|resume|edit|remove|set|schedule|save|create|new)\b",
    re.IGNORECASE,
)
LOADED = {
    "overview": ("#counts [data-status='dead'] b", "60"),
    "timers?status=dead": ("#timers-shown", "50 shown"),
    "timer/sync-3": ("#timer-title", "dead"),
    "timer/followup-1": ("#timer-title", "scheduled"),
    "schedules": ("#schedules tbody", "daily-report"),
    "limits": ("#limits tbody", "email.*"),
    "events": ("#events tbody", "sync-59"),
    "nodes": ("#nodes tbody", ""),
    "audit": ("#audit tbody", "limit"),
}


def visible_controls(page: Page) -> list[str]:
    """The text of every control in sight but the live feed's own pause."""
    found: list[str] = page.locator(
        "button:visible:not(#live-pause), textarea:visible, input[type=checkbox]:visible"
    ).evaluate_all("nodes => nodes.map(n => n.textContent.trim() || n.outerHTML)")
    return found


def test_a_read_only_token_is_shown_no_control_that_writes(tmp_path: Path, page: Page) -> None:
    server = make_server(tmp_path)
    writer = server.issue_token("alpha", name="ops").secret
    reader = server.issue_token("alpha", read_only=True, name="viewer").secret
    seed(server.env["DUETIME_DATABASE_URL"], "alpha")
    server.start("--no-worker")
    try:
        with server.client(writer) as client:
            limit = client.put("/v1/namespaces/alpha/limits/email.*", json={"concurrency": 2})
            assert limit.status_code == 200, limit.text
        page.goto(server.base_url)
        page.fill("#token", reader)
        page.click("#token-form button[type=submit]")
        expect(page.locator("#whoami")).to_have_text("viewer · read only")
        for view, (where, text) in LOADED.items():
            page.goto(f"{server.base_url}/#{view}")
            expect(page.locator(where)).to_contain_text(text)
            shown = visible_controls(page)
            assert not [c for c in shown if WRITE_WORDS.search(c)], (view, shown)
        page.goto(f"{server.base_url}/#overview")  # the same page with a token that writes
        page.fill("#token", writer)
        page.click("#token-form button[type=submit]")
        expect(page.locator("#whoami")).to_have_text("ops · read and write")
        expect(page.locator("#dead-replay-all")).to_be_visible()
        page.goto(f"{server.base_url}/#timer/sync-3")
        expect(page.locator("#act-replay")).to_be_visible()
    finally:
        assert server.stop() == 0, server.log()


def test_the_overview_draws_its_lists_while_the_counts_are_still_counted(
    console: Console, page: Page
) -> None:
    held: list[Route] = []

    def hold(route: Route) -> None:  # the counting answers only when let go
        held.append(route)

    page.route("**/counts", hold)
    page.goto(console.url())
    expect(page.locator("#dead tbody tr")).to_have_count(10)
    expect(page.locator("#next-due tbody tr")).to_have_count(6)
    expect(page.locator("#dead-types tr[data-type='legacy.sync']")).to_contain_text("60")
    dead = page.locator("#counts [data-status='dead']")
    expect(dead.locator("b")).to_have_text("…")
    expect(dead).to_have_attribute("aria-busy", "true")
    assert len(held) == 1
    held[0].continue_()
    page.unroute("**/counts", hold)
    expect(dead.locator("b")).to_have_text("60")
    expect(dead).not_to_have_attribute("aria-busy", "true")
