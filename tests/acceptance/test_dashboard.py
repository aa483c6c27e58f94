"""The operations console in a real headless Chromium against ``duetime serve``: every action
is clicked, confirmed in the dialog, and its effect read back from the database.

Needs /usr/bin/chromium (``apt-get install chromium``): skipped with a reason when it is missing,
except under CI (env ``CI`` set), where a missing browser is a failure. With
``DUETIME_SCREENSHOT`` set, the views are saved as ``docs/dashboard-*.png``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from duetime import App, Event, Status

from .test_api_serve import (
    Server,
    SharedServers,
    free_port,
    fresh_namespace,
    make_server,
    wait_for,
)

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
DOCS = Path(__file__).resolve().parents[2] / "docs"


if not CHROMIUM.exists():
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium")
    pytest.skip(
        f"{CHROMIUM} is not installed (apt-get install chromium); dashboard tests skipped",
        allow_module_level=True,
    )

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402

# What the page shows "live" comes by design up to three seconds after the database changed
# (the feed polls every second, the page refreshes at most every two), and its reads take
# longer beside a busy suite: waiting 15 s instead of Playwright's 5 leaves that room. A wait
# ends as soon as the page shows what is expected; only a page that never does waits it out.
expect.set_options(timeout=15_000)

pytestmark = pytest.mark.slow  # a real Chromium against a real server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], errors


def screenshot(page: Page, name: str) -> None:
    if os.environ.get("DUETIME_SCREENSHOT"):
        page.screenshot(path=str(DOCS / f"dashboard-{name}.png"), full_page=True)


def _refuse(event: Event) -> None:
    raise RuntimeError(f"the legacy system refused record {event.payload['record']}")


def seed(url: str, namespace: str) -> None:
    """60 dead ``legacy.sync`` timers (a handler that raised: each has a traceback), six pending
    ``followup.email`` for user-1234 due in 4, 11, 18… minutes, and a daily schedule."""
    with App(database_url=url, namespace=namespace) as app:
        app.handler("legacy.sync")(_refuse)
        for n in range(60):
            app.schedule("legacy.sync", {"record": n}, delay=0, key=f"sync-{n}", max_attempts=1)
        app.tick()
        for n in range(6):
            app.schedule("followup.email", {"n": n}, delay=f"PT{4 + 7 * n}M", key=f"followup-{n}",
                         subject="user-1234")  # fmt: skip
        app.schedules.add(
            "daily-report", "report.daily", cron="0 9 * * *", timezone="Europe/Berlin"
        )


@dataclass
class Console:
    """A test's seeded namespace on the module's shared ``duetime serve``: the page is opened on
    it (``?namespace=``) and shows it alone, so no test sees another's rows."""

    server: Server
    namespace: str

    @property
    def database_url(self) -> str:
        return self.server.env["DUETIME_DATABASE_URL"]

    @property
    def api(self) -> str:
        """The namespace's part of the API, ``/v1/namespaces/<namespace>``."""
        return f"/v1/namespaces/{self.namespace}"

    def url(self, view: str = "") -> str:
        """The page on this namespace, at ``#view`` when given."""
        return f"{self.server.base_url}/?namespace={self.namespace}" + (f"#{view}" if view else "")

    def client(self, token: str | None = None) -> httpx.Client:
        return self.server.client(token)


def stored(console: Console, namespace: str | None = None) -> App:
    """The console's database, read directly (the effect of a click, not the page's word)."""
    return App(database_url=console.database_url, namespace=namespace or console.namespace)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServers]:
    """The module's servers, one a store: no worker runs what a test replays, the database says
    what happened. Each test has a seeded namespace of its own on them (:class:`Console`)."""
    shared = SharedServers(tmp_path_factory, "--no-worker")
    yield shared
    shared.stop()


def new_console(server: Server) -> Console:
    console = Console(server, fresh_namespace("shop"))
    seed(console.database_url, console.namespace)
    return console


@pytest.fixture
def console(servers: SharedServers) -> Console:
    return new_console(servers("sqlite"))


@pytest.fixture(params=["sqlite", "postgres"])
def any_console(request: pytest.FixtureRequest, servers: SharedServers) -> Console:
    """``console`` on each store (PostgreSQL: a schema of the module's, dropped afterwards)."""
    return new_console(servers(request.param))


def confirm(page: Page, expected: str, *, yes: bool = True) -> None:
    dialog = page.locator("#confirm")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text(expected)
    page.click("#confirm-yes" if yes else "#confirm-no")
    expect(dialog).to_be_hidden()


