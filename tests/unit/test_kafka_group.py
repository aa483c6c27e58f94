"""A Kafka source's wait for its consumer group, as the log tells it, on an injected clock."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest

from duetime.sources.kafka_group import GroupWait


@dataclass
class Partition:
    partition: int


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_wait_is_said_when_it_starts_while_it_lasts_and_when_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    wait = GroupWait(logging.getLogger("t"), "kafka-g", "g", "orders", every=10, clock=clock)
    with caplog.at_level(logging.INFO, logger="t"):
        wait.subscribed()
        clock.now += 9.5
        wait.still_waiting()  # not yet ten seconds: nothing more said
        clock.now += 0.5
        wait.still_waiting()
        clock.now += 12.0
        wait.on_assign(None, [Partition(0), Partition(2)])
        clock.now += 60.0
        wait.still_waiting()  # assigned: quiet
    assert [r.getMessage() for r in caplog.records] == [
        "source kafka-g: joined group g for topic orders; waiting for the group to assign "
        "partitions (on a new broker this may take 20 s or more)",
        "source kafka-g: still waiting for group g to assign partitions of topic orders (10 s)",
        "source kafka-g: group g assigned partitions 0, 2 of topic orders after 22.0 s",
    ]


def test_after_a_revoke_a_long_wait_is_said_again(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    wait = GroupWait(logging.getLogger("t"), "kafka-g", "g", "orders", every=10, clock=clock)
    wait.subscribed()
    wait.on_assign(None, [Partition(0)])
    with caplog.at_level(logging.INFO, logger="t"):
        clock.now += 5
        wait.on_revoke(None, [Partition(0)])
        clock.now += 10
        wait.still_waiting()
    assert [r.getMessage() for r in caplog.records] == [
        "source kafka-g: still waiting for group g to assign partitions of topic orders (10 s)"
    ]
