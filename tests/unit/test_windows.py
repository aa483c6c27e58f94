"""Windows of schedule ids through a backlog: every id once, in order, sized by what is due."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from duetime.services.windows import DENSEST, SETTLE, WIDEST, Windows


def walk(windows: Windows, due_share: float) -> list[range]:
    taken = []
    while (window := windows.take()) is not None:
        taken.append(window)
        windows.found(window, math.ceil(len(window) * due_share))
    return taken


@given(
    start=st.integers(1, 10**9),
    length=st.integers(0, 50_000),
    rows=st.integers(1, 2_000),
    share=st.floats(DENSEST, 1.0),
)
def test_dense_windows_cover_every_id_once_in_order(
    start: int, length: int, rows: int, share: float
) -> None:
    ids = range(start, start + length)
    taken = walk(Windows(ids, rows), share)
    assert [i for window in taken for i in window] == list(ids)
    assert all(rows <= len(w) <= WIDEST * rows for w in taken[:-1])


def test_windows_widen_as_due_rows_thin_out() -> None:
    windows = Windows(range(1, 1_000_000), 500)
    first = windows.take()
    assert first is not None
    assert len(first) == 500
    windows.found(first, 250)  # half the ids due: twice as wide, about 500 rows again
    second = windows.take()
    assert second is not None
    assert second.start == first.stop
    assert len(second) == 1000
    windows.found(second, 1000)  # all due again: density 1250/1500, a little over 500 ids
    third = windows.take()
    assert third is not None
    assert len(third) == 600


def test_windows_stop_where_few_of_the_ids_are_due() -> None:
    windows = Windows(range(1, 10_000_000), 500)
    taken = walk(windows, DENSEST / 2)
    assert windows.sparse
    assert len(taken) == SETTLE  # trusted after SETTLE windows, not before
    assert all(len(w) == WIDEST * 500 for w in taken[1:])


def test_an_empty_table_has_no_window() -> None:
    assert Windows(range(5, 5), 500).take() is None
    with pytest.raises(ValueError, match="rows"):
        Windows(range(1, 10), 0)
