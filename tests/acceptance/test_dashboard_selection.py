# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""Selecting timers as in a mail client, in a real headless Chromium against ``duetime serve``:
the header's box ticks the page (every time), a shift-click ticks a range, the count shows, the
selection widens to every timer the filter takes, and every bulk action the API has acts on it
after a confirmation that states the number. Every effect is read back from the database."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from duetime import Status
from duetime.errors import NotFound

from .test_dashboard import (  # noqa: F401 - fixtures
    Console,
    any_console,
    browser,
    confirm,
    console,
    page,
    servers,
    stored,
)
from .test_dashboard_acting import shot

pytestmark = pytest.mark.slow  # a real Chromium against a real server


def ticked(page: Page) -> list[str]:
    return page.locator("#timers tbody [data-pick]:checked").evaluate_all(
        "boxes => boxes.map(b => b.dataset.pick)"
    )


def test_the_header_box_ticks_the_page_every_time_and_boxes_are_visible(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timers?status=dead"))
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(50)
    box = page.locator('[data-pick="sync-40"]').bounding_box()
    cell = page.locator('#timers tr[data-key="sync-40"] td.pick').bounding_box()
    assert box is not None
    assert cell is not None
    assert 12 <= box["width"] <= 24, box  # drawn, unticked too, inside its column
    assert box["height"] >= 12, box
    assert cell["x"] <= box["x"]
    assert box["x"] + box["width"] <= cell["x"] + cell["width"]
    count = page.locator("#selection-count")
    expect(count).to_have_text("No row selected")
    for _ in range(2):  # twice in a row: the whole page each time
        page.check("#pick-all")
        expect(count).to_have_text("50 selected")
        assert len(ticked(page)) == 50
        page.uncheck("#pick-all")
        expect(count).to_have_text("No row selected")
        assert ticked(page) == []


def test_a_shift_click_ticks_the_range_and_another_unticks_it(console: Console, page: Page) -> None:
    page.goto(console.url("timers?status=dead"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    page.click('[data-pick="sync-57"]')
    page.click('[data-pick="sync-50"]', modifiers=["Shift"])
    expect(page.locator("#selection-count")).to_have_text("8 selected")
    assert ticked(page) == [f"sync-{n}" for n in range(57, 49, -1)]
    expect(page.locator("#pick-all")).to_have_js_property("indeterminate", True)
    page.click('[data-pick="sync-55"]', modifiers=["Shift"])  # unticks 50..55 from the anchor
    expect(page.locator("#selection-count")).to_have_text("2 selected")
    assert ticked(page) == ["sync-57", "sync-56"]
    page.click("#selection-clear")
    expect(page.locator("#selection-count")).to_have_text("No row selected")
    assert ticked(page) == []


def test_selected_rows_are_deleted_after_confirming_their_number(
    any_console: Console, page: Page
) -> None:
    console = any_console
    page.goto(console.url("timers?status=dead"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    page.click('[data-pick="sync-59"]')
    page.click('[data-pick="sync-57"]', modifiers=["Shift"])
    expect(page.locator("#selection-count")).to_have_text("3 selected")
    page.click("[data-selected=delete]")
    confirm(page, "3 of the 3 selected timers are finished (done, dead, cancelled or expired)")
    expect(page.locator("#notice")).to_contain_text("3 selected timers deleted")
    expect(page.locator('#timers tr[data-key="sync-59"]')).to_have_count(0)  # the list read again
    first = page.locator("#timers tbody tr[data-key]").first
    expect(first).to_have_attribute("data-key", "sync-56")
    expect(page.locator("#selection-count")).to_have_text("No row selected")
    with stored(console) as app:
        assert app.timers.counts()[Status.DEAD] == 57
        for key in ("sync-59", "sync-58", "sync-57"):
            with pytest.raises(NotFound):
                app.timers.get(key)
        assert app.timers.get("sync-56").status is Status.DEAD


def test_the_rows_an_action_changed_show_their_new_status(console: Console, page: Page) -> None:
    page.goto(console.url("timers?type=followup.*"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(6)
    page.click('[data-pick="followup-1"]')
    page.click('[data-pick="followup-2"]')
    page.click("[data-selected=cancel]")
    confirm(page, "2 of the 2 selected timers are scheduled or retrying — cancel them?")
    expect(page.locator("#notice")).to_contain_text("2 selected timers cancelled")
    for key in ("followup-1", "followup-2"):
        row = page.locator(f'#timers tr[data-key="{key}"]')
        expect(row.locator(".pill")).to_have_text("cancelled")
        expect(row).to_have_class("changed")
        expect(row.locator(".was")).to_have_text("was scheduled")
    expect(page.locator('#timers tr[data-key="followup-0"]')).not_to_have_class("changed")
    with stored(console) as app:
        assert app.timers.get("followup-1").status is Status.CANCELLED
        assert app.timers.get("followup-0").status is Status.SCHEDULED


def test_the_page_widens_to_every_timer_the_filter_takes(console: Console, page: Page) -> None:
    page.goto(console.url("timers?status=dead"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    widen = page.locator("#selection-widen")
    expect(widen).to_be_hidden()
    page.check("#pick-all")
    expect(widen).to_have_text("Select every timer this filter takes, not only these 50")
    shot(page, "selection")
    widen.click()
    expect(page.locator("#selection-count")).to_have_text(
        "Every timer this filter takes is selected"
    )
    replay = page.locator("[data-selected=replay]")
    expect(replay).to_have_text("Replay 60 dead…")  # counted by the server: all 60, not 50
    expect(page.locator("[data-selected=cancel]")).to_have_text("Cancel 0 pending…")
    replay.click()
    confirm(page, "60 dead timers match (status dead) — replay them?")
    expect(page.locator("#notice")).to_contain_text("60 timers replayed")
    expect(page.locator("#timers tbody")).to_contain_text("No timer matches this filter")
    with stored(console) as app:
        assert app.timers.counts()[Status.DEAD] == 0


def test_unticking_a_row_narrows_a_widened_selection_to_the_page(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timers?status=dead"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    page.check("#pick-all")
    page.click("#selection-widen")
    expect(page.locator("[data-selected=replay]")).to_have_text("Replay 60 dead…")
    page.click('[data-pick="sync-30"]')
    expect(page.locator("#selection-count")).to_have_text("49 selected")
    expect(page.locator("[data-selected=replay]")).to_have_text("Replay selected…")
