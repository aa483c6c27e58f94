# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console for every reader, in a real headless Chromium against ``duetime serve``: axe-core
finds no serious or moderate violation on any view, in the light and the dark colour scheme,
and everything works from the keyboard (a skip link, a visible focus on every control, ``/``
for search, ``?`` for the shortcuts).

axe-core is the npm package's own script: the file ``DUETIME_TEST_AXE`` names, or the package
installed once with npm into ``~/.cache/duetime-tests``. Without npm the axe test is skipped
with the reason, except under CI (env ``CI`` set), where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from playwright.sync_api import Browser, Page, expect

from .test_dashboard import (  # noqa: F401 - fixtures
    DOCS,
    Console,
    browser,
    confirm,
    console,
    page,
    servers,
)

pytestmark = pytest.mark.slow  # a real Chromium against a real server

NODE_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "duetime-tests"
FAILING = ("critical", "serious", "moderate")
NPM_QUIET = ("--no-audit", "--no-fund")

RUN_AXE = """async () => {
    const found = await axe.run(document, {resultTypes: ["violations"]});
    return found.violations.map(v => ({
        id: v.id, impact: v.impact,
        nodes: v.nodes.slice(0, 3).map(n => n.target.join(" ") + ": " + n.failureSummary),
    }));
}"""


def _missing(reason: str) -> NoReturn:
    """Skip on a laptop without the tool; under CI a missing tool is a failure, never a skip."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (required under CI)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def axe() -> str:
    """axe-core's script, installed with npm on first use."""
    given = os.environ.get("DUETIME_TEST_AXE")
    script = Path(given) if given else NODE_CACHE / "node_modules" / "axe-core" / "axe.min.js"
    if not script.exists() and given is None:
        npm = shutil.which("npm")
        if npm is not None:
            subprocess.run(
                [npm, "install", "--prefix", str(NODE_CACHE), "axe-core@4", *NPM_QUIET],
                capture_output=True,
                check=False,
                timeout=300,
            )
    if not script.exists():
        _missing(f"axe-core is not installed (npm install axe-core, or set DUETIME_TEST_AXE to "
                 f"its axe.min.js): looked for {script}")  # fmt: skip
    return script.read_text("utf-8")


@pytest.fixture(params=["light", "dark"])
def scheme_page(request: pytest.FixtureRequest, browser: Browser) -> Iterator[Page]:
    context = browser.new_context(
        viewport={"width": 1280, "height": 1000}, color_scheme=request.param
    )
    page = context.new_page()
    yield page
    context.close()


def violations(page: Page, axe: str) -> list[dict[str, Any]]:
    """What axe-core finds on the page as it is, serious or moderate (or worse)."""
    if not page.evaluate("() => typeof axe !== 'undefined'"):
        page.evaluate(axe)
    found: list[dict[str, Any]] = page.evaluate(RUN_AXE)
    return [v for v in found if v["impact"] in FAILING]


def test_axe_finds_nothing_serious_or_moderate_on_any_view(
    console: Console, scheme_page: Page, axe: str
) -> None:
    page = scheme_page
    with console.client() as client:
        put = client.put(f"{console.api}/limits/email.*", json={"concurrency": 5})
        assert put.status_code == 200, put.text
    found: dict[str, list[dict[str, Any]]] = {}

    def check(state: str) -> None:
        found[state] = violations(page, axe)

    page.goto(console.url())
    expect(page.locator('#counts [data-status="dead"] b')).to_have_text("60")
    expect(page.locator("#next-due tbody tr")).to_have_count(6)
    check("overview")
    page.goto(console.url("timers?type=followup.*"))
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(6)
    page.click('[data-pick="followup-1"]')
    page.click("[data-selected=cancel]")
    expect(page.locator("#confirm")).to_be_visible()
    check("the confirmation")
    confirm(page, "1 of the 1 selected timers")
    expect(page.locator('#timers tr[data-key="followup-1"]')).to_have_class("changed")
    page.click('[data-pick="followup-2"]')
    check("timers, a row changed and one selected")
    page.goto(console.url("timers?status=dead"))
    expect(rows).to_have_count(50)
    check("timers")
    page.goto(console.url("timer/sync-59"))
    expect(page.locator("#attempts tr.traceback pre")).to_be_visible()
    check("a timer")
    page.goto(console.url("schedules"))
    page.locator('#schedules tr[data-name="daily-report"] button.link').click()
    expect(page.locator("#schedule-detail li")).to_have_count(5)
    check("schedules")
    page.goto(console.url("events"))
    expect(page.locator("#events tbody tr[data-key]")).not_to_have_count(0)
    check("event log")
    page.goto(console.url("limits"))
    expect(page.locator('#limits tr[data-pattern="email.*"]')).to_be_visible()
    check("flow control")
    page.goto(console.url("nodes"))
    expect(page.locator("#nodes tbody tr td.mono")).not_to_have_count(0)
    check("nodes")
    page.goto(console.url("audit"))
    expect(page.locator('#audit tr[data-action="bulk_cancel"]')).to_be_visible()
    check("audit")
    page.keyboard.press("?")
    expect(page.locator("#shortcuts")).to_be_visible()
    check("the shortcuts")
    assert {state: v for state, v in found.items() if v} == {}


