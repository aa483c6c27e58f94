"""Shared fixtures: an isolated database per test, and a pinned clock."""

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
