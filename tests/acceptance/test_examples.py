"""The two examples, driven through the testing kit on a frozen clock (and run as programs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, datetime, time
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from duetime import Conflict, NotFound, Outcome, Status
from duetime.testing import ANY_STATUS, Harness

# The examples live at the repository root, which pytest does not put on sys.path.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from examples.birthday_greeter.app import Greeting, add_user
from examples.birthday_greeter.app import create_app as create_greeter
from examples.birthday_greeter.greetings import GREETING, User, birthday_in, next_greeting_year
from examples.follow_up_tasks.app import (
    FOLLOW_UP,
    FollowUp,
    cancel_follow_up,
    history,
    schedule_follow_up,
    schedule_follow_up_in,
)
from examples.follow_up_tasks.app import create_app as create_follow_ups

ROOT = Path(__file__).resolve().parents[2]

ADA = User("ada", "Ada", date(1990, 3, 15), "America/New_York")
KENJI = User("kenji", "Kenji", date(1985, 7, 1), "Asia/Tokyo")
SITA = User("sita", "Sita", date(1992, 12, 25), "Asia/Kathmandu")
LEAP = User("leap", "Lee", date(2000, 2, 29), "Europe/London")


# -- birthday greeter ---------------------------------------------------------------------------
class Outbox:
    """A sender that records greetings, and can be told to fail the next few sends."""

    def __init__(self) -> None:
        self.sent: list[Greeting] = []
        self.failures = 0

    def __call__(self, greeting: Greeting) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("SMS provider unavailable")
        self.sent.append(greeting)

    @property
    def keys(self) -> list[str]:
        return [g.key for g in self.sent]


@pytest.fixture
def outbox() -> Outbox:
    return Outbox()


@pytest.fixture
def greeter(tmp_path: Path, outbox: Outbox) -> Iterator[Harness]:
    app = create_greeter(f"sqlite:///{tmp_path / 'greeter.db'}", sender=outbox)
    with Harness(app, start="2025-01-01T00:00:00Z") as h:
        yield h


def test_new_york_user_is_greeted_at_nine_edt_then_next_year_is_scheduled(
    greeter: Harness, outbox: Outbox
) -> None:
    assert add_user(greeter.app, ADA).action == "created"
    greeter.assert_scheduled(
        GREETING, key="birthday:ada:2025", subject="ada", due_at="2025-03-15T13:00:00Z"
    )

    greeter.travel_to("2025-03-15T12:59:59Z")
    assert greeter.run_due() == []
    assert outbox.sent == []

    greeter.travel_to("2025-03-15T13:00:00Z")  # 09:00 EDT: DST began on 9 March
    (fired,) = greeter.run_due(fail_on_error=True)
    assert fired.key == "birthday:ada:2025"
    assert fired.timer.status is Status.DONE
    assert outbox.keys == ["birthday:ada:2025"]
    assert outbox.sent[0].text == "Happy birthday, Ada!"

    greeter.assert_scheduled(
        GREETING, key="birthday:ada:2026", payload={"year": 2026}, due_at="2026-03-15T13:00:00Z"
    )
    greeter.assert_not_scheduled(key="birthday:ada:2025")


@pytest.mark.parametrize(
    ("user", "due_at"),
    [
        (KENJI, "2025-07-01T00:00:00Z"),  # 09:00 JST, +09:00
        (SITA, "2025-12-25T03:15:00Z"),  # 09:00 in Kathmandu, +05:45
    ],
)
def test_users_are_greeted_at_nine_in_their_own_zone(
    greeter: Harness, outbox: Outbox, user: User, due_at: str
) -> None:
    add_user(greeter.app, user)
    timer = greeter.assert_scheduled(GREETING, subject=user.id, due_at=due_at)
    greeter.travel_to("2025-06-30T00:00:00Z")
    greeter.run_due()
    assert outbox.sent == []
    greeter.travel_to(timer.due_at)
    greeter.run_due(fail_on_error=True)
    assert outbox.keys == [f"birthday:{user.id}:2025"]
    nine_next_year = datetime.combine(
        user.birth_date.replace(year=2026), time(9), tzinfo=ZoneInfo(user.timezone)
    )
    greeter.assert_scheduled(key=f"birthday:{user.id}:2026", due_at=nine_next_year)


def test_a_leap_day_birthday_is_greeted_on_28_february_in_other_years(
    greeter: Harness, outbox: Outbox
) -> None:
    assert birthday_in(LEAP.birth_date, 2025) == date(2025, 2, 28)
    assert birthday_in(LEAP.birth_date, 2028) == date(2028, 2, 29)
    add_user(greeter.app, LEAP)
    greeter.assert_scheduled(key="birthday:leap:2025", due_at="2025-02-28T09:00:00Z")

    greeter.travel_to("2025-02-28T09:00:00Z")
    greeter.run_due(fail_on_error=True)
    greeter.assert_scheduled(key="birthday:leap:2026", due_at="2026-02-28T09:00:00Z")
    greeter.travel_to("2026-02-28T09:00:00Z")
    greeter.run_due(fail_on_error=True)
    greeter.travel_to("2027-02-28T09:00:00Z")
    greeter.run_due(fail_on_error=True)
    greeter.assert_scheduled(key="birthday:leap:2028", due_at="2028-02-29T09:00:00Z")
    assert outbox.keys == ["birthday:leap:2025", "birthday:leap:2026", "birthday:leap:2027"]


def test_a_leap_day_birthday_on_1_march_or_only_in_leap_years(
    greeter: Harness, outbox: Outbox
) -> None:
    march = User("march", "Mia", date(2000, 2, 29), "Pacific/Auckland", feb29="mar1")
    leap_only = User("leaps", "Lou", date(2000, 2, 29), "Europe/London", feb29="skip")
    assert birthday_in(march.birth_date, 2025, "mar1") == date(2025, 3, 1)
    assert birthday_in(leap_only.birth_date, 2025, "skip") is None
    add_user(greeter.app, march)
    add_user(greeter.app, leap_only)
    greeter.assert_scheduled(key="birthday:march:2025", due_at="2025-02-28T20:00:00Z")
    greeter.assert_scheduled(key="birthday:leaps:2028", due_at="2028-02-29T09:00:00Z")
    greeter.travel_to("2025-02-28T20:00:00Z")
    greeter.run_due(fail_on_error=True)
    assert outbox.keys == ["birthday:march:2025"]
    greeter.assert_scheduled(key="birthday:march:2026", due_at="2026-02-28T20:00:00Z")
    greeter.travel_to("2028-02-29T09:00:00Z")
    greeter.run_due(fail_on_error=True)
    greeter.assert_scheduled(key="birthday:leaps:2032", due_at="2032-02-29T09:00:00Z")


def test_adding_a_user_twice_keeps_one_greeting_and_a_move_updates_it(greeter: Harness) -> None:
    add_user(greeter.app, ADA)
    assert add_user(greeter.app, ADA).action == "kept"  # the same request: nothing to change
    moved = User(ADA.id, ADA.name, ADA.birth_date, "Europe/Paris")
    add_user(greeter.app, moved)
    (timer,) = greeter.scheduled(subject="ada")
    assert timer.key == "birthday:ada:2025"
    assert timer.timezone == "Europe/Paris"
    assert timer.due_at.isoformat() == "2025-03-15T08:00:00+00:00"  # 09:00 CET


def test_a_birth_date_change_moves_the_pending_greeting_and_the_chain(
    greeter: Harness, outbox: Outbox
) -> None:
    greeter.travel_to("2025-06-01T00:00:00Z")  # this year's 15 March has passed
    add_user(greeter.app, ADA)
    greeter.assert_scheduled(key="birthday:ada:2026", due_at="2026-03-15T13:00:00Z")
    december = User(ADA.id, ADA.name, date(1990, 12, 20), ADA.timezone)
    add_user(greeter.app, december)
    (pending,) = greeter.scheduled(subject="ada")  # one greeting, on the new date
    assert pending.key == "birthday:ada:2025"
    assert pending.due_at.isoformat() == "2025-12-20T14:00:00+00:00"  # 09:00 EST
    assert add_user(greeter.app, december).action == "kept"  # twice: still one, unchanged
    assert len(greeter.scheduled(subject="ada")) == 1

    greeter.travel_to("2025-12-20T14:00:00Z")
    greeter.run_due(fail_on_error=True)
    greeter.travel_to("2026-03-15T13:00:00Z")  # the old date: nothing
    assert greeter.run_due() == []
    (following,) = greeter.scheduled(subject="ada")  # the chain stays on 20 December
    assert following.due_at.isoformat() == "2026-12-20T14:00:00+00:00"
    greeter.travel_to(following.due_at)
    greeter.run_due(fail_on_error=True)
    assert [g.user.birth_date for g in outbox.sent] == [december.birth_date] * 2
    (after,) = greeter.scheduled(subject="ada")
    assert after.due_at.isoformat() == "2027-12-20T14:00:00+00:00"


def test_changing_back_starts_a_chain_of_its_own(greeter: Harness, outbox: Outbox) -> None:
    greeter.travel_to("2025-06-01T00:00:00Z")
    add_user(greeter.app, ADA)  # 2026-03-15
    december = User(ADA.id, ADA.name, date(1990, 12, 20), ADA.timezone)
    add_user(greeter.app, december)  # 2025-12-20; the 2026 greeting is cancelled
    greeter.travel_to("2025-12-20T14:00:00Z")
    greeter.run_due(fail_on_error=True)  # sent, and 2026-12-20 is scheduled
    add_user(greeter.app, ADA)  # back to 15 March: 2026's key is taken by a cancelled greeting
    (pending,) = greeter.scheduled(subject="ada")
    assert pending.key.startswith("birthday:ada:2026:")
    assert pending.due_at.isoformat() == "2026-03-15T13:00:00+00:00"
    greeter.travel_to(pending.due_at)
    greeter.run_due(fail_on_error=True)
    (following,) = greeter.scheduled(subject="ada")
    assert following.key == pending.key.replace(":2026:", ":2027:")
    assert following.due_at.isoformat() == "2027-03-15T13:00:00+00:00"
    assert [g.user.birth_date.month for g in outbox.sent] == [12, 3]


def test_a_zone_change_moves_every_pending_greeting(greeter: Harness) -> None:
    greeter.travel_to("2025-06-01T00:00:00Z")
    add_user(greeter.app, ADA)
    december = User(ADA.id, ADA.name, date(1990, 12, 20), ADA.timezone)
    add_user(greeter.app, december)
    tokyo = User(ADA.id, ADA.name, december.birth_date, "Asia/Tokyo")
    add_user(greeter.app, tokyo)
    (pending,) = greeter.scheduled(subject="ada")
    assert pending.timezone == "Asia/Tokyo"
    assert pending.due_at.isoformat() == "2025-12-20T00:00:00+00:00"  # 09:00 JST


def test_a_user_whose_greeting_passed_this_year_gets_next_years(greeter: Harness) -> None:
    greeter.travel_to("2025-03-15T13:00:01Z")
    assert next_greeting_year(ADA, greeter.now) == 2026
    add_user(greeter.app, ADA)
    greeter.assert_scheduled(key="birthday:ada:2026")
    greeter.assert_not_scheduled(key="birthday:ada:2025", status=ANY_STATUS)


def test_a_failed_send_is_retried_without_a_second_next_year_greeting(
    greeter: Harness, outbox: Outbox
) -> None:
    add_user(greeter.app, ADA)
    outbox.failures = 1
    greeter.travel_to("2025-03-15T13:00:00Z")
    (failed,) = greeter.run_due()
    assert failed.outcome is Outcome.RETRY
    assert failed.error == "ConnectionError: SMS provider unavailable"
    greeter.assert_scheduled(key="birthday:ada:2026")

    retry = greeter.assert_scheduled(key="birthday:ada:2025", status="retrying")
    greeter.travel_to(retry.run_at)
    (sent,) = greeter.run_due(fail_on_error=True)
    assert sent.attempt == 2
    assert outbox.keys == ["birthday:ada:2025"]
    assert outbox.sent[0].attempt == 2
    assert len(greeter.scheduled(subject="ada")) == 1


def test_a_greeting_found_after_the_birthday_is_skipped_but_the_chain_goes_on(
    greeter: Harness, outbox: Outbox
) -> None:
    add_user(greeter.app, ADA)
    greeter.travel_to("2025-03-16T09:00", timezone="America/New_York")  # no worker ran all day
    (fired,) = greeter.run_due(fail_on_error=True)
    assert fired.ok
    assert outbox.sent == []
    greeter.assert_scheduled(key="birthday:ada:2026")


# -- follow-up tasks ----------------------------------------------------------------------------
@pytest.fixture
def done_tasks() -> list[FollowUp]:
    return []


@pytest.fixture
def follow_ups(tmp_path: Path, done_tasks: list[FollowUp]) -> Iterator[Harness]:
    app = create_follow_ups(f"sqlite:///{tmp_path / 'tasks.db'}", perform=done_tasks.append)
    with Harness(app, start="2025-06-01T10:00:00Z") as h:
        yield h


def test_a_follow_up_fires_15_days_after_purchase_and_stays_in_history(
    follow_ups: Harness, done_tasks: list[FollowUp]
) -> None:
    app = follow_ups.app
    result = schedule_follow_up(
        app, user_id="1234", purchase_id="p-1", purchased_on="2025-06-01", timezone="Asia/Tokyo"
    )
    assert result.action == "created"
    # 00:00 on 16 June in Tokyo (+09:00)
    follow_ups.assert_scheduled(
        FOLLOW_UP, key="follow-up:1234:p-1", subject="1234", due_at="2025-06-15T15:00:00Z"
    )
    assert [(t.key, t.status) for t in history(app, "1234")] == [
        ("follow-up:1234:p-1", Status.SCHEDULED)
    ]

    follow_ups.travel_to("2025-06-16T00:00", timezone="Asia/Tokyo")
    follow_ups.run_due(fail_on_error=True)
    assert [(t.user_id, t.purchase_id, t.action) for t in done_tasks] == [
        ("1234", "p-1", "send_follow_up_email")
    ]
    (task,) = history(app, "1234")
    assert task.status is Status.DONE
    assert task.completed_at == follow_ups.now


def test_cancel_works_while_scheduled_and_is_a_conflict_after_firing(
    follow_ups: Harness, done_tasks: list[FollowUp]
) -> None:
    app = follow_ups.app
    schedule_follow_up(app, user_id="1234", purchase_id="p-1", purchased_on=date(2025, 6, 1))
    schedule_follow_up(app, user_id="1234", purchase_id="p-2", purchased_on=date(2025, 6, 1))
    schedule_follow_up(app, user_id="5678", purchase_id="p-3", purchased_on=date(2025, 6, 1))

    assert cancel_follow_up(app, "1234", "p-2").status is Status.CANCELLED
    follow_ups.travel_to("2025-06-16T00:00:00Z")
    follow_ups.run_due(fail_on_error=True)
    assert sorted(t.purchase_id for t in done_tasks) == ["p-1", "p-3"]

    with pytest.raises(Conflict) as refused:
        cancel_follow_up(app, "1234", "p-1")
    assert refused.value.code == "conflict"
    with pytest.raises(Conflict):
        cancel_follow_up(app, "1234", "p-2")
    with pytest.raises(NotFound):
        cancel_follow_up(app, "1234", "p-404")
    statuses = {t.key: t.status for t in history(app, "1234")}
    assert statuses == {
        "follow-up:1234:p-1": Status.DONE,
        "follow-up:1234:p-2": Status.CANCELLED,
    }


def test_a_p15d_delay_keeps_the_wall_clock_time_across_the_end_of_dst(
    follow_ups: Harness,
) -> None:
    follow_ups.travel_to("2025-10-25T09:00", timezone="America/New_York")  # 13:00Z, EDT
    schedule_follow_up_in(
        follow_ups.app, user_id="1234", purchase_id="p-9", timezone="America/New_York"
    )
    # 09:00 EST on 9 November: 361 real hours later
    follow_ups.assert_scheduled(key="follow-up:1234:p-9", due_at="2025-11-09T14:00:00Z")


def test_scheduling_the_same_purchase_again_moves_the_pending_task(follow_ups: Harness) -> None:
    app = follow_ups.app
    schedule_follow_up(app, user_id="1234", purchase_id="p-1", purchased_on="2025-06-01")
    again = schedule_follow_up(
        app, user_id="1234", purchase_id="p-1", purchased_on="2025-06-01", days=30
    )
    assert again.action == "updated"
    (task,) = follow_ups.scheduled(subject="1234")
    assert task.due_at.isoformat() == "2025-07-01T00:00:00+00:00"


# -- the examples as programs -------------------------------------------------------------------
def run_example(module: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DUETIME_DATABASE_URL": f"sqlite:///{tmp_path / 'example.db'}"}
    return subprocess.run(
        [sys.executable, "-m", module, "--once"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_birthday_greeter_runs_as_a_program(tmp_path: Path) -> None:
    done = run_example("examples.birthday_greeter", tmp_path)
    assert done.returncode == 0, done.stderr
    for user in ("ada", "kenji", "sita", "leap"):
        assert f"created  birthday:{user}:" in done.stdout
    assert "fired 0 due greetings" in done.stdout
    again = run_example("examples.birthday_greeter", tmp_path)
    assert again.returncode == 0, again.stderr
    assert "updated  birthday:ada:" in again.stdout


def test_follow_up_tasks_runs_as_a_program(tmp_path: Path) -> None:
    done = run_example("examples.follow_up_tasks", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "send_follow_up_email for user 1234 (purchase p-1)" in done.stdout
    assert "fired 1 due follow-ups" in done.stdout
    assert "cancel p-1 refused (conflict)" in done.stdout
    assert "follow-up:1234:p-1         done" in done.stdout
    assert "follow-up:1234:p-3         cancelled" in done.stdout


def duetime_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DUETIME_DATABASE_URL": f"sqlite:///{tmp_path / 'cli.db'}"}
    return subprocess.run(
        [sys.executable, "-m", "duetime.cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_duetime_tick_runs_an_examples_handlers(tmp_path: Path) -> None:
    payload = '{"user_id": "42", "purchase_id": "p-7", "action": "send_follow_up_email"}'
    scheduled = duetime_cli(
        tmp_path, "schedule", FOLLOW_UP, "--payload", payload, "--delay", "0",
        "--key", "follow-up:42:p-7", "--subject", "42",
    )  # fmt: skip
    assert scheduled.returncode == 0, scheduled.stderr
    ticked = duetime_cli(tmp_path, "tick", "--app", "examples.follow_up_tasks.app:app")
    assert ticked.returncode == 0, ticked.stderr
    assert "send_follow_up_email for user 42 (purchase p-7)" in ticked.stdout
    listed = duetime_cli(tmp_path, "--json", "ls", "--subject", "42")
    assert listed.returncode == 0, listed.stderr
    (timer,) = json.loads(listed.stdout)["items"]
    assert timer["status"] == "done"
    refused = duetime_cli(tmp_path, "cancel", "follow-up:42:p-7")
    assert refused.returncode == 4
    assert "[conflict]" in refused.stderr
