"""``python -m examples.delayed_notifications``: run the notification worker until Ctrl-C.

``--demo`` also publishes a few schedule-events — one due in 2 s, one a minute late (sent at
once), one ten minutes late (expired: older than the 5-minute acceptance window), one 13 minutes
ahead (kept; the seed dropped it), one malformed — prints the notifications, the expired ones
and the dead letter, then exits. ``--prefix`` is put in front of every stream name.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from redis.asyncio import Redis

from examples._demo import in_seconds, run_service
from examples.delayed_notifications.app import (
    DATABASE_URL,
    REDIS_URL,
    DelayedNotifications,
    Topology,
    schedule_event,
)


def build(args: argparse.Namespace) -> DelayedNotifications:
    topology = Topology(
        redis_url=args.redis_url,
        schedule_stream=f"{args.prefix}schedule-event",
        notification_stream=f"{args.prefix}delayed-notification-sender",
    )
    return DelayedNotifications(topology=topology)


def describe(service: DelayedNotifications) -> str:
    topology = service.topology
    return (
        f"database {DATABASE_URL}; schedule-events on {topology.schedule_stream}, "
        f"notifications on {topology.notification_stream}"
    )


async def demo(service: DelayedNotifications) -> None:
    """Publish sample schedule-events, then print what became of them."""
    topology = service.topology
    client = Redis.from_url(topology.redis_url)
    try:
        last: Any = await client.xrevrange(topology.notification_stream, count=1)
        seen = last[0][0] if last else b"0-0"
        run = datetime.now(UTC).strftime("%H%M%S")
        events: list[Any] = [
            schedule_event(f"{run}-soon", in_seconds(2)),
            schedule_event(f"{run}-late", in_seconds(-60)),
            schedule_event(f"{run}-stale", in_seconds(-600)),
            schedule_event(f"{run}-far", in_seconds(13 * 60)),
            {"id": f"{run}-broken", "userId": "user-789"},  # no executionDate
        ]
        for event in events:
            await client.xadd(topology.schedule_stream, {"body": json.dumps(event)})
            print(f"published schedule-event {json.dumps(event)}", flush=True)
        received = 0
        while received < 2:
            reply: Any = await client.xread({topology.notification_stream: seen}, block=1000)
            for _, entries in reply or []:
                for entry_id, fields in entries:
                    seen = entry_id
                    envelope = json.loads(fields[b"envelope"])
                    print(f"notification {json.dumps(envelope['payload'])}", flush=True)
                    received += 1
        await asyncio.sleep(0.5)  # let the stale one be claimed and expired
        for timer in await service.expired():
            print(f"expired {timer.key}: {timer.last_error}", flush=True)
        dead: Any = await client.xrevrange(topology.dead_stream, count=1)
        for _, fields in dead:
            reason = fields[b"dead_reason"].decode()
            print(f"dead-lettered {fields[b'body'].decode()} reason: {reason}", flush=True)
    finally:
        await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.delayed_notifications")
    parser.add_argument("--prefix", default="", help="put in front of every stream name")
    parser.add_argument("--redis-url", default=REDIS_URL, help="default %(default)s ($REDIS_URL)")
    run_service(parser, build, describe, demo, demo_help="publish sample events, then exit")


if __name__ == "__main__":
    main()
