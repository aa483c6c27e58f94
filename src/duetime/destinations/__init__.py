"""Destinations: where due events go besides Python handlers — webhooks and message brokers.

The webhook destination is always available; the broker ones live in their own modules
(:mod:`.nats`, :mod:`.redis_stream`, :mod:`.rabbitmq`) and need ``duetime[brokers]``. Other
packages add kinds through entry points (:mod:`.plugins`).
"""

from typing import TYPE_CHECKING

from duetime.destinations.base import (
    Delivery,
    DeliveryFailed,
    Destination,
    delivery_id,
    envelope,
    envelope_json,
)
from duetime.destinations.config import DestinationSpec, parse_destinations
from duetime.destinations.handler import as_handler, deliver_event
from duetime.destinations.registry import Destinations, build_destination
from duetime.support.lazy import exports

# The webhook module brings httpx (and, through it, rich and click): only a process that builds
# a webhook destination imports it.
if TYPE_CHECKING:
    from duetime.destinations.webhook import WebhookDestination, verify_signature
else:
    __getattr__, __dir__ = exports(
        __name__,
        {
            "WebhookDestination": "duetime.destinations.webhook",
            "verify_signature": "duetime.destinations.webhook",
        },
    )

__all__ = [
    "Delivery",
    "DeliveryFailed",
    "Destination",
    "DestinationSpec",
    "Destinations",
    "WebhookDestination",
    "as_handler",
    "build_destination",
    "deliver_event",
    "delivery_id",
    "envelope",
    "envelope_json",
    "parse_destinations",
    "verify_signature",
]