def test_overview_then_filter_and_page_the_dead_letters(console: Console, page: Page) -> None:
    page.goto(console.url())
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    counts = page.locator("#counts")
    expect(counts.locator('[data-status="dead"] b')).to_have_text("60")
    expect(counts.locator('[data-status="scheduled"] b')).to_have_text("6")
    expect(page.locator("#dead tbody tr")).to_have_count(10)
    by_type = page.locator('#dead-types tr[data-type="legacy.sync"]')
    expect(by_type).to_contain_text("60")
    expect(by_type).to_contain_text("the legacy system refused record 59")
    expect(page.locator("#dead tbody")).to_contain_text("the legacy system refused record 59")
    expect(page.locator("#throughput-summary")).to_contain_text("60 fired in the last hour")
    expect(page.locator("#throughput rect.bar.dead")).not_to_have_count(0)
    expect(page.locator("#next-due tbody tr")).to_have_count(6)
    screenshot(page, "overview")

    counts.locator('[data-status="dead"]').click()  # the dead letters, 50 a page
    expect(page).to_have_url(console.url("timers?status=dead"))
    rows = page.locator("#timers tbody tr[data-key]")
    expect(rows).to_have_count(50)
    page.click("#timers-more")
    expect(rows).to_have_count(60)
    expect(page.locator("#timers-more")).to_be_hidden()
    expect(page.locator("#timers tbody tr[data-key]").last).to_have_attribute("data-key", "sync-0")

    page.click("#f-clear")
    page.fill("#f-type", "followup.*")
    page.fill("#f-subject", "user-1234")
    page.click("#filter button[type=submit]")
    expect(rows).to_have_count(6)
    soon = datetime.now(UTC) + timedelta(minutes=8)
    page.fill("#f-due-until", soon.isoformat().replace("+00:00", "Z"))
    page.click("#filter button[type=submit]")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_attribute("data-key", "followup-0")
    screenshot(page, "timers")

    page.fill("#f-type", "not a type")
    page.click("#filter button[type=submit]")
    expect(page.locator("#notice")).to_contain_text("type:")


def test_a_timer_shows_its_payload_and_traceback_and_each_action_changes_the_database(
    console: Console, page: Page
) -> None:
    page.goto(console.url("timer/sync-3"))
    expect(page.locator("#timer-title")).to_contain_text("sync-3")
    expect(page.locator("#timer-payload")).to_contain_text('"record": 3')
    attempt = page.locator("#attempts tbody tr.attempt")
    expect(attempt).to_have_count(1)
    expect(attempt.locator(".pill")).to_have_text("dead")
    traceback = page.locator("#attempts tr.traceback pre")
    expect(traceback).to_be_visible()  # the newest traceback is open
    expect(traceback).to_contain_text("RuntimeError: the legacy system refused record 3")
    expect(page.locator("#act-cancel")).to_have_count(0)  # only a replay for a dead timer
    screenshot(page, "timer")

    page.click("#act-replay")
    confirm(page, "Replay sync-3?")
    expect(page.locator("#notice")).to_contain_text("sync-3 replayed")
    with stored(console) as app:
        assert app.get("sync-3").status is Status.SCHEDULED

    page.goto(console.url("timer/followup-2"))
    page.click("#act-cancel")
    confirm(page, "A cancelled timer never fires", yes=False)  # changed one's mind
    with stored(console) as app:
        assert app.get("followup-2").status is Status.SCHEDULED
    page.click("#act-cancel")
    confirm(page, "Cancel followup-2?")
    expect(page.locator("#timer-title")).to_contain_text("cancelled")
    with stored(console) as app:
        assert app.get("followup-2").status is Status.CANCELLED

    page.goto(console.url("timer/followup-3"))
    before = datetime.now(UTC)
    with stored(console) as app:
        assert app.get("followup-3").run_at > before + timedelta(minutes=20)
    page.click("#act-run-now")
    confirm(page, "Run now followup-3?")
    expect(page.locator("#notice")).to_contain_text("followup-3 made due now")
    with stored(console) as app:
        assert app.get("followup-3").run_at < before + timedelta(minutes=1)


