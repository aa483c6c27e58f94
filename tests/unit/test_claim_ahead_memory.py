"""How far ahead a worker claims follows the slowest claim of the last
:data:`~duetime.worker.claim_timing.CLAIM_MEMORY` seconds, not of the last few claims: a slow claim
seconds ago says the next may be as slow."""

from __future__ import annotations

from duetime.worker.claim_timing import SlowestRecent


def test_the_slowest_value_of_the_window_is_kept_until_it_leaves_it() -> None:
    slowest = SlowestRecent(10.0)
    assert slowest.at(0.0) == 0.0
    slowest.add(0.0, 0.080)
    for tick in range(1, 200):  # many quick ones after it: a count would have forgotten it
        slowest.add(tick * 0.05, 0.004)
    assert slowest.at(9.9) == 0.080
    assert slowest.at(10.01) == 0.004  # it left the window; the quick ones are still in it
    slowest.add(12.0, 0.030)
    assert slowest.at(12.0) == 0.030
    assert slowest.at(22.5) == 0.0  # nothing added within the window


def test_a_later_value_as_great_replaces_the_earlier_one() -> None:
    slowest = SlowestRecent(10.0)
    slowest.add(0.0, 0.050)
    slowest.add(5.0, 0.050)
    slowest.add(6.0, 0.020)
    assert slowest.at(12.0) == 0.050  # the one added at 5.0
    assert slowest.at(15.5) == 0.020  # then the quicker one after it
    assert slowest.at(16.5) == 0.0
