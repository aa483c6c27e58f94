"""kill -9 of a worker consuming from Kafka (``kafka_source_app.py``): nothing lost or doubled.

Offsets are committed only after the timers are; a process killed between the two re-reads the
uncommitted records when it restarts, and since each record names its timer (its own key, else
``kafka:<topic>:<partition>:<offset>``) the re-read upserts the same timers. So after any
number of SIGKILLs and a final run, every record has exactly one timer and the group's offset
is at the end of the topic.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("confluent_kafka", reason="the Kafka client comes with duetime[kafka]")

from kafka_broker import committed, create_topic, kafka_servers, produce, unique_topic
from test_sources import request
from tests.scale import sized
from tests.waiting import wait_until

from duetime import AsyncApp

__all__ = ["kafka_servers"]  # the session fixture, imported for pytest

pytestmark = pytest.mark.slow

APP = Path(__file__).with_name("kafka_source_app.py")


class Consumers:
    """The consumer processes of one test; any still running is killed at the end."""

    def __init__(self, tmp_path: Path, servers: str, topic: str, group: str) -> None:
        self.tmp_path = tmp_path
        self.db = f"sqlite:///{tmp_path / 'timers.db'}"
        self.command = [
            sys.executable,
            str(APP),
            *("--servers", servers, "--topic", topic, "--group", group, "--db", self.db),
        ]
        if not os.environ.get("DUETIME_TEST_KAFKA"):
            self.command.append("--tansu")
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, *options: str) -> subprocess.Popen[str]:
        stderr = (self.tmp_path / f"consumer-{len(self.procs)}.stderr").open("w")
        proc = subprocess.Popen(
            [*self.command, *options], stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        stderr.close()
        self.procs.append(proc)
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", self.stderr()
        return proc

    def stop(self, proc: subprocess.Popen[str]) -> dict[str, int]:
        """SIGTERM, then the counts the process printed."""
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert proc.returncode == 0, self.stderr()
        counts: dict[str, int] = json.loads(out.strip().splitlines()[-1])
        return counts

    def stderr(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.tmp_path.glob("consumer-*.stderr")))

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


async def timer_keys(db: str) -> list[str]:
    async with AsyncApp(db) as app:
        keys: list[str] = []
        cursor = None
        while True:
            page = await app.timers.history(limit=1000, cursor=cursor)
            keys.extend(t.key for t in page.items)
            if page.next_cursor is None:
                return keys
            cursor = page.next_cursor


def records(start: int, count: int) -> list[bytes]:
    """Every tenth record has no key of its own: its timer is named by its offset."""
    return [request(None if i % 10 == 9 else f"k-{i:04d}") for i in range(start, start + count)]


def expected_keys(topic: str, count: int) -> list[str]:
    keys = [f"kafka:{topic}:0:{i}" if i % 10 == 9 else f"k-{i:04d}" for i in range(count)]
    return sorted(keys)


@pytest.fixture
def setup(tmp_path: Path, kafka_servers: str) -> Any:
    topic, group = unique_topic("crash"), unique_topic("group")
    create_topic(kafka_servers, topic)
    consumers = Consumers(tmp_path, kafka_servers, topic, group)
    yield kafka_servers, topic, group, consumers
    consumers.kill_all()


def test_killed_between_storing_timers_and_committing_offsets(setup: Any) -> None:
    servers, topic, group, consumers = setup
    produce(servers, topic, records(0, 50))
    doomed = consumers.start("--batch", "10", "--kill-before-commit", "2")
    assert doomed.wait(30) == -signal.SIGKILL, consumers.stderr()
    stored = asyncio.run(timer_keys(consumers.db))
    assert len(stored) >= 20  # the second batch's timers are in the database...
    assert committed(servers, topic, group) == [10]  # ...its offsets are not

    survivor = consumers.start("--batch", "10")
    wait_until(
        lambda: committed(servers, topic, group) == [50],
        30,
        "every offset committed",
        every=0.2,
        explain=consumers.stderr,
    )
    counts = consumers.stop(survivor)
    assert counts.get("updated", 0) >= 10  # the re-read batch upserted its timers
    keys = asyncio.run(timer_keys(consumers.db))
    assert sorted(keys) == expected_keys(topic, 50)  # each exactly once, none lost


def test_killed_at_random_moments_while_a_producer_sends(setup: Any) -> None:
    servers, topic, group, consumers = setup
    total, chunk = sized(200, 600), 10
    rng = random.Random(os.environ.get("DUETIME_TEST_SEED", "kafka-crash"))

    def producer() -> None:  # 4 s of traffic (12 s at full scale): consumers come and go
        for start in range(0, total, chunk):
            produce(servers, topic, records(start, chunk))
            time.sleep(0.2)

    sending = threading.Thread(target=producer)
    sending.start()
    kills = 0
    try:
        while sending.is_alive() and kills < 3:
            proc = consumers.start("--batch", "7")
            before = committed(servers, topic, group)[0]

            def consuming(before: int = before) -> bool:
                return committed(servers, topic, group)[0] > before or not sending.is_alive()

            # once it is consuming (it committed a batch), kill it at a random moment
            wait_until(
                consuming,
                30,
                "the consumer committing a batch",
                every=0.1,
                explain=consumers.stderr,
            )
            time.sleep(rng.uniform(0.0, 0.3))
            proc.kill()
            proc.wait()
            kills += 1
    finally:
        sending.join()
    assert kills >= 1
    last = consumers.start("--batch", "7")
    wait_until(
        lambda: committed(servers, topic, group) == [total],
        60,
        "every offset committed",
        every=0.2,
        explain=consumers.stderr,
    )
    consumers.stop(last)
    keys = asyncio.run(timer_keys(consumers.db))
    assert len(keys) == len(set(keys)) == total
    assert sorted(keys) == expected_keys(topic, total)
