"""``python -m examples.follow_up_tasks``: schedule a few follow-ups, show history, run a worker.

``--once`` fires whatever is due and exits instead of running a worker.
"""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime, timedelta

import duetime
from examples.follow_up_tasks.app import (
    DATABASE_URL,
    app,
    cancel_follow_up,
    history,
    schedule_follow_up,
    schedule_follow_up_in,
)

USER = "1234"


def show_history(user_id: str) -> None:
    print(f"\nhistory of user {user_id}:")
    for task in history(app, user_id):
        when = f"{task.local:%Y-%m-%d} {task.timezone}" if task.local else "-"
        print(f"  {task.key:26} {task.status.value:10} due {task.due_at:%Y-%m-%dT%H:%MZ} ({when})")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.follow_up_tasks")
    parser.add_argument(
        "--once", action="store_true", help="fire what is due now, then exit (no worker)"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")

    today = datetime.now(UTC).date()
    print(f"database {DATABASE_URL}")
    with app:
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
        if args.once:
            stats = app.tick()
            print(f"\nfired {stats.total()} due follow-ups: {dict(stats.outcomes)}")
            try:
                cancel_follow_up(app, USER, "p-1")
            except duetime.Conflict as exc:
                print(f"cancel p-1 refused ({exc.code}): {exc.message}")
        show_history(USER)
        if args.once:
            return
    print("\nworker running; Ctrl-C to stop")
    app.run_worker()


if __name__ == "__main__":
    main()
