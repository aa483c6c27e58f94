"""Shared fixtures: an isolated database per test, and a pinned clock."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from duetime import FrozenClock


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'duetime.db'}"


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(datetime(2025, 3, 1, 12, 0, tzinfo=UTC))


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


def pytest_sessionfinish() -> None:
    """Drop the PostgreSQL schemas this test process kept for reuse (``storekit``'s pool)."""
    storekit = sys.modules.get("storekit")
    if storekit is not None:
        storekit.close_schema_pool()
