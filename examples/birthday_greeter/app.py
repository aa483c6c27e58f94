"""The birthday greeter's duetime app: one handler, and the calls that schedule greetings.

Run its worker with ``duetime worker --app examples.birthday_greeter.app:app`` from the
repository root, or ``python -m examples.birthday_greeter``. The database comes from
``DUETIME_DATABASE_URL`` (default: ``birthday_greeter.db`` in the working directory).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
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
    greeting_year_from,
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
    day = birthday_in(greeting.user.birth_date, greeting.year, greeting.user.feb29)
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
        series = str(event.payload.get("series", ""))
        following = greeting_year_from(
            user, year + 1
        )  # a skipped 29 February waits for a leap year
        await schedule_greeting(app.core, user, following, series, fallback=digest(event.key))
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


async def schedule_greeting(
    core: duetime.AsyncApp, user: User, year: int, series: str, *, fallback: str
) -> duetime.PutResult:
    """Store ``user``'s greeting in ``year`` in chain ``series``, or keep the one stored.

    A key already taken by a greeting that was sent or cancelled (the user changed and changed
    back) is kept by duetime as it is, which would end the yearly chain: the greeting then goes
    in chain ``fallback`` instead. Retried, this makes the same choices, so it stores one."""
    for chain in (series, fallback):
        request = greeting_request(user, year, chain)
        (result,) = await core.timers.schedule_many([request], on_conflict="update")
        if result.timer.status in PENDING:
            return result
    return result


def digest(text: str) -> str:
    """A short, stable name for a new chain of greetings, made from ``text``."""
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def add_user(app: duetime.App, user: User) -> duetime.PutResult:
    """Schedule ``user``'s next greeting; call it again after they change birth date or zone.

    The user's pending greeting moves to the new details (its key stays when the year does),
    and every other greeting of theirs not yet sent is cancelled, so exactly one is pending and
    the yearly chain continues from the new birthday. Calling it twice changes nothing.
    """
    now = app.core.clock.now()
    year = next_greeting_year(user, now)
    pending = upcoming(app, user.id)
    series = next((str(t.payload.get("series", "")) for t in pending if _year(t) == year), "")
    fallback = digest(f"{user}:{now.isoformat()}")
    for chain in (series, fallback):  # as schedule_greeting does, from blocking code
        (result,) = app.timers.schedule_many(
            [greeting_request(user, year, chain)], on_conflict="update"
        )
        if result.timer.status in PENDING:
            break
    for timer in pending:
        if timer.key != result.timer.key:
            with contextlib.suppress(duetime.Conflict):  # it started meanwhile: let it be
                app.cancel(timer.key)
    return result


def _year(timer: duetime.Timer) -> int | None:
    year = timer.payload.get("year") if isinstance(timer.payload, dict) else None
    return year if isinstance(year, int) else None


PENDING = (duetime.Status.SCHEDULED, duetime.Status.RETRYING)


def upcoming(app: duetime.App, user_id: str) -> list[duetime.Timer]:
    """A user's greetings that have not been sent yet."""
    page = app.timers.history(user_id, status=duetime.Status.SCHEDULED)
    return sorted(page.items, key=lambda timer: timer.due_at)


app = create_app()
"""The app the CLI loads: ``duetime worker --app examples.birthday_greeter.app:app``."""
