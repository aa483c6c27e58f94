"""The birthday greeter's duetime app: one handler, and the calls that schedule greetings.

Run its worker with ``duetime worker --app examples.birthday_greeter.app:app`` from the
repository root, or ``python -m examples.birthday_greeter``. The database comes from
``DUETIME_DATABASE_URL`` (default: ``birthday_greeter.db`` in the working directory).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

import duetime
from examples.birthday_greeter.greetings import (
    GREETING,
    User,
    birthday_in,
    greeting_request,
    is_still_birthday,
    next_greeting_year,
)

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL") or "sqlite:///birthday_greeter.db"

log = logging.getLogger("examples.birthday_greeter")


@dataclass(frozen=True, slots=True)
class Greeting:
    """One greeting to deliver; ``key`` is stable across retries, for the provider to dedupe."""

    key: str
    user: User
    year: int
    attempt: int

    @property
    def text(self) -> str:
        return f"Happy birthday, {self.user.name}!"


Sender = Callable[[Greeting], None]
"""Delivers a greeting (email, SMS, push…); raising makes duetime retry it with backoff."""


def print_greeting(greeting: Greeting) -> None:
    day = birthday_in(greeting.user.birth_date, greeting.year)
    print(f"{greeting.text} ({greeting.user.id}, {day}, {greeting.user.timezone})", flush=True)


def create_app(
    database_url: str | None = None,
    *,
    sender: Sender = print_greeting,
    clock: duetime.Clock | None = None,
) -> duetime.App:
    """The greeter on ``database_url`` (default :data:`DATABASE_URL`), sending with ``sender``."""
    app = duetime.App(database_url or DATABASE_URL, clock=clock)

    @app.handler(GREETING)
    async def greet(event: duetime.Event) -> None:
        user = User.from_payload(event.payload)
        year = int(event.payload["year"])
        # Next year's greeting first. Its key makes this idempotent: if sending fails below and
        # this attempt is retried, the second call keeps the timer the first one stored.
        # (The async facade, app.core, runs on the worker's own event loop.)
        await app.core.schedule_many([greeting_request(user, year + 1)], on_conflict="keep")
        if not is_still_birthday(user, year, app.core.clock.now()):
            # The worker was down through the whole birthday: a greeting a day late reads
            # oddly, so skip it (next year's is scheduled). expires_after would not do here:
            # an expired timer never reaches this handler, and the yearly chain would break.
            log.warning(
                "skipping %s: %s's birthday is over in %s", event.key, user.name, user.timezone
            )
            return
        # The sender may block (an HTTP call): run it off the event loop.
        await asyncio.to_thread(sender, Greeting(event.key, user, year, event.attempt))

    return app


def add_user(app: duetime.App, user: User) -> duetime.PutResult:
    """Schedule ``user``'s next greeting; call it again after they change birth date or zone.

    ``on_conflict="update"`` moves a pending greeting to the user's new zone; one that has
    already been sent is left as it is (and the answer says ``kept``).
    """
    year = next_greeting_year(user, app.core.clock.now())
    (result,) = app.schedule_many([greeting_request(user, year)], on_conflict="update")
    return result


def upcoming(app: duetime.App, user_id: str) -> list[duetime.Timer]:
    """A user's greetings that have not been sent yet."""
    page = app.history(user_id, status=duetime.Status.SCHEDULED)
    return sorted(page.items, key=lambda timer: timer.due_at)


app = create_app()
"""The app the CLI loads: ``duetime worker --app examples.birthday_greeter.app:app``."""
