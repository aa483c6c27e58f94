"""``python -m examples.birthday_greeter``: seed a few users, show their greetings, run a worker.

``--once`` fires whatever is due and exits instead of running a worker (as ``duetime tick``
would from cron). Seeding is idempotent: run it as often as you like.
"""

from __future__ import annotations

from datetime import date

from duetime.timemath.tzmath import tzdata_version
from examples._demo import run_app
from examples.birthday_greeter.app import DATABASE_URL, add_user, app, upcoming
from examples.birthday_greeter.greetings import User

USERS = [
    User("ada", "Ada", date(1990, 3, 15), "America/New_York"),
    User("kenji", "Kenji", date(1985, 7, 1), "Asia/Tokyo"),
    User("sita", "Sita", date(1992, 12, 25), "Asia/Kathmandu"),
    User("leap", "Lee", date(2000, 2, 29), "Australia/Lord_Howe"),
]


def seed() -> None:
    """Add every user (again: an update), then list each one's next greeting."""
    for user in USERS:
        result = add_user(app, user)
        print(f"{result.action:8} {result.timer.key}")
    print()
    print(f"{'key':28} {'local time':17} {'zone':22} due (UTC)")
    for user in USERS:
        for timer in upcoming(app, user.id):
            local = timer.local.isoformat(timespec="minutes") if timer.local else "-"
            zone = timer.timezone or "-"
            print(f"{timer.key:28} {local:17} {zone:22} {timer.due_at:%Y-%m-%dT%H:%MZ}")


def main() -> None:
    run_app(
        app,
        prog="python -m examples.birthday_greeter",
        banner=f"database {DATABASE_URL} (tzdata {tzdata_version()})",
        fired="greetings",
        seed=seed,
    )


if __name__ == "__main__":
    main()
