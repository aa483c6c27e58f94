"""The Kafka source against a real broker (kafka_broker.py): records → timers, offsets after.

Each test uses its own topics and group, so tests never see each other's records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

if not os.environ.get("CI"):
    pytest.importorskip("confluent_kafka", reason="the Kafka client comes with duetime[kafka]")

from kafka_broker import (
    committed,
    consume_all,
    create_topic,
    group_config,
    kafka_servers,
    produce,
    unique_topic,
)
from test_sources import eventually, flaky_app, request, run, running, stored_keys

from duetime import AsyncApp
from duetime.sources import ScheduleCommand, parse_sources
from duetime.sources.kafka_source import KafkaSource
from duetime.testing import make_app

pytestmark = pytest.mark.slow  # consumer-group joins wait out the broker's rebalance timeout

__all__ = ["kafka_servers"]  # the session fixture, imported for pytest


def source(app: AsyncApp, servers: str, topic: str, group: str, **options: Any) -> KafkaSource:
    return KafkaSource(
        app,
        servers,
        topic,
        group=group,
        poll_timeout=0.2,
        retry_delay=0.2,
        client_config=group_config(),
        **options,
    )


async def count_is(app: AsyncApp, n: int) -> bool:
    return len(await stored_keys(app)) == n


async def committed_is(servers: str, topic: str, group: str, want: list[int]) -> bool:
    return await asyncio.to_thread(committed, servers, topic, group, len(want)) == want


def test_records_become_timers_offsets_committed_after_and_redelivery_upserts(
    tmp_path: Path, kafka_servers: str
) -> None:
    topic, group = unique_topic("schedule"), unique_topic("group")
    create_topic(kafka_servers, topic)

    async def main() -> None:
        async with make_app(tmp_path) as app:
            produce(kafka_servers, topic, [request("a"), request("b"), request(None)])
            first = source(app, kafka_servers, topic, group)
            async with running(first, app=app):
                await eventually(lambda: count_is(app, 3), within=15)
                await eventually(lambda: committed_is(kafka_servers, topic, group, [3]))
            assert await stored_keys(app) == ["a", "b", f"kafka:{topic}:0:2"]
            assert first.stats.stored["created"] == 3
            # Another group reads the same records again: the same timers, kept, not doubled.
            again = source(app, kafka_servers, topic, unique_topic("group"))
            async with running(again, app=app):
                await eventually(lambda: _stored(again, 3), within=15)
            assert await stored_keys(app) == ["a", "b", f"kafka:{topic}:0:2"]
            assert again.stats.stored["kept"] == 3

    run(main)


def test_the_log_says_the_source_waits_for_its_group_and_when_it_has_formed(
    tmp_path: Path, kafka_servers: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A new group takes seconds to form (20 s and more on a fresh broker): the source says it
    is waiting before its first record, and which partitions it got."""
    topic, group = unique_topic("schedule"), unique_topic("group")
    create_topic(kafka_servers, topic)

    async def main() -> None:
        async with make_app(tmp_path) as app:
            produce(kafka_servers, topic, [request("a")])
            with caplog.at_level(logging.INFO, logger="duetime.sources.kafka"):
                async with running(source(app, kafka_servers, topic, group), app=app):
                    await eventually(lambda: count_is(app, 1), within=15)

    run(main)
    said = [r.getMessage() for r in caplog.records if r.name == "duetime.sources.kafka"]
    name = f"kafka-{group}"
    waiting = (
        f"source {name}: joined group {group} for topic {topic}; waiting for the group to "
        "assign partitions (on a new broker this may take 20 s or more)"
    )
    assert said[0] == waiting
    assigned = [line for line in said if " assigned partitions " in line]
    assert len(assigned) == 1
    assert assigned[0].startswith(f"source {name}: group {group} assigned partitions 0 of topic")


async def _stored(src: KafkaSource, n: int) -> bool:
    return src.stats.total_stored() >= n


def test_malformed_records_are_dead_lettered_with_bytes_headers_and_reason(
    tmp_path: Path, kafka_servers: str
) -> None:
    topic, group = unique_topic("schedule"), unique_topic("group")
    create_topic(kafka_servers, topic)
    bad = [b"not json", json.dumps({"type": "x", "at": "2030-03-15T13:00:00"}).encode()]

    async def main() -> None:
        async with make_app(tmp_path) as app:
            produce(kafka_servers, topic, [request("a")])
            produce(kafka_servers, topic, bad, key=b"k1", headers=[("trace", b"t-1")])
            produce(kafka_servers, topic, [request("b")])
            src = source(app, kafka_servers, topic, group)
            async with running(src, app=app):
                await eventually(lambda: count_is(app, 2), within=15)
                await eventually(lambda: committed_is(kafka_servers, topic, group, [4]))
            assert src.stats.dead_lettered == 2
        dead = consume_all(kafka_servers, f"{topic}.dead", 2)
        assert [m.value() for m in dead] == bad  # type: ignore[attr-defined]
        first: Any = dead[0]
        headers = dict(first.headers())
        assert first.key() == b"k1"
        assert headers["trace"] == b"t-1"
        assert headers["duetime-dead-field"] == b"body"
        assert headers["duetime-dead-code"] == b"invalid_input"
        assert headers["duetime-dead-reason"].startswith(b"body: is not JSON")
        assert headers["duetime-source-offset"] == b"1"
        second = dict(dead[1].headers())  # type: ignore[attr-defined]
        assert second["duetime-dead-field"] == b"at"

    run(main)


