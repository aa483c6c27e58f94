"""``duetime tzdata diff`` pairs each occurrence with the other rules' one at the same local
date and time, whatever their instants and however many come before."""

from __future__ import annotations

from datetime import UTC, datetime

from duetime.services.tzdata_diff import pair_by_local


def wall(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2027, 3, day, hour, minute)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2027, 3, day, hour, minute, tzinfo=UTC)


def test_an_occurrence_moved_earlier_than_the_one_before_it_keeps_its_wall_time() -> None:
    current = [(wall(14, 9), at(14, 4)), (wall(15, 9), at(15, 4))]
    other = [(wall(14, 9), at(14, 3)), (wall(15, 9), at(15, 3))]
    assert pair_by_local(current[1:], other) == {at(15, 4): at(15, 3)}


def test_the_passes_of_a_repeated_hour_pair_in_order() -> None:
    current = [(wall(15, 1, 30), at(15, 5, 30)), (wall(15, 1, 30), at(15, 6, 30))]
    other = [(wall(15, 1, 30), at(15, 4, 30)), (wall(15, 1, 30), at(15, 5, 30))]
    assert pair_by_local(current, other) == {
        at(15, 5, 30): at(15, 4, 30),
        at(15, 6, 30): at(15, 5, 30),
    }


def test_a_time_run_after_a_new_gap_pairs_on_its_date_and_one_skipped_has_none() -> None:
    current = [(wall(15, 2, 30), at(15, 1, 30)), (wall(16, 2, 30), at(16, 1, 30))]
    other = [(wall(15, 3, 0), at(15, 1, 0)), (wall(17, 2, 30), at(17, 0, 30))]
    assert pair_by_local(current, other) == {at(15, 1, 30): at(15, 1, 0)}
