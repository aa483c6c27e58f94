"""Shared fixtures: an isolated database per test, and a pinned clock; the slow tier kept on
one pytest-xdist process."""

from __future__ import annotations

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tier (process kills, failover, thousands of timers) runs on one pytest-xdist
    process, one test after another: two of them at once would each starve the other's
    workers and time out on the machine's load rather than on a defect."""
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group("slow"))