def reach_every_control(page: Page) -> None:
    """Tab from the top of the page through every control shown, each once, each with a
    visible focus ring; the live refresh is paused first, so the controls stay the same."""
    if page.locator("#live").get_attribute("data-state") != "paused":
        page.click("#live-pause")
    expect(page.locator("#live")).to_have_attribute("data-state", "paused")
    wanted: int = page.evaluate("""() => {
        document.querySelectorAll('[data-reach]').forEach(e => { delete e.dataset.reach; });
        const controls = [...document.querySelectorAll(
            'a[href], button, input, select, textarea, summary, [tabindex]:not([tabindex="-1"])')]
            .filter(e => !e.disabled && e.getClientRects().length
                && getComputedStyle(e).visibility !== 'hidden' && !e.closest('dialog'));
        controls.forEach((e, i) => { e.dataset.reach = i; });
        return controls.length;
    }""")
    page.locator("#live-pause").blur()
    page.evaluate("() => window.scrollTo(0, 0)")
    reached: set[str] = set()
    unringed: list[str] = []
    for _ in range(2 * wanted + 10):  # from the control last clicked, round past the end
        if len(reached) == wanted:
            break
        page.keyboard.press("Tab")
        mark, ringed, what = page.evaluate("""() => {
            const e = document.activeElement;
            const style = getComputedStyle(e);
            return [e.dataset.reach ?? null, style.outlineStyle !== 'none'
                && parseFloat(style.outlineWidth) >= 2, e.outerHTML.slice(0, 80)];
        }""")
        if mark is None:
            continue
        reached.add(mark)
        if not ringed:
            unringed.append(what)
    missed = page.evaluate(
        "reached => [...document.querySelectorAll('[data-reach]')]"
        ".filter(e => !reached.includes(e.dataset.reach)).map(e => e.outerHTML.slice(0, 300))",
        sorted(reached),
    )
    assert missed == [], "\n".join(missed)
    assert unringed == []


def test_every_control_is_reached_by_tab_with_a_visible_focus(console: Console, page: Page) -> None:
    page.goto(console.url())
    expect(page.locator("#next-due tbody tr")).to_have_count(6)
    reach_every_control(page)
    page.goto(console.url("timers?type=followup.*"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(6)
    reach_every_control(page)
    page.goto(console.url("timers?status=dead"))
    error = page.locator('#timers tr[data-key="sync-59"] td.error')
    error.focus()
    page.keyboard.press("Enter")  # the cut error, whole from the keyboard
    expect(error).to_have_class(re.compile(r"\bwhole\b"))


def test_a_skip_link_slash_for_search_and_a_list_of_the_shortcuts(
    console: Console, page: Page
) -> None:
    page.goto(console.url())
    expect(page.locator("#next-due tbody tr")).to_have_count(6)
    expect(page.locator("h1")).to_have_text("duetime · Overview")
    page.keyboard.press("Tab")
    skip = page.locator("#skip-link")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#content")).to_be_focused()
    expect(page).to_have_url(console.url())  # the view stays: the link moved the focus only
    page.keyboard.press("/")
    expect(page.locator("#c-type")).to_be_focused()  # the overview's search: the charts' type
    page.keyboard.type("/x")  # typed into the field, not taken as a shortcut
    expect(page.locator("#c-type")).to_have_value("/x")

    page.goto(console.url("schedules"))
    expect(page).to_have_title("Schedules · duetime")
    page.locator("#content").focus()
    page.keyboard.press("/")  # no search here: the timers' filter
    expect(page.locator("#f-type")).to_be_focused()
    expect(page).to_have_url(console.url("timers"))

    page.locator("#content").focus()
    page.keyboard.press("?")
    shortcuts = page.locator("#shortcuts")
    expect(shortcuts).to_be_visible()
    expect(shortcuts).to_contain_text("Search: the view's filter")
    if os.environ.get("DUETIME_SCREENSHOT"):
        page.screenshot(path=str(DOCS / "dashboard-shortcuts.png"))
    page.keyboard.press("Escape")
    expect(shortcuts).to_be_hidden()
    page.click("#shortcuts-open")  # also from a button, for those who never press ?
    expect(shortcuts).to_be_visible()
    page.click("#shortcuts-close")
    expect(shortcuts).to_be_hidden()
