"""The follow-up tasks app: "send a follow-up to user 1234, 15 days after they purchased".

Run its worker with ``duetime worker --app examples.follow_up_tasks.app:app`` from the
repository root, or ``python -m examples.follow_up_tasks``. The database comes from
``DUETIME_DATABASE_URL`` (default: ``follow_up_tasks.db`` in the working directory).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

import duetime

FOLLOW_UP = "follow-up.due"
"""The event type of a follow-up task."""
DEFAULT_ACTION = "send_follow_up_email"

DATABASE_URL = os.environ.get("DUETIME_DATABASE_URL") or "sqlite:///follow_up_tasks.db"


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A due follow-up, as the handler hands it to whoever performs it."""

    key: str
    user_id: str
    purchase_id: str
    action: str
    attempt: int

    @classmethod
    def from_event(cls, event: duetime.Event) -> FollowUp:
        return cls(
            key=event.key,
            user_id=str(event.payload["user_id"]),
            purchase_id=str(event.payload["purchase_id"]),
            action=str(event.payload["action"]),
            attempt=event.attempt,
        )


Performer = Callable[[FollowUp], None]
"""Does the follow-up (sends the email…); raising makes duetime retry it with backoff."""


def print_follow_up(task: FollowUp) -> None:
    print(f"{task.action} for user {task.user_id} (purchase {task.purchase_id})", flush=True)


def create_app(
    database_url: str | None = None,
    *,
    perform: Performer = print_follow_up,
    clock: duetime.Clock | None = None,
) -> duetime.App:
    """The follow-up app on ``database_url`` (default :data:`DATABASE_URL`)."""
    app = duetime.App(database_url or DATABASE_URL, clock=clock)

    @app.handler(FOLLOW_UP)
    def follow_up(event: duetime.Event) -> None:
        # A plain function: duetime runs it in a thread, so blocking calls are fine here.
        perform(FollowUp.from_event(event))

    return app


def task_key(user_id: str, purchase_id: str) -> str:
    """One follow-up per purchase: scheduling the same purchase again updates it."""
    return f"follow-up:{user_id}:{purchase_id}"


def _payload(user_id: str, purchase_id: str, action: str) -> dict[str, str]:
    return {"user_id": user_id, "purchase_id": purchase_id, "action": action}


def schedule_follow_up(
    app: duetime.App,
    *,
    user_id: str,
    purchase_id: str,
    purchased_on: date | str,
    days: int = 15,
    timezone: str = "UTC",
    action: str = DEFAULT_ACTION,
) -> duetime.PutResult:
    """Follow up ``days`` calendar days after ``purchased_on``, at 00:00 in ``timezone``.

    The task is due on a *date*, not at a time of day: the date form of duetime (``date=``)
    means the start of that day in the zone.
    """
    if isinstance(days, bool) or not isinstance(days, int) or days < 0:
        raise duetime.InvalidInput("days", "must be a whole number of days, zero or more")
    day = date.fromisoformat(purchased_on) if isinstance(purchased_on, str) else purchased_on
    return app.schedule(
        FOLLOW_UP,
        _payload(user_id, purchase_id, action),
        date=day + timedelta(days=days),
        timezone=timezone,
        key=task_key(user_id, purchase_id),
        subject=user_id,
    )


def schedule_follow_up_in(
    app: duetime.App,
    *,
    user_id: str,
    purchase_id: str,
    delay: str = "P15D",
    timezone: str = "UTC",
    action: str = DEFAULT_ACTION,
) -> duetime.PutResult:
    """Follow up ``delay`` from now (ISO 8601, e.g. ``P15D``), keeping the time of day.

    ``P15D`` with a zone means 15 calendar days on that zone's clock: the same wall-clock time,
    even across a daylight-saving change (then 359 or 361 real hours later, not 360).
    """
    return app.schedule(
        FOLLOW_UP,
        _payload(user_id, purchase_id, action),
        delay=delay,
        timezone=timezone,
        key=task_key(user_id, purchase_id),
        subject=user_id,
    )


def history(app: duetime.App, user_id: str) -> list[duetime.Timer]:
    """Every follow-up of a user, newest first: scheduled, done, cancelled, failed."""
    tasks: list[duetime.Timer] = []
    cursor: str | None = None
    while True:
        page = app.timers.history(user_id, type=FOLLOW_UP, cursor=cursor, limit=200)
        tasks.extend(page.items)
        if page.next_cursor is None:
            return tasks
        cursor = page.next_cursor


def cancel_follow_up(app: duetime.App, user_id: str, purchase_id: str) -> duetime.Timer:
    """Cancel a follow-up that has not run yet.

    Raises :class:`duetime.Conflict` once it has run (or was cancelled), and
    :class:`duetime.NotFound` for an unknown purchase.
    """
    return app.cancel(task_key(user_id, purchase_id))


app = create_app()
"""The app the CLI loads: ``duetime worker --app examples.follow_up_tasks.app:app``."""
