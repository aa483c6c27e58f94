"""The console's delete buttons and its Audit view in a real headless Chromium against
``duetime serve`` on each store: each delete is confirmed in the dialog, its effect read back
from the database, and the Audit view shows who did it (``local``: this server has no auth)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from duetime import Status
from duetime.errors import NotFound

from .test_dashboard import (
    Console,
    any_console,
    browser,
    confirm,
    page,
    screenshot,
    servers,
    stored,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server

__all__ = ["any_console", "browser", "page", "servers"]  # the fixtures, used by name


def test_delete_dead_letters_one_and_in_bulk_then_read_the_audit_log(
    any_console: Console, page: Page
) -> None:
    console = any_console
    page.goto(console.url("timer/followup-0"))
    expect(page.locator("#act-cancel")).to_be_visible()
    expect(page.locator("#act-delete")).to_have_count(0)  # pending: cancel, never delete

    page.goto(console.url("timer/sync-3"))
    expect(page.locator("#act-replay")).to_be_visible()
    page.click("#act-delete")
    confirm(page, "Delete sync-3?", yes=False)  # changed one's mind: still there
    with stored(console) as app:
        assert app.get("sync-3").status is Status.DEAD
    page.click("#act-delete")
    confirm(page, "its key may be scheduled again")
    expect(page.locator("#notice")).to_be_visible()  # on the list it leads to, in sight
    expect(page.locator("#notice")).to_contain_text("sync-3 deleted")
    expect(page).to_have_url(console.url("timers?status=dead"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    with stored(console) as app, pytest.raises(NotFound):
        app.get("sync-3")

    page.goto(console.url())
    page.locator('#dead-types tr[data-type="legacy.sync"] [data-delete]').click()
    confirm(
        page,
        "59 finished (done, dead, cancelled or expired) timers match"
        " (status dead, type legacy.sync)",
    )
    expect(page.locator("#notice")).to_contain_text("59 timers deleted")
    expect(page.locator('#counts [data-status="dead"] b')).to_have_text("0")
    with stored(console) as app:
        counts = app.timers.counts()
        assert (counts[Status.DEAD], counts[Status.SCHEDULED]) == (0, 6)
        assert app.timers.history(status="dead").items == []

    page.click('.tabs a[data-view="audit"]')
    rows = page.locator("#audit tbody tr[data-id]")
    expect(rows).to_have_count(2)
    newest, first = rows.nth(0), rows.nth(1)
    expect(newest).to_have_attribute("data-action", "bulk_delete")
    expect(newest).to_contain_text("api:anonymous")
    expect(newest).to_contain_text("console")
    expect(newest.locator("td").nth(4)).to_have_text("59")
    expect(newest).to_contain_text("status=dead type=legacy.sync")
    expect(first).to_have_attribute("data-action", "delete")
    expect(first).to_contain_text("key sync-3")
    screenshot(page, "audit")
    with stored(console) as app:  # the view shows what the database keeps
        entries = app.audit.log().items
        assert [(e.action, e.actor, e.via, e.count) for e in entries] == [
            ("bulk_delete", "api:anonymous", "console", 59),
            ("delete", "api:anonymous", "console", 1),
        ]
