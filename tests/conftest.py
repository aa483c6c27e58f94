"""Shared fixtures: an isolated database per test, and a pinned clock."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from tests.children import descendants, stop_all

from duetime import FrozenClock
from duetime.worker import owner

# A worker's state may be touched only on its event loop: checked in every test, in this
# process and in the worker processes tests start (see duetime.worker.owner).
os.environ["DUETIME_CHECK_LOOP_OWNER"] = "1"
owner.CHECKING = True

# Hypothesis fails an example that takes over 200 ms by the wall clock: a speed assertion that
# a busy machine fails (a walk of 16,840 windows took 378 ms beside the rest of the suite).
# What an example computes is checked; how fast belongs to benchmarks.
settings.register_profile("duetime", deadline=None)
settings.load_profile("duetime")


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind() -> Iterator[None]:
    """Fail the session when its tests left a process they started still running (each is
    stopped here): every fixture stops what it started, however its test ended. Set up before
    any other session fixture, so it looks once all of theirs are torn down."""
    before = set(descendants())
    yield
    left = {pid: line for pid, line in descendants().items() if pid not in before}
    stop_all(left)
    if left:
        lines = "\n".join(f"  {pid}: {line}" for pid, line in sorted(left.items()))
        pytest.fail(f"tests left {len(left)} process(es) running (now killed):\n{lines}")


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'duetime.db'}"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2025, 3, 1, 12, 0, tzinfo=UTC))


@pytest.fixture(autouse=True)
def worker_state_stays_on_its_loop() -> Iterator[None]:
    """Fail a test during which a worker's loop-owned state was touched from another thread
    (even where the error it raised there was swallowed, e.g. as a handler's failure)."""
    owner.VIOLATIONS.clear()
    yield
    touched, owner.VIOLATIONS[:] = list(owner.VIOLATIONS), []
    assert not touched, f"worker state touched off its event loop: {touched}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown() -> Iterator[None]:
    """Once a test and all its fixtures have ended, its pooled PostgreSQL schemas go back to
    ``storekit``'s pool (or are dropped): no store or process of the test uses them any more."""
    try:
        yield
    finally:
        storekit = sys.modules.get("storekit")
        if storekit is not None:
            storekit.settle_schema_pool()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """A test that failed because the PostgreSQL server refused a connection as full ("too
    many clients") gets a section saying so: the server's limit, the suite's processes and
    this one's connections, and what to do (not a hint to point DUETIME_TEST_PG elsewhere)."""
    report = yield
    storekit = sys.modules.get("storekit")
    if report.failed and storekit is not None and "too many clients" in report.longreprtext:
        report.sections.append(("PostgreSQL is full", storekit.too_many_clients()))
    return report


TIER_ORDER = ("acceptance", "integration", "store", "unit")
"""After the files that hold slow tests, the rest by folder, the costliest kind first."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the files with slow tests first, then end-to-end before small tests, each file's
    tests together and in their own order.

    Test processes take whole files (``--dist loadfile``), in this order, as they come free:
    a minute-long file handed out last would leave the other processes idle while it runs,
    whereas the many small unit files at the end fill the gaps evenly."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow") is not None}

    def rank(item: pytest.Item) -> tuple[int, int]:
        folder = item.path.parent.name
        tier = TIER_ORDER.index(folder) if folder in TIER_ORDER else len(TIER_ORDER)
        return (0 if item.path in slow_files else 1, tier)

    items.sort(key=rank)  # stable: within a rank, files and tests keep the collected order


def pytest_sessionfinish() -> None:
    """Drop the PostgreSQL schemas this test process kept for reuse (``storekit``'s pool)."""
    storekit = sys.modules.get("storekit")
    if storekit is not None:
        storekit.close_schema_pool()
