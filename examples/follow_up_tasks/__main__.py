"""``python -m examples.follow_up_tasks``: schedule a few follow-ups, show history, run a worker.

``--once`` fires whatever is due and exits instead of running a worker.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duetime
from examples._demo import run_app
from examples.follow_up_tasks.app import (
    DATABASE_URL,
    app,
    cancel_follow_up,
    history,
    schedule_follow_up,
    schedule_follow_up_in,
)

USER = "1234"


def seed() -> None:
    """Schedule three follow-ups for one user and cancel the last while it is still pending."""
    today = datetime.now(UTC).date()
    results = [
        # bought 15 days ago: due at 00:00 UTC today, so it fires at once
        schedule_follow_up(
            app, user_id=USER, purchase_id="p-1", purchased_on=today - timedelta(days=15)
        ),
        # bought today, in Tokyo: due at 00:00 Tokyo time in 15 days
        schedule_follow_up(
            app, user_id=USER, purchase_id="p-2", purchased_on=today, timezone="Asia/Tokyo"
        ),
        # 15 calendar days from now at this wall-clock time in New York
        schedule_follow_up_in(
            app, user_id=USER, purchase_id="p-3", delay="P15D", timezone="America/New_York"
        ),
    ]
    for result in results:
        print(f"{result.action:8} {result.timer.key} due {result.timer.due_at:%Y-%m-%dT%H:%MZ}")
    try:
        cancelled = cancel_follow_up(app, USER, "p-3")
        print(f"cancelled {cancelled.key}")
    except duetime.Conflict as exc:
        print(f"could not cancel: {exc.message}")


def cancel_fired() -> None:
    """A follow-up that has fired can no longer be cancelled: show the refusal."""
    try:
        cancel_follow_up(app, USER, "p-1")
    except duetime.Conflict as exc:
        print(f"cancel p-1 refused ({exc.code}): {exc.message}")


def show_history() -> None:
    print(f"\nhistory of user {USER}:")
    for task in history(app, USER):
        when = f"{task.local:%Y-%m-%d} {task.timezone}" if task.local else "-"
        print(f"  {task.key:26} {task.status.value:10} due {task.due_at:%Y-%m-%dT%H:%MZ} ({when})")


def main() -> None:
    run_app(
        app,
        prog="python -m examples.follow_up_tasks",
        banner=f"database {DATABASE_URL}",
        fired="follow-ups",
        seed=seed,
        after_tick=cancel_fired,
        report=show_history,
    )


if __name__ == "__main__":
    main()
