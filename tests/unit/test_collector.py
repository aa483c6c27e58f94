"""duetime serve / worker pace the garbage collector: the startup heap frozen, young
collections every 50,000 allocations; DUETIME_GC=default leaves CPython's pacing alone."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from duetime.support.gc_tuning import OLDER, YOUNG, pace_for_service


@pytest.fixture
def collector() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("collector")
def test_the_startup_heap_is_frozen_and_collections_are_rarer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DUETIME_GC", raising=False)
    gc.unfreeze()
    pace_for_service()
    assert gc.get_threshold() == (YOUNG, OLDER, OLDER)
    assert gc.get_freeze_count() > 1000  # this test process's modules, at least


@pytest.mark.usefixtures("collector")
def test_default_keeps_cpythons_pacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUETIME_GC", "default")
    gc.unfreeze()
    before = gc.get_threshold()
    pace_for_service()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
