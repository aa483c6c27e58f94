# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console's finding, steering and acting controls in a real headless Chromium against
``duetime serve``; every effect is read back from the database. With ``DUETIME_SCREENSHOT``
set, the new views are saved as ``docs/dashboard-*.png`` in light and dark."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from duetime import Status

from .test_dashboard import (  # noqa: F401 - fixtures
    DOCS,
    Console,
    any_console,
    browser,
    confirm,
    console,
    page,
    servers,
    stored,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server


def shot(page: Page, name: str) -> None:
    """The view in sight (not the whole page: each picture stays under 200 KB)."""
    if os.environ.get("DUETIME_SCREENSHOT"):
        page.screenshot(path=str(DOCS / f"dashboard-{name}.png"))


def shot_charts(page: Page, name: str) -> None:
    """The chart controls and both charts, at the top of the view."""
    if os.environ.get("DUETIME_SCREENSHOT"):
        page.locator("#chart-controls").evaluate("node => node.scrollIntoView()")
        page.screenshot(path=str(DOCS / f"dashboard-{name}.png"))


def test_rows_selected_one_by_one_are_replayed_and_nothing_else(
    any_console: Console, page: Page
) -> None:
    page.goto(any_console.url("timers?status=dead"))
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(50)
    expect(page.locator("[data-selected=replay]")).to_be_disabled()
    for key in ("sync-59", "sync-57", "sync-12"):
        page.check(f'[data-pick="{key}"]')
    expect(page.locator("#selection-count")).to_have_text("3 selected")
    shot(page, "selection")
    page.click("[data-selected=replay]")
    confirm(page, "3 of the 3 selected timers are dead — replay them?")
    expect(page.locator("#notice")).to_contain_text("3 selected timers replayed")
    expect(rows).to_have_count(50)  # 57 dead left, a page of them
    with stored(any_console) as app:
        assert app.timers.counts()[Status.DEAD] == 57
        for key in ("sync-59", "sync-57", "sync-12"):
            assert app.get(key).status is Status.SCHEDULED
        assert app.get("sync-58").status is Status.DEAD


def test_payload_search_sort_and_type_suggestions(console: Console, page: Page) -> None:
    with stored(console) as app:
        app.schedule("order.paid", {"customer": {"id": 42}}, delay="PT3H", key="o-42")
        app.schedule("order.paid", {"customer": {"id": "42"}}, delay="PT1H", key="o-text")
        app.schedule("order.refunded", {"customer": {"id": 7}}, delay="PT2H", key="o-7")
    page.goto(console.url("timers"))
    expect(page.locator("#f-type")).to_be_visible()  # the view is shown once the page has loaded
    page.focus("#f-type")
    page.keyboard.type("ord")
    options = page.locator("#type-suggestions option")
    expect(options).to_have_count(2)
    assert options.evaluate_all("os => os.map(o => o.value)") == ["order.paid", "order.refunded"]
    page.fill("#f-type", "order.*")
    page.fill("#f-payload", "customer.id=42")
    page.click("#filter button[type=submit]")
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(1)  # the number, not the text "42"
    expect(rows.first).to_have_attribute("data-key", "o-42")
    page.fill("#f-payload", "")
    page.select_option("#f-sort", "due")
    page.click("#filter button[type=submit]")
    expect(rows).to_have_count(3)
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.key)") == ["o-text", "o-7", "o-42"]
    page.fill("#f-payload", "customer..id=1")
    page.click("#filter button[type=submit]")
    expect(page.locator("#notice")).to_contain_text("payload:")


def test_type_suggestions_follow_the_namespace_chosen(console: Console, page: Page) -> None:
    """A type field that still holds its prefix after another namespace is chosen suggests that
    namespace's types, not the ones shown before."""
    with stored(console) as app:
        app.schedule("order.paid", {}, delay="PT1H", key="o-1")
        app.schedule("order.refunded", {}, delay="PT1H", key="o-2")
    stock = f"{console.namespace}-stock"  # another namespace, this test's too
    with stored(console, stock) as app:
        app.schedule("order.restocked", {}, delay="PT1H", key="r-1")
    page.goto(console.url())
    type_input = page.locator("#c-type")  # the charts' type: it keeps its text across namespaces
    expect(type_input).to_be_visible()
    options = page.locator("#type-suggestions option")
    type_input.press_sequentially("ord")
    expect(options).to_have_count(2)
    page.focus("#namespace")  # as a user does: the choice is made in the select, then back
    page.select_option("#namespace", stock)
    expect(type_input).to_have_value("ord")
    type_input.focus()
    expect(options).to_have_count(1)
    assert options.evaluate_all("os => os.map(o => o.value)") == ["order.restocked"]