def test_a_store_outage_commits_nothing_until_the_records_are_stored(
    tmp_path: Path, kafka_servers: str
) -> None:
    topic, group = unique_topic("schedule"), unique_topic("group")
    create_topic(kafka_servers, topic)

    async def main() -> None:
        app, store = flaky_app(tmp_path, failures=2)
        async with app:
            produce(kafka_servers, topic, [request("a"), request("b")])
            src = source(app, kafka_servers, topic, group)
            async with running(src, app=app):
                await eventually(lambda: count_is(app, 2), within=15)
                await eventually(lambda: committed_is(kafka_servers, topic, group, [2]))
            assert store.puts >= 3
            assert src.stats.deferred >= 2
            assert src.rewinds >= 2

    run(main)


def test_a_consumer_joining_and_leaving_loses_nothing(tmp_path: Path, kafka_servers: str) -> None:
    if not os.environ.get("DUETIME_TEST_KAFKA"):
        pytest.skip(
            "Tansu's group coordinator times out sessions while two members rebalance "
            "(its JoinGroup waits out the rebalance timeout); set DUETIME_TEST_KAFKA to a Kafka"
        )
    topic, group = unique_topic("schedule"), unique_topic("group")
    create_topic(kafka_servers, topic, partitions=4)
    total = 400

    async def main() -> None:
        async with make_app(tmp_path) as app:
            for part in range(4):
                keys = [f"p{part}-{i}" for i in range(total // 4)]
                produce(kafka_servers, topic, [request(k) for k in keys], partition=part)
            a = source(app, kafka_servers, topic, group, batch=10, name="a")
            b = source(app, kafka_servers, topic, group, batch=10, name="b")
            stop_a = asyncio.Event()
            task_a = asyncio.create_task(a.run(stop_a))
            await eventually(lambda: _stored(a, 20), within=15)
            async with running(b, app=app):  # joins: the partitions are shared out again
                await eventually(lambda: _stored(b, 1), within=20)
                stop_a.set()  # leaves: b takes over every partition
                await asyncio.wait_for(task_a, 10)
                await eventually(lambda: count_is(app, total), within=20)
                await eventually(
                    lambda: committed_is(kafka_servers, topic, group, [total // 4] * 4), within=10
                )
            assert a.stats.total_stored() + b.stats.total_stored() >= total

    run(main)


def test_accept_within_dead_letters_events_due_too_far_ahead(
    tmp_path: Path, kafka_servers: str
) -> None:
    topic, group = unique_topic("schedule-event"), unique_topic("group")
    create_topic(kafka_servers, topic)
    soon = {"id": "n1", "executionDate": "2025-03-01T12:03:00Z", "userId": "u1"}
    later = {"id": "n2", "executionDate": "2025-03-01T12:13:00Z", "userId": "u1"}

    async def main() -> None:
        async with make_app(tmp_path, start="2025-03-01T12:00:00Z") as app:
            produce(kafka_servers, topic, [json.dumps(soon).encode(), json.dumps(later).encode()])
            (spec,) = parse_sources(
                {
                    "notifications": {
                        "kind": "kafka",
                        "bootstrap_servers": kafka_servers,
                        "topic": topic,
                        "group": group,
                        "mapping": "schedule_event",
                        "accept_within": "PT5M",
                        "poll_timeout": 0.2,
                        "client_config": group_config(),
                    }
                }
            ).values()
            assert spec.command == ScheduleCommand.named("schedule_event", accept_within="PT5M")
            from duetime.sources import build_source

            src = build_source(spec, app)
            async with running(src, app=app):
                await eventually(lambda: count_is(app, 1), within=15)
                await eventually(lambda: committed_is(kafka_servers, topic, group, [2]))
            assert await stored_keys(app) == ["notification:n1"]
        (dead,) = consume_all(kafka_servers, f"{topic}.dead", 1)
        headers = dict(dead.headers())  # type: ignore[attr-defined]
        assert headers["duetime-dead-code"] == b"outside_window"
        assert headers["duetime-dead-field"] == b"executionDate"

    run(main)
