"""Handlers in a module named by ``DUETIME["HANDLERS"]`` (imported at start like an app's own
``duetime_handlers``)."""

from __future__ import annotations

from duetime import Event
from duetime.contrib.django import handler

from .notes.duetime_handlers import SEEN


@handler("note.archived")
def note_archived(event: Event) -> None:
    SEEN.append(("note.archived", event.payload))