def test_charts_follow_range_type_and_node_and_draw_percentiles(
    console: Console, page: Page
) -> None:
    page.goto(console.url())
    expect(page.locator("#throughput-summary")).to_contain_text("60 fired in the last hour")
    expect(page.locator("#lateness polyline.line.p99, #lateness circle.dot.p99")).not_to_have_count(
        0
    )
    page.select_option("#c-range", "7d")
    expect(page.locator("#throughput-summary")).to_contain_text("60 fired in the last 7 days")
    expect(page.locator("#throughput-caption")).to_contain_text("per hour")
    page.select_option("#c-range", "1h")
    expect(page.locator("#throughput-caption")).to_contain_text("per minute")
    shot_charts(page, "charts")
    page.select_option("#c-range", "7d")
    expect(page.locator("#throughput-caption")).to_contain_text("per hour")
    page.fill("#c-type", "followup.*")
    page.click("#chart-controls button[type=submit]")
    expect(page.locator("#throughput-summary")).to_contain_text("Nothing fired")
    page.fill("#c-type", "legacy.*")
    page.fill("#c-node", "no-such-node")
    page.click("#chart-controls button[type=submit]")
    expect(page.locator("#throughput-summary")).to_contain_text("node no-such-node")
    expect(page.locator("#throughput-summary")).to_contain_text("Nothing fired")


def changes_heard(page: Page) -> int:
    return int(page.locator("#live").get_attribute("data-changes") or 0)


def heard_after(page: Page, changes: int) -> None:
    """Wait until the page's live feed has heard a change beyond ``changes`` (the page's
    policy forbids evaluating code in it, so its counter is read from here)."""
    deadline = time.monotonic() + 20
    while changes_heard(page) <= changes:
        assert time.monotonic() < deadline, "the live feed heard no change"
        page.wait_for_timeout(50)