def test_bulk_replay_of_the_filtered_dead_letters_after_confirming_their_number(
    console: Console, page: Page
) -> None:
    page.goto(console.url())  # one type's dead letters, from the overview: declined
    page.locator('#dead-types tr[data-type="legacy.sync"] [data-replay]').click()
    confirm(page, "60 dead timers match (status dead, type legacy.sync)", yes=False)
    with stored(console) as app:
        assert app.timers.counts()[Status.DEAD] == 60

    page.goto(console.url("timers?status=dead&type=legacy.*"))
    expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
    page.click("[data-bulk=cancel]")  # nothing pending matches: said so, nothing asked
    expect(page.locator("#notice")).to_contain_text("No scheduled or retrying timer matches")
    page.click("[data-bulk=replay]")
    screenshot(page, "bulk")
    confirm(page, "60 dead timers match (status dead, type legacy.*) — replay them?")
    expect(page.locator("#notice")).to_contain_text("60 timers replayed")
    expect(page.locator("#timers tbody")).to_contain_text("No timer matches this filter")
    with stored(console) as app:
        counts = app.timers.counts()
        assert (counts[Status.DEAD], counts[Status.SCHEDULED]) == (0, 66)


def test_schedules_show_their_next_occurrences_and_pause_and_resume(
    console: Console, page: Page
) -> None:
    page.goto(console.url("schedules"))
    row = page.locator('#schedules tr[data-name="daily-report"]')
    expect(row.locator("td.occurrences-cell div")).to_have_count(3)
    expect(row.locator("td.occurrences-cell div").first).to_contain_text("09:00:00+01:00")
    screenshot(page, "schedules")
    row.locator("[data-pause]").click()
    expect(row.locator(".pill")).to_have_text("paused")
    with stored(console) as app:
        assert app.schedules.get("daily-report").active is False
    row.locator("[data-resume]").click()
    expect(row.locator(".pill")).to_have_text("active")
    with stored(console) as app:
        assert app.schedules.get("daily-report").active is True


def test_a_replayed_timer_counts_its_attempts_from_the_replay(console: Console, page: Page) -> None:
    """sync-7 died on its only attempt; replayed, it has one fresh attempt, not "1 of 2"."""
    page.goto(console.url("timer/sync-7"))
    attempts = page.locator("#timer-fields dt:text-is('attempts') + dd")
    expect(attempts).to_have_text("1 of 1")
    page.click("#act-replay")
    confirm(page, "Replay sync-7?")
    expect(page.locator("#timer-title .pill")).to_have_text("scheduled")
    expect(attempts).to_have_text("0 of 1 since the replay (1 before it)")
    with stored(console) as app:
        replayed = app.get("sync-7")
    assert (replayed.attempts, replayed.max_attempts) == (1, 2)  # as stored


def test_a_calendar_schedule_reads_as_its_rule_not_as_an_interval(
    console: Console, page: Page
) -> None:
    """An RRULE schedule has no interval: its row names the rule and its business calendar."""
    with stored(console) as app:
        app.schedules.add(
            "month-end",
            "payroll.run",
            rrule="FREQ=MONTHLY;BYMONTHDAY=-1",
            dtstart="2030-01-31T17:00",
            timezone="Europe/Berlin",
            holidays="DE-BE",
            roll="backward",
        )
    page.goto(console.url("schedules"))
    cell = page.locator('#schedules tr[data-name="month-end"] td').nth(2)
    expect(cell).to_have_text("rrule FREQ=MONTHLY;BYMONTHDAY=-1 · holidays DE-BE, roll backward")
    daily = page.locator('#schedules tr[data-name="daily-report"] td').nth(2)
    expect(daily).to_have_text("cron 0 9 * * *")


def test_the_page_follows_the_database_live_without_reloading(
    any_console: Console, page: Page
) -> None:
    console = any_console
    page.goto(console.url())
    scheduled = page.locator('#counts [data-status="scheduled"] b')
    expect(scheduled).to_have_text("6")
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    page.evaluate("window.sameDocument = true")
    with stored(console) as app:  # another process writes: the page hears it
        app.schedule("followup.email", {"n": 99}, delay="PT2H", key="late-arrival")
    expect(scheduled).to_have_text("7")
    expect(page.locator("#next-due tbody")).to_contain_text("late-arrival")
    assert page.evaluate("window.sameDocument") is True  # no reload happened

    page.goto(console.url("events"))
    expect(page.locator("#events tbody tr")).to_have_count(50)
    page.click("#events-more")
    expect(page.locator("#events tbody tr")).to_have_count(60)
    with stored(console) as app:  # one more fires: the live refresh keeps the pages loaded
        app.handler("legacy.sync")(_refuse)
        app.schedule("legacy.sync", {"record": 60}, delay=0, key="sync-60", max_attempts=1)
        app.tick()
    expect(page.locator("#events tbody tr").first).to_contain_text("sync-60")
    expect(page.locator("#events tbody tr")).to_have_count(60)
    page.goto(console.url("nodes"))
    expect(page.locator("#nodes tbody tr")).to_have_count(1)
    expect(page.locator("#nodes tbody tr")).to_contain_text("api")
    screenshot(page, "nodes")


