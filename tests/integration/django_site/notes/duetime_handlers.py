"""Handlers of the test project, found by the app's autodiscovery of ``duetime_handlers``."""

from __future__ import annotations

from typing import Any

from duetime import Dead, Event
from duetime.contrib.django import handler

from .models import Note

SEEN: list[tuple[str, Any]] = []
"""What the handlers saw, for the tests to read."""


@handler("note.created")
def note_created(event: Event) -> None:
    SEEN.append(("note.created", event.payload))


@handler("note.close", transactional=True)
def close_note(event: Event, connection: Any) -> None:
    """Closes the note in the transaction that completes the timer; ``fail_first`` makes the
    first attempt raise after its write, and ``dead`` every attempt declare the timer dead: the
    write must roll back either way."""
    SEEN.append(("note.close", (event.attempt, connection.in_atomic_block)))
    assert isinstance(event.payload, dict)
    Note.objects.filter(pk=event.payload["note"]).update(closed=True)
    if event.payload.get("fail_first") and event.attempt == 1:
        raise RuntimeError("the first attempt fails after its write")
    if event.payload.get("dead"):
        raise Dead("this note may not be closed")
