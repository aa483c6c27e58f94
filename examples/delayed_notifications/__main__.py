"""``python -m examples.delayed_notifications``: run the notification worker until Ctrl-C.

On Kafka by default (``--broker redis`` for the Redis Streams variant). Without
``--bootstrap-servers`` or ``KAFKA_BOOTSTRAP_SERVERS`` it starts a private in-memory broker
(Tansu, from ``duetime[test]``) for the run, so it works from a fresh clone. ``--demo`` also
publishes sample schedule-events (see :mod:`.demos`), prints what became of them, then exits.
``--prefix staging`` names the topics (or streams) ``staging.schedule-event`` and
``staging.delayed-notification-sender``; a prefix that ends in a separator of its own
(``staging-``) is used as it is.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os

from duetime.testing.tansu import GROUP_CONFIG, tansu
from examples._demo import run_service
from examples.delayed_notifications.app import (
    DATABASE_URL,
    NOTIFICATION_SENDER,
    SCHEDULE_EVENT,
    DelayedNotifications,
    named,
)
from examples.delayed_notifications.demos import demo
from examples.delayed_notifications.on_kafka import KafkaTopology
from examples.delayed_notifications.on_redis import REDIS_URL, RedisTopology


def kafka_topology(args: argparse.Namespace) -> KafkaTopology:
    servers = args.bootstrap_servers
    config = {}
    if not servers:
        broker = contextlib.ExitStack()
        servers = broker.enter_context(tansu())
        atexit.register(broker.close)
        config = dict(GROUP_CONFIG)
        print(f"no KAFKA_BOOTSTRAP_SERVERS: started an in-memory Tansu broker at {servers}")
    return KafkaTopology(
        bootstrap_servers=servers,
        schedule_topic=named(args.prefix, SCHEDULE_EVENT),
        notification_topic=named(args.prefix, NOTIFICATION_SENDER),
        client_config=config,
    )


def build(args: argparse.Namespace) -> DelayedNotifications:
    if args.broker == "redis":
        topology = RedisTopology(
            redis_url=args.redis_url,
            schedule_stream=named(args.prefix, SCHEDULE_EVENT),
            notification_stream=named(args.prefix, NOTIFICATION_SENDER),
        )
        return DelayedNotifications(topology=topology)
    return DelayedNotifications(topology=kafka_topology(args))


def describe(service: DelayedNotifications) -> str:
    return f"database {DATABASE_URL}; {service.topology.describe()}"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.delayed_notifications")
    parser.add_argument("--broker", choices=("kafka", "redis"), default="kafka")
    parser.add_argument(
        "--prefix", default="", help="put in front of every topic/stream name, joined with '.'"
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka host:port ($KAFKA_BOOTSTRAP_SERVERS); unset: a private in-memory broker",
    )
    parser.add_argument("--redis-url", default=REDIS_URL, help="default %(default)s ($REDIS_URL)")
    run_service(parser, build, describe, demo, demo_help="publish sample events, then exit")


if __name__ == "__main__":
    main()
