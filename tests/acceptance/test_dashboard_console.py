# ruff: noqa: F811 - the fixtures are imported from test_dashboard
"""The console's reading aids in a real headless Chromium against ``duetime serve``: trimmed
tracebacks, what a read-only token is shown, schedules made and edited with a preview, the
theme switch, charts steered from the address, node handlers, error backoff and an edit form
that sees its timer fire."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from .test_dashboard import (  # noqa: F401 - fixtures
    Console,
    browser,
    console,
    page,
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
