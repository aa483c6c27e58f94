"""Checks on source options that need no broker client, shared by the sources and their config.

Each failure is an :class:`~duetime.errors.InvalidInput` naming the option.
"""

from __future__ import annotations

import re

from duetime.errors import InvalidInput
from duetime.validation import check_identifier_text

_NATS_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")


def check_source_subject(value: object, field: str = "subject") -> str:
    """A subject to consume: tokens without spaces; ``*`` and ``>`` wildcards are allowed."""
    if not isinstance(value, str) or not value:
        raise InvalidInput(field, "expected a NATS subject")
    tokens = value.split(".")
    if any(c.isspace() for c in value) or "" in tokens:
        raise InvalidInput(field, f"{value!r} is not a NATS subject")
    if ">" in tokens[:-1]:
        raise InvalidInput(field, f"{value!r}: '>' may only be the last token")
    return value


def check_dead_subject(value: object, field: str = "dead_subject") -> str:
    """A concrete subject to publish dead letters to (no wildcards)."""
    subject = check_source_subject(value, field)
    if {"*", ">"} & set(subject.split(".")):
        raise InvalidInput(field, f"{subject!r} has a wildcard; dead letters need a concrete one")
    return subject


def check_stream_name(value: object, field: str = "stream") -> str:
    """A JetStream stream name: JetStream refuses dots, wildcards and spaces in it."""
    if not isinstance(value, str) or not _NATS_NAME.fullmatch(value):
        raise InvalidInput(field, f"{value!r} is not a JetStream stream name (A-Z a-z 0-9 _ -)")
    return value


def check_durable(value: object, field: str = "durable") -> str:
    """A durable consumer name, under the same rules as a stream name."""
    if not isinstance(value, str) or not _NATS_NAME.fullmatch(value):
        raise InvalidInput(field, f"{value!r} is not a consumer name (A-Z a-z 0-9 _ -)")
    return value


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether ``subject`` is captured by ``pattern`` (NATS ``*`` and ``>`` wildcards)."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


def default_stream_name(subject: str) -> str:
    """``timers.schedule`` → ``DUETIME_TIMERS_SCHEDULE``: a stream name derived from the subject."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", subject.replace("*", "ANY").replace(">", "ALL"))
    return f"DUETIME_{cleaned.upper()}"[:255]


def check_plain(value: object, field: str, *, what: str) -> str:
    """A stream, group, consumer or field name: non-empty, one line, at most 255 characters."""
    if not isinstance(value, str) or not value or len(value) > 255:
        raise InvalidInput(field, f"expected a {what} name of 1-255 characters")
    return check_identifier_text(value, field)


def check_start_id(value: object, field: str = "start_id") -> str:
    """Where a new group starts: ``0`` (everything), ``$`` (only new entries) or an entry id."""
    if not isinstance(value, str) or not (
        value in ("0", "$") or all(part.isdigit() for part in value.split("-", 1))
    ):
        raise InvalidInput(field, "expected '0', '$' or an entry id like '1700000000000-0'")
    return value