def test_live_refresh_pauses_by_hand_and_while_the_tab_is_hidden(
    console: Console, page: Page
) -> None:
    page.goto(console.url())
    scheduled = page.locator('#counts [data-status="scheduled"] b')
    expect(scheduled).to_have_text("6")
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    page.click("#live-pause")
    expect(page.locator("#live")).to_have_attribute("data-state", "paused")
    changes = changes_heard(page)
    with stored(console) as app:
        app.schedule("followup.email", {"n": 90}, delay="PT2H", key="while-paused")
    heard_after(page, changes)
    expect(scheduled).to_have_text("6")  # heard, not shown
    page.click("#live-pause")
    expect(scheduled).to_have_text("7")  # resumed: read again at once
    page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {value: 'hidden', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    expect(page.locator("#live-text")).to_have_text("paused (tab hidden)")
    changes = changes_heard(page)
    with stored(console) as app:
        app.schedule("followup.email", {"n": 91}, delay="PT2H", key="while-hidden")
    heard_after(page, changes)
    expect(scheduled).to_have_text("7")
    page.evaluate("""() => {
        Object.defineProperty(document, 'visibilityState', {value: 'visible', configurable: true});
        document.dispatchEvent(new Event('visibilitychange'));
    }""")
    expect(scheduled).to_have_text("8")
    expect(page.locator("#live")).to_have_attribute("data-state", "on")


def test_dark_mode_follows_the_system_preference(console: Console, browser: Browser) -> None:
    for scheme, dark in (("dark", True), ("light", False)):
        context = browser.new_context(color_scheme=scheme, viewport={"width": 1280, "height": 1000})
        page = context.new_page()
        page.goto(console.url())
        expect(page.locator('#counts [data-status="dead"] b')).to_have_text("60")
        rgb = page.evaluate("getComputedStyle(document.querySelector('section')).backgroundColor")
        red, green, blue = (int(n) for n in rgb[rgb.index("(") + 1 : -1].split(",")[:3])
        assert (red + green + blue < 150) is dark, rgb
        if dark:
            shot(page, "overview-dark")
            expect(page.locator("#lateness polyline, #lateness circle")).not_to_have_count(0)
            shot_charts(page, "charts-dark")
            page.goto(console.url("timers?status=dead"))
            expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
            page.check('[data-pick="sync-59"]')
            shot(page, "selection-dark")
        context.close()


def test_a_notice_that_goes_by_itself_moves_nothing_under_the_pointer(
    console: Console, page: Page
) -> None:
    """An "updated" notice goes after a few seconds; the buttons below it stay where they
    were (a click aimed at "Edit…" as it went landed on whatever had moved up instead)."""
    page.clock.install()  # the notice's timer runs on this clock, moved on by the test
    page.goto(console.url("timer/followup-1"))
    page.click("#act-edit")
    page.fill("#e-payload", '{"n": 2}')
    page.click("#e-save")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("followup-1 updated")
    expect(page.locator("#timer-payload")).to_contain_text('"n": 2')  # the view read again
    edit = page.locator("#act-edit")
    expect(edit).to_be_visible()
    before = edit.bounding_box()
    page.clock.run_for(7_000)
    expect(notice).to_be_hidden()
    assert edit.bounding_box() == before
    page.click('.tabs a[data-view="timers"]')  # moving on closes the empty place up
    expect(page.locator("#timers tbody tr[data-key]").first).to_be_visible()
    box = notice.bounding_box()
    assert box is None or box["height"] == 0


def test_the_list_arriving_late_moves_no_form_under_the_pointer(
    console: Console, page: Page
) -> None:
    """The timers view's rows arrive after the view is shown; the new-timer form sits above
    them, so its "Schedule" button is where it was when the reader aimed at it."""
    held: list[Route] = []
    holding = True

    def hold(route: Route) -> None:
        if holding:
            held.append(route)
        else:
            route.continue_()

    page.route(f"**{console.api}/timers?*", hold)
    page.goto(console.url("timers"))
    create = page.locator("#n-create")
    expect(create).to_be_visible()
    page.wait_for_function("() => document.readyState === 'complete'")
    before = create.bounding_box()
    assert held, "the list was not asked for"
    holding = False
    for route in held:
        route.continue_()
    expect(page.locator("#timers tbody tr[data-key]").first).to_be_visible()
    assert create.bounding_box() == before


def test_edit_a_timer_create_one_and_run_a_schedules_next_occurrence(
    any_console: Console, page: Page
) -> None:
    console = any_console
    page.goto(console.url("timer/followup-1"))
    page.click("#act-edit")
    page.fill("#e-when", "2030-01-02T03:04:05Z")
    page.fill("#e-payload", '{"n": 1, "note": "moved"}')
    shot(page, "edit")
    page.click("#e-save")
    expect(page.locator("#notice")).to_contain_text("followup-1 updated")
    with stored(console) as app:
        timer = app.get("followup-1")
        assert timer.due_at == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
        assert timer.payload == {"n": 1, "note": "moved"}
        assert timer.subject == "user-1234"  # the rest stays
    page.click("#act-edit")
    page.fill("#e-payload", "{not json")
    page.click("#e-save")
    expect(page.locator("#edit-error")).to_contain_text("payload:")

    page.goto(console.url("timers"))
    page.fill("#n-type", "invoice.remind")
    page.fill("#n-when", "PT3H")
    page.fill("#n-key", "inv-7")
    page.fill("#n-payload", '{"invoice": 7}')
    page.click("#n-create")
    expect(page.locator("#notice")).to_contain_text("inv-7 scheduled")
    with stored(console) as app:
        created = app.get("inv-7")
        assert (created.type, created.payload) == ("invoice.remind", {"invoice": 7})
        assert created.due_at > datetime.now(UTC) + timedelta(hours=2, minutes=50)
    page.fill("#n-type", "invoice.remind")
    page.fill("#n-when", "soon")
    page.click("#n-create")
    expect(page.locator("#create-error")).to_contain_text("at:")

    page.goto(console.url("schedules"))
    row = page.locator('#schedules tr[data-name="daily-report"]')
    with stored(console) as app:
        before = app.schedules.get("daily-report").next_at
    assert before is not None
    row.locator("[data-run-next]").click()
    shot(page, "run-next")
    confirm(page, "runs now, once")
    expect(page.locator("#notice")).to_contain_text("made due now")
    with stored(console) as app:
        key = f"schedule:daily-report:{before.isoformat().replace('+00:00', 'Z')}"
        occurrence = app.get(key)
        assert occurrence.run_at < datetime.now(UTC) + timedelta(seconds=5)
        after = app.schedules.get("daily-report").next_at
        assert after is not None
        assert after - before == timedelta(days=1)
