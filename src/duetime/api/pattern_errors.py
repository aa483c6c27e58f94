"""A value that does not match its field's pattern, said in a sentence.

Pydantic's own message quotes the regular expression, which for an instant is nearly 900
characters (every valid day of every year): a reader, the console's included, is shown what to
give instead; the patterns stay in the OpenAPI document, for machines.
"""

from __future__ import annotations

from duetime.api.schemas import TYPE_GLOB_PATTERN
from duetime.formats import (
    DURATION_PATTERN,
    INSTANT_PATTERN,
    PAYLOAD_MATCH_PATTERN,
    TYPE_PATTERN,
    WHEN_PATTERN,
)
from duetime.model import cursors
from duetime.model.finding import TIMER_CURSOR_PATTERN

_TYPE = "letters, digits and _ . : / -"
_CURSOR = "the next_cursor of the previous page of this listing"
_WANTED = {
    INSTANT_PATTERN: "an ISO 8601 instant with an offset, e.g. '2025-03-15T13:00:00Z'",
    WHEN_PATTERN: "an ISO 8601 instant with an offset ('2025-03-15T13:00:00Z') or a duration "
    "meaning that long ago ('P1D', 'PT1H')",
    DURATION_PATTERN: "an ISO 8601 duration ('PT2H', 'P1D') or a number of seconds",
    TYPE_PATTERN: f"an event type: {_TYPE} (e.g. 'order.paid')",
    TYPE_GLOB_PATTERN: f"an event type or a glob: {_TYPE}, with * for any characters "
    "(e.g. 'order.*')",
    PAYLOAD_MATCH_PATTERN: 'PATH=VALUE, e.g. customer.id=42 or status="paid"',
    TIMER_CURSOR_PATTERN: _CURSOR,
    **{
        getattr(cursors, name): _CURSOR for name in dir(cursors) if name.endswith("_CURSOR_PATTERN")
    },
}
MAX_ECHO = 40
"""Characters of the refused value repeated in the message."""


def _bare(pattern: str) -> str:
    """The pattern without an ``…or empty`` wrapping (``^(?:X)?$``) and its anchors."""
    inner = pattern.removeprefix("^").removesuffix("$")
    if inner.startswith("(?:") and inner.endswith(")?"):
        inner = inner[3:-2]
    return inner.removeprefix("^").removesuffix("$")


_BY_BARE = {_bare(pattern): wanted for pattern, wanted in _WANTED.items()}


def echo(value: object) -> str:
    """The refused value as quoted in a message, cut to :data:`MAX_ECHO` characters."""
    text = str(value)
    return repr(text) if len(text) <= MAX_ECHO else f"{text[:MAX_ECHO]!r}… ({len(text)} characters)"


def pattern_message(pattern: str, value: object) -> str:
    """``'yesterday' is not valid here: give an ISO 8601 instant…``."""
    wanted = _WANTED.get(pattern) or _BY_BARE.get(_bare(pattern))
    if wanted is None:
        return f"{echo(value)} is not in the form this field takes (see /docs)"
    return f"{echo(value)} is not valid here: give {wanted}"
