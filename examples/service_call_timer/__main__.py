"""``python -m examples.service_call_timer``: run the timer service until Ctrl-C.

``--demo`` also publishes a few ScheduleTimer commands (one moved by a second command, one
malformed), prints each DueTimeReached event as it arrives and the dead-lettered command, then
exits. ``--prefix`` names the subjects and streams (default ``service-calls.timer``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from datetime import UTC, datetime

import nats
from nats.js import api

from examples._demo import in_seconds, run_service
from examples.service_call_timer.app import (
    DATABASE_URL,
    NATS_URL,
    PREFIX,
    ServiceCallTimer,
    Topology,
    schedule_timer,
)


def build(args: argparse.Namespace) -> ServiceCallTimer:
    return ServiceCallTimer(topology=Topology(nats_url=args.nats_url, prefix=args.prefix))


def describe(service: ServiceCallTimer) -> str:
    topology = service.topology
    return (
        f"database {DATABASE_URL}; commands on {topology.commands_subject}, "
        f"events on {topology.events_subject}"
    )


async def demo(service: ServiceCallTimer) -> None:
    """Publish sample commands, then print the events and the dead letter they lead to."""
    topology = service.topology
    await service.ensure_streams()
    nc = await nats.connect(topology.nats_url)
    try:
        js = nc.jetstream()
        new_only = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.NEW)
        events = await js.pull_subscribe(
            topology.events_subject, stream=topology.events_stream, config=new_only
        )
        dead = await js.pull_subscribe(
            topology.dead_subject, stream=topology.commands_stream, config=new_only
        )
        run = datetime.now(UTC).strftime("%H%M%S")
        commands = [
            schedule_timer("acme", f"call-{run}-1", in_seconds(2)),
            schedule_timer("acme", f"call-{run}-2", in_seconds(1)),
            # the same call again: its due time moves (an upsert, not a second timer)
            schedule_timer("acme", f"call-{run}-2", in_seconds(3)),
            # malformed: no UTC offset, so it is dead-lettered with the reason
            {"tenantId": "acme", "serviceCallId": f"call-{run}-3", "dueAt": "2030-01-01T09:00"},
        ]
        for command in commands:
            await js.publish(topology.commands_subject, json.dumps(command).encode())
            print(f"published ScheduleTimer {json.dumps(command)}", flush=True)
        received = 0
        while received < 2:
            with contextlib.suppress(nats.errors.TimeoutError):
                for msg in await events.fetch(1, timeout=1):
                    await msg.ack()
                    envelope = json.loads(msg.data)
                    msg_id = msg.headers.get("Nats-Msg-Id") if msg.headers else None
                    print(f"DueTimeReached {json.dumps(envelope)} Nats-Msg-Id={msg_id}", flush=True)
                    received += 1
        for msg in await dead.fetch(1, timeout=5):
            await msg.ack()
            reason = msg.headers.get("Duetime-Dead-Reason") if msg.headers else None
            print(f"dead-lettered {msg.data.decode()} reason: {reason}", flush=True)
    finally:
        await nc.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.service_call_timer")
    parser.add_argument("--prefix", default=PREFIX, help="subject prefix (default %(default)s)")
    parser.add_argument("--nats-url", default=NATS_URL, help="default %(default)s ($NATS_URL)")
    run_service(parser, build, describe, demo, demo_help="publish sample commands, then exit")


if __name__ == "__main__":
    main()
