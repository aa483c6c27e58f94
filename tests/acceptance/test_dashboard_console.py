# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console's reading aids in a real headless Chromium against ``duetime serve``: trimmed
tracebacks, what a read-only token is shown, schedules made and edited with a preview, the
theme switch, charts steered from the address, node handlers, error backoff and an edit form
that sees its timer fire."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Page, Route, expect

from duetime import Status
from duetime.bus.routes import HANDLER
from duetime.model import Subscription

from .test_api_serve import make_server
from .test_dashboard import (  # noqa: F401 - fixtures
    DOCS,
    Console,
    browser,
    console,
    page,
    seed,
    servers,
    stored,
)
from .test_dashboard_subscribers import register_node

pytestmark = pytest.mark.slow  # a real Chromium against a real server


def shot(page: Page, name: str) -> None:
    """With ``DUETIME_SCREENSHOT`` set, the view in sight as ``docs/dashboard-<name>.png``."""
    if os.environ.get("DUETIME_SCREENSHOT"):
        page.screenshot(path=str(DOCS / f"dashboard-{name}.png"))


def test_a_traceback_shows_the_handlers_frames_and_the_whole_one_is_a_click_away(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timer/sync-3"))
    traceback = page.locator("#attempts tr.traceback pre")
    expect(traceback).to_contain_text("RuntimeError: the legacy system refused record 3")
    expect(traceback).to_contain_text("frames folded]")
    expect(traceback).not_to_contain_text("executor.py")
    expect(traceback).to_contain_text(", in _refuse")
    shot(page, "timer")
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
        expect(page.locator("footer a[href='metrics']")).to_be_hidden()  # a token of one namespace
        expect(page.locator("#counts [data-status='dead'] b")).to_have_text("60")
        shot(page, "read-only")
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


def background(page: Page) -> str:
    color: str = page.evaluate(
        "getComputedStyle(document.querySelector('main section')).backgroundColor"
    )
    return color


def test_the_theme_follows_the_system_until_one_is_chosen_and_stays_chosen(
    console: Console, page: Page
) -> None:
    page.emulate_media(color_scheme="dark")
    page.goto(console.url())
    expect(page.locator("#counts [data-status='dead'] b")).to_have_text("60")
    expect(page.locator("#theme")).to_have_value("system")
    dark = background(page)
    page.select_option("#theme", "light")
    expect(page.locator("html")).to_have_attribute("data-theme", "light")
    light = background(page)
    assert light != dark
    page.reload()
    expect(page.locator("#theme")).to_have_value("light")
    assert background(page) == light
    page.emulate_media(color_scheme="light")
    page.select_option("#theme", "dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert background(page) == dark
    page.select_option("#theme", "system")
    assert background(page) == light
    assert page.evaluate("localStorage.getItem('duetime.theme')") == "system"


def test_the_charts_range_and_filters_live_in_the_address(console: Console, page: Page) -> None:
    page.goto(console.url())
    expect(page.locator("#throughput-summary")).to_contain_text("60 fired in the last hour")
    page.select_option("#c-range", "24h")
    expect(page).to_have_url(console.url("overview?range=24h"))
    page.fill("#c-type", "legacy.*")
    page.click("#chart-controls button[type=submit]")
    expect(page).to_have_url(console.url("overview?range=24h&type=legacy.*"))
    expect(page.locator("#throughput-summary")).to_contain_text(
        "60 fired in the last 24 hours, 60 of them dead now. (type legacy.*)"
    )
    page.reload()
    expect(page.locator("#c-range")).to_have_value("24h")
    expect(page.locator("#c-type")).to_have_value("legacy.*")
    expect(page.locator("#throughput-summary")).to_contain_text("(type legacy.*)")
    expect(page.locator("#throughput-caption")).to_contain_text("the last 24 hours")


def test_the_nodes_view_lists_each_nodes_handlers_and_routes_here(
    console: Console, page: Page
) -> None:
    register_node(
        console.database_url,
        Subscription(console.namespace, "legacy.sync", (HANDLER,)),
        Subscription(console.namespace, "order.*", ("billing-hook",)),
        Subscription("elsewhere", "secret.type", (HANDLER,)),
    )
    page.goto(console.url("nodes"))
    cell = page.locator("[data-handlers='test-node']")
    expect(cell).to_have_text("legacy.sync, order.* → billing-hook")
    shot(page, "nodes")


def test_a_refused_filter_is_told_in_a_sentence_not_a_pattern(console: Console, page: Page) -> None:
    page.goto(console.url("timers"))
    page.fill("#f-due-from", "last tuesday" * 80)
    page.click("#filter button[type=submit]")
    notice = page.locator("#notice")
    expect(notice).to_contain_text("due_from:")
    expect(notice).to_contain_text("is not valid here: give an ISO 8601 instant")
    text = notice.text_content() or ""
    assert len(text) < 300, text
    assert "(?:" not in text


def test_a_failing_read_is_retried_later_and_later_and_said_once(
    console: Console, page: Page
) -> None:
    failed: list[str] = []

    def refuse(route: Route) -> None:
        failed.append(route.request.url)
        route.fulfill(
            status=503,
            json={"code": "store_unavailable", "message": "the database does not answer"},
        )

    page.route("**/timers?*", refuse)
    page.goto(console.url("timers"))
    live = page.locator("#live")
    expect(live).to_have_attribute("data-retry", "2000")
    expect(page.locator("#notice")).to_have_text("the database does not answer")
    with stored(console) as app:  # changes the feed tells of: no read is sent for them
        for n in range(3):
            app.timers.schedule("noise", {}, delay="PT1H", key=f"noise-{n}")
    expect(live).to_have_attribute("data-retry", "8000", timeout=30_000)
    assert len(failed) == 3, failed
    page.unroute("**/timers?*", refuse)
    expect(page.locator("#timers tbody tr[data-key]")).not_to_have_count(0, timeout=30_000)
    expect(live).not_to_have_attribute("data-retry", re.compile(".*"))


def test_the_edit_form_says_so_when_its_timer_fires_meanwhile(console: Console, page: Page) -> None:
    page.goto(console.url("timer/followup-1"))
    page.click("#act-edit")
    expect(page.locator("#edit-form")).to_be_visible()
    page.fill("#e-payload", '{"n": 99}')
    with stored(console) as app:  # it becomes due and fires while the form is open
        app.handler("followup.email")(lambda event: None)
        app.timers.run_now("followup-1")
        app.tick()
        assert app.get("followup-1").status is Status.DONE
    stale = page.locator("#edit-stale")
    expect(stale).to_contain_text("followup-1 fired while this form was open: it is done now")
    expect(page.locator("#edit-form")).to_be_visible()
    expect(page.locator("#e-save")).to_be_disabled()
    expect(page.locator("#e-payload")).to_have_value('{"n": 99}')  # what was typed stays


def test_schedules_are_made_and_changed_with_a_live_preview_and_list_their_timers(
    console: Console, page: Page
) -> None:
    page.goto(console.url("schedules"))
    expect(page.locator("#schedules tbody")).to_contain_text("daily-report")
    page.fill("#s-name", "weekday-digest")
    page.fill("#s-type", "digest.send")
    page.fill("#s-timezone", "Europe/Berlin")
    page.fill("#s-rule", "61 9 * * 1-5")  # a bad minute: the API's sentence, no list
    described = page.locator("#s-described")
    expect(described).to_have_class("error")
    expect(described).to_contain_text("rule:")
    expect(page.locator("#s-next li")).to_have_count(0)
    page.fill("#s-rule", "0 9 * * 1-5")
    expect(page.locator("#s-next li")).to_have_count(5)
    expect(page.locator("#s-next li").first).to_contain_text("09:00:00+0")
    expect(described).to_have_class("muted")
    shot(page, "schedule-form")
    page.click("#s-save")
    expect(page.locator("#notice")).to_contain_text("Schedule weekday-digest created")
    expect(page.locator("#schedules tr[data-name='weekday-digest']")).to_be_visible()
    with stored(console) as app:
        made = app.schedules.get("weekday-digest")
        assert (made.cron, made.timezone, made.type) == (
            "0 9 * * 1-5",
            "Europe/Berlin",
            "digest.send",
        )

    page.click("[data-edit-schedule='daily-report']")  # a cron schedule becomes an interval
    expect(page.locator("#sf-title")).to_have_text("Edit daily-report")
    expect(page.locator("#s-rule")).to_have_value("0 9 * * *")
    page.select_option("#s-kind", "every")
    page.fill("#s-rule", "PT6H")
    expect(page.locator("#s-described")).to_contain_text("6")
    page.click("#s-save")
    expect(page.locator("#notice")).to_contain_text("Schedule daily-report saved")
    with stored(console) as app:
        changed = app.schedules.get("daily-report")
        assert (changed.cron, changed.every) == (None, timedelta(hours=6))

    page.fill("#s-name", "month-end")  # an RFC 5545 rule with a holiday calendar
    page.fill("#s-type", "books.close")
    page.select_option("#s-kind", "rrule")
    page.fill("#s-rule", "FREQ=MONTHLY;BYMONTHDAY=-1")
    page.fill("#s-dtstart", "2027-01-01T18:00")
    page.fill("#s-holidays", "DE-BE")
    page.select_option("#s-roll", "backward")
    expect(page.locator("#s-next li")).to_have_count(5)
    the_29th = "2027-01-29 18:00"  # the 31st is a Sunday, the 30th a Saturday
    expect(page.locator("#s-next li").first).to_contain_text(the_29th)
    page.click("#s-save")
    expect(page.locator("#notice")).to_contain_text("Schedule month-end created")
    with stored(console) as app:
        month_end = app.schedules.get("month-end").to_dict()
        assert (month_end["rrule"], month_end["holidays"], month_end["roll"]) == (
            "FREQ=MONTHLY;BYMONTHDAY=-1",
            "DE-BE",
            "backward",
        )
        app.tick()  # the schedules' occurrences are made into timers
    page.click("[data-schedule-timers='daily-report']")
    expect(page).to_have_url(console.url("timers?schedule=daily-report"))
    expect(page.locator("#f-schedule")).to_have_value("daily-report")
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).not_to_have_count(0)
    for key in rows.evaluate_all("rows => rows.map(r => r.dataset.key)"):
        assert key.startswith("schedule:daily-report:"), key