PREFIXED = """
from duetime.api import app_from_env

api = app_from_env()


async def app(scope, receive, send):
    # What a reverse proxy mounting the API at /ops hands on: root_path /ops, and nothing
    # outside /ops (a request for the host's root is refused, as the proxy would).
    if scope["type"] == "http":
        if not scope["path"].startswith("/ops/"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"outside /ops"})
            return
        scope = {**scope, "root_path": "/ops"}
    await api(scope, receive, send)
"""


def test_under_a_path_prefix_every_request_stays_under_it(tmp_path: Path, page: Page) -> None:
    """Mounted at /ops (root_path), the page, its files, its API calls and its live feed all go
    to /ops/…: the host's root answers nothing."""
    server = make_server(tmp_path)
    seed(server.env["DUETIME_DATABASE_URL"], "shop")
    (server.cwd / "prefixed.py").write_text(PREFIXED)
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "prefixed:app", "--app-dir", str(server.cwd),
               "--port", str(port)]  # fmt: skip
    process = subprocess.Popen(
        command, cwd=server.cwd, env=server.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    base = f"http://127.0.0.1:{port}/ops/"
    try:
        wait_for(lambda: _answers(f"{base}healthz"), timeout=120)
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 404
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(base)
        expect(page.locator('#counts [data-status="dead"] b')).to_have_text("60")
        expect(page.locator("#live")).to_have_attribute("data-state", "on")
        page.locator('#counts [data-status="dead"]').click()
        expect(page.locator("#timers tbody tr[data-key]")).to_have_count(50)
        page.click("#timers-more")
        expect(page.locator("#timers tbody tr[data-key]")).to_have_count(60)
        paths = {url.removeprefix(f"http://127.0.0.1:{port}").split("?")[0] for url in requested}
        assert {"/ops/static/app.js", "/ops/v1/namespaces/shop/live"} <= paths
        assert all(path.startswith("/ops/") for path in paths), sorted(paths)
        page.goto("about:blank")  # plain uvicorn waits for open streams (at most 25 s each)
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def test_with_auth_on_the_dashboard_asks_for_a_token_and_keeps_it(
    tmp_path: Path, page: Page
) -> None:
    server = make_server(tmp_path)  # auth on: a server of its own
    token = server.issue_token("alpha").secret
    server.issue_token("beta")
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
        expect(page.locator("#live")).to_have_attribute("data-state", "on")  # the token is sent
        assert page.evaluate("localStorage.getItem('duetime.token')") == token
        page.reload()
        expect(page.locator("#counts [data-status='scheduled'] b")).to_have_text("1")
        page.click("#forget-token")
        expect(page.locator("#notice")).to_contain_text("requires a bearer token")
        assert page.evaluate("localStorage.getItem('duetime.token')") is None
    finally:
        assert server.stop() == 0, server.log()


def test_flow_control_sets_a_limit_pauses_resumes_and_removes_it(
    console: Console, page: Page
) -> None:
    with stored(console) as app:  # three due timers no worker takes: the limit shows them held
        for n in range(3):
            app.schedule("email.welcome", {"n": n}, delay=0, key=f"welcome-{n}")
    page.goto(console.url("limits"))
    expect(page.locator("#live")).to_have_attribute("data-state", "on")
    expect(page.locator("#limits tbody")).to_contain_text("No limit and no pause")

    page.fill("#l-pattern", "email.*")  # a bad rate: the API's answer names it, nothing stored
    page.fill("#l-rate", "fast")
    page.click("#l-set")
    expect(page.locator("#limit-error")).to_contain_text("rate:")
    expect(page.locator("#l-rate")).to_have_attribute("aria-invalid", "true")
    with stored(console) as app:
        assert app.limits.list() == []
    page.fill("#l-concurrency", "20")
    page.fill("#l-rate", "100/s")
    page.fill("#l-burst", "10")
    page.click("#l-set")
    expect(page.locator("#notice")).to_contain_text("Limit on email.* set")
    expect(page.locator("#limit-error")).to_be_hidden()
    row = page.locator('#limits tr[data-pattern="email.*"]')
    expect(row.locator("td")).to_have_count(10)
    expect(row.locator("td").nth(2)).to_have_text("100/s")
    expect(row.locator("td").nth(7)).to_have_text("3")  # held back: due, not started
    with stored(console) as app:
        (status,) = app.limits.list()
        rule = status.rule
        assert (rule.concurrency, str(rule.rate), rule.burst) == (20, "100/s", 10)
        assert rule.paused is False
        assert status.held == 3
        app.limits.set("sync.user", concurrency=1, partition_by="payload.user_id")
    other = page.locator('#limits tr[data-pattern="sync.user"]')  # another process's rule, live
    expect(other.locator("td").nth(4)).to_have_text("payload.user_id")
    other.locator("[data-edit]").click()  # its values fill the form
    expect(page.locator("#l-partition-by")).to_have_value("payload.user_id")
    expect(page.locator("#l-concurrency")).to_have_value("1")

    page.fill("#p-pattern", "report.*")  # a typed pause: a row of its own, no limit
    page.click("#p-pause")
    confirm(page, "Pause report.*?")
    paused = page.locator('#limits tr[data-pattern="report.*"]')
    expect(paused.locator(".pill")).to_have_text("paused")
    expect(paused.locator("[data-remove]")).to_have_count(0)
    row.locator("[data-pause]").click()  # a rule's own button: declined, then confirmed
    confirm(page, "until it is resumed", yes=False)
    with stored(console) as app:
        assert {s.rule.pattern: s.rule.paused for s in app.limits.list()} == {
            "email.*": False,
            "report.*": True,
            "sync.user": False,
        }
    row.locator("[data-pause]").click()
    confirm(page, "Pause email.*?")
    expect(row.locator(".pill")).to_have_text("paused")
    with stored(console) as app:
        rules = {s.rule.pattern: s.rule for s in app.limits.list()}
        assert rules["email.*"].paused
        assert rules["email.*"].concurrency == 20  # the limit stays
    page.fill("#l-pattern", "")  # the form as the picture shows it: empty
    page.fill("#l-concurrency", "")
    page.fill("#l-partition-by", "")
    screenshot(page, "flow-control")

    row.locator("[data-resume]").click()
    expect(row.locator(".pill")).to_have_text("limited")
    page.fill("#p-pattern", "report.*")
    page.click("#p-resume")
    expect(paused).to_have_count(0)  # a pause alone: resumed, its row is gone
    with stored(console) as app:
        rules = {s.rule.pattern: s.rule for s in app.limits.list()}
        assert set(rules) == {"email.*", "sync.user"}
        assert not rules["email.*"].paused
        assert rules["email.*"].concurrency == 20
    page.fill("#p-pattern", "report.*")  # nothing paused there any more: said so
    page.click("#p-resume")
    expect(page.locator("#pause-error")).to_be_visible()

    row.locator("[data-remove]").click()  # removing: declined, then confirmed
    confirm(page, "Remove the limit on email.*?", yes=False)
    with stored(console) as app:
        assert len(app.limits.list()) == 2
    row.locator("[data-remove]").click()
    confirm(page, "Remove the limit on email.*?")
    expect(row).to_have_count(0)
    with stored(console) as app:
        assert [s.rule.pattern for s in app.limits.list()] == ["sync.user"]


def test_an_event_type_with_dead_letters_is_paused_and_resumed_from_the_overview(
    console: Console, page: Page
) -> None:
    page.goto(console.url())
    row = page.locator('#dead-types tr[data-type="legacy.sync"]')
    row.locator("[data-pause-type]").click()
    confirm(page, "Pause legacy.sync?")
    expect(row.locator("[data-resume-type]")).to_be_visible()
    with stored(console) as app:
        assert [(s.rule.pattern, s.rule.paused) for s in app.limits.list()] == [
            ("legacy.sync", True)
        ]
    row.locator("[data-resume-type]").click()
    expect(row.locator("[data-pause-type]")).to_be_visible()
    with stored(console) as app:
        assert app.limits.list() == []
        app.limits.pause("legacy.*")  # a glob's pause: shown as such, resumed where the glob is
    expect(row.locator("a.pill")).to_have_text("paused by legacy.*")
    expect(row.locator("[data-pause-type]")).to_have_count(0)


def test_flow_control_shows_a_destinations_rate_as_the_destinations(
    console: Console, page: Page
) -> None:
    from duetime.destinations import WebhookDestination

    app = stored(console)
    app.add_destination(WebhookDestination("hook", "http://127.0.0.1:9/", rate="30/s", burst=4))
    with app:  # opening writes the destination's rule
        pass
    page.goto(console.url("limits"))
    row = page.locator('#limits tr[data-pattern="@hook"]')
    expect(row.locator("td").first).to_have_text("destination hook")
    expect(row.locator("td").nth(2)).to_have_text("30/s")
    expect(row.locator("button")).to_have_count(0)  # set on the destination, not here
