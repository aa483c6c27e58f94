"""``python -m examples.delayed_notifications``: run the notification worker until Ctrl-C.

``--demo`` also publishes a few schedule-events — one due in 2 s, one a minute late (sent at
once), one ten minutes late (expired: older than the 5-minute acceptance window), one 13 minutes
ahead (kept; the seed dropped it), one malformed — prints the notifications, the expired ones
and the dead letter, then exits. ``--prefix`` is put in front of every stream name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

from redis.asyncio import Redis

from examples.delayed_notifications.app import (
    DATABASE_URL,
    REDIS_URL,
    DelayedNotifications,
    Topology,
    schedule_event,
)

DEMO_TIMEOUT = 30.0


def in_seconds(seconds: float) -> str:
    """An ISO 8601 instant ``seconds`` from now (negative: ago), in UTC with a 'Z'."""
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


async def demo(service: DelayedNotifications, stop: asyncio.Event) -> None:
    """Publish sample schedule-events, then print what became of them."""
    try:
        async with asyncio.timeout(DEMO_TIMEOUT):
            await _demo(service)
    finally:
        stop.set()


async def _demo(service: DelayedNotifications) -> None:
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


async def main_async(args: argparse.Namespace) -> None:
    """Run the service (and the demo) until it ends or a signal asks it to stop."""
    topology = Topology(
        redis_url=args.redis_url,
        schedule_stream=f"{args.prefix}schedule-event",
        notification_stream=f"{args.prefix}delayed-notification-sender",
    )
    service = DelayedNotifications(topology=topology)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    print(
        f"database {DATABASE_URL}; schedule-events on {topology.schedule_stream}, "
        f"notifications on {topology.notification_stream}",
        flush=True,
    )
    tasks = [asyncio.create_task(service.run(stop))]
    if args.demo:
        tasks.append(asyncio.create_task(demo(service, stop)))
    else:
        print("running; Ctrl-C to stop", flush=True)
    try:
        await asyncio.gather(*tasks)
    finally:
        stop.set()


def main() -> None:
    """Parse the flags, set up logging, and run."""
    parser = argparse.ArgumentParser(prog="python -m examples.delayed_notifications")
    parser.add_argument("--demo", action="store_true", help="publish sample events, then exit")
    parser.add_argument("--prefix", default="", help="put in front of every stream name")
    parser.add_argument("--redis-url", default=REDIS_URL, help="default %(default)s ($REDIS_URL)")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr
    )
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
