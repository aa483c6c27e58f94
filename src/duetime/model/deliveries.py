"""How a fanned-out event's deliveries are named: the rule the store and the router share.

An event that several destinations want fans out into one delivery row per destination, keyed
``<event key>@<destination>`` so delivering it twice is impossible, and the event's own attempt
records to whom it went.
"""

from __future__ import annotations

from collections.abc import Sequence

DELIVERY_SEPARATOR = "@"
"""Between an event's key and a destination's name in the key of a delivery row."""


def delivery_key(key: str, destination: str) -> str:
    """The key of the delivery row of event ``key`` to ``destination``."""
    return f"{key}{DELIVERY_SEPARATOR}{destination}"


def event_key(key: str, destination: str | None) -> str:
    """The event's own key, from a row's key: a delivery row's minus its destination suffix."""
    if destination is None:
        return key
    suffix = DELIVERY_SEPARATOR + destination
    return key[: -len(suffix)] if key.endswith(suffix) else key


def fan_out_note(destinations: Sequence[str]) -> str:
    """What the event's attempt records when it fans out."""
    count = len(destinations)
    return f"fanned out to {count} deliver{'y' if count == 1 else 'ies'}: {', '.join(destinations)}"
