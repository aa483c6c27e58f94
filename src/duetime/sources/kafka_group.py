"""Saying in the log that a Kafka consumer waits for its group, and when the wait ends.

A consumer reads nothing until its group has formed and assigned it partitions. On a fresh
broker that takes 20 s or more (the group coordinator waits out its initial rebalance delay and
the members' join), long enough for an operator to think the source is stuck. So the source
says it is waiting when it subscribes, again every ``every`` seconds while it still waits, and
which partitions it was given and after how long once the group has formed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

NOTE_EVERY = 10.0
"""Seconds between two "still waiting" lines."""


class GroupWait:
    """One consumer's wait for its group's assignment, as log lines; ``clock`` is monotonic."""

    def __init__(
        self,
        log: logging.Logger,
        name: str,
        group: str,
        topic: str,
        *,
        every: float = NOTE_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.name = name
        self.group = group
        self.topic = topic
        self.every = every
        self.clock = clock
        self.assigned = False
        self._since = self._noted = clock()

    def subscribed(self) -> None:
        """The consumer has subscribed: from now on it waits for the group."""
        self.assigned = False
        self._since = self._noted = self.clock()
        self.log.info(
            "source %s: joined group %s for topic %s; waiting for the group to assign "
            "partitions (on a new broker this may take 20 s or more)",
            self.name,
            self.group,
            self.topic,
        )

    def still_waiting(self) -> None:
        """Called after each poll: a line every ``every`` seconds while nothing is assigned."""
        if self.assigned:
            return
        now = self.clock()
        if now - self._noted >= self.every:
            self._noted = now
            self.log.info(
                "source %s: still waiting for group %s to assign partitions of topic %s (%.0f s)",
                self.name,
                self.group,
                self.topic,
                now - self._since,
            )

    def on_assign(self, consumer: Any, partitions: Sequence[Any]) -> None:
        """The group's assignment (librdkafka's rebalance callback, on the polling thread)."""
        numbers = ", ".join(str(p.partition) for p in partitions) or "none"
        waited = self.clock() - self._since
        self.log.info(
            "source %s: group %s assigned partitions %s of topic %s after %.1f s",
            self.name,
            self.group,
            numbers,
            self.topic,
            waited,
        )
        self.assigned = True

    def on_revoke(self, consumer: Any, partitions: Sequence[Any]) -> None:
        """A rebalance (or the consumer's close) takes the partitions back: waiting again, and
        said so if the next assignment is long in coming."""
        self.assigned = False
        self._since = self._noted = self.clock()
