"""RFC 5545 calendar schedules through REST and the CLI, as a user would define them."""

from __future__ import annotations

from typing import Any

from .conftest import Cli
from .test_api_schedules import NS, Api, api  # noqa: F401 - the fixture

PAYROLL: dict[str, Any] = {
    "name": "payroll",
    "type": "payroll.run",
    "rrule": "FREQ=MONTHLY;BYMONTHDAY=15,-1",
    "dtstart": "2025-03-14T09:00",
    "timezone": "Europe/Berlin",
    "holidays": "DE-BE",
    "roll": "backward",
}


def test_rest_defines_a_calendar_schedule_and_refuses_a_bad_rule(api: Api) -> None:  # noqa: F811
    created = api.post(f"{NS}/schedules", PAYROLL)
    assert created.status_code == 201, created.text
    schedule = created.json()["schedule"]
    assert schedule["rrule"] == "FREQ=MONTHLY;BYMONTHDAY=15,-1"
    assert schedule["cron"] is None
    assert schedule["holidays"] == "DE-BE"
    assert schedule["next_at"] == "2025-03-14T08:00:00Z"  # the 15th is a Saturday
    shown = api.get(f"{NS}/schedules/payroll", count=3).json()
    assert [o["utc"] for o in shown["next"]] == [
        "2025-03-14T08:00:00Z",
        "2025-03-31T07:00:00Z",
        "2025-04-15T07:00:00Z",
    ]
    bad = api.post(f"{NS}/schedules", {**PAYROLL, "name": "bad", "rrule": "FREQ=DAILY;BYSETPOS=1"})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "rrule"
    assert "BYSETPOS" in bad.json()["message"]
    assert [s["name"] for s in api.get(f"{NS}/schedules").json()["items"]] == ["payroll"]
    patched = api.patch(f"{NS}/schedules/payroll", {"exdates": ["2025-03-14T09:00"]})
    assert patched.status_code == 200, patched.text
    assert patched.json()["schedule"]["next_at"] == "2025-03-31T07:00:00Z"


def test_rest_preview_of_an_rrule_starts_at_dtstart(api: Api) -> None:  # noqa: F811
    answer = api.get(
        "/v1/preview",
        rrule="FREQ=DAILY;COUNT=3",
        dtstart="2025-03-08T02:30",
        timezone="America/New_York",
        count=5,
    )
    assert answer.status_code == 200, answer.text
    assert [o["utc"] for o in answer.json()["occurrences"]] == [
        "2025-03-08T07:30:00Z",
        "2025-03-09T07:30:00Z",
        "2025-03-10T06:30:00Z",
    ]


def test_cli_next_previews_an_rrule_exactly(cli: Cli) -> None:
    got = cli.ok(
        "next",
        "--rrule",
        "FREQ=DAILY;COUNT=4",
        "--dtstart",
        "2025-03-08T02:30",
        "--timezone",
        "America/New_York",
        "--exdate",
        "2025-03-10T02:30",
        "--rdate",
        "2025-03-20T12:00",
        "--count",
        "10",
    )
    assert got["occurrences"] == [
        {"utc": "2025-03-08T07:30:00Z", "local": "2025-03-08T02:30:00-05:00"},
        {"utc": "2025-03-09T07:30:00Z", "local": "2025-03-09T03:30:00-04:00"},
        {"utc": "2025-03-11T06:30:00Z", "local": "2025-03-11T02:30:00-04:00"},
        {"utc": "2025-03-20T16:00:00Z", "local": "2025-03-20T12:00:00-04:00"},
    ]
    error = cli.fails(
        "next",
        "--rrule",
        "FREQ=DAILY;COUNT=2;UNTIL=20300101T000000Z",
        "--dtstart",
        "2025-03-08T09:00",
        "--count",
        "3",
        code=2,
    )
    assert error["field"] == "rrule"
    assert "COUNT" in error["message"]


def test_cli_schedules_add_with_rrule_and_refusal_stores_nothing(cli: Cli) -> None:
    cli.ok("namespaces", "create", "default")
    made = cli.ok(
        "schedules",
        "add",
        "weekdays",
        "standup",
        "--rrule",
        "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
        "--dtstart",
        "2030-01-07T09:00",
        "--timezone",
        "Asia/Tokyo",
        "--exdate",
        "2030-01-08T09:00",
        "--holidays",
        "JP",
    )
    schedule = made["schedule"]
    assert schedule["rrule"] == "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
    assert schedule["exdates"] == ["2030-01-08T09:00:00"]
    assert schedule["roll"] == "skip"
    assert schedule["next_at"] == "2030-01-07T00:00:00Z"
    error = cli.fails(
        "schedules",
        "add",
        "bad",
        "t",
        "--rrule",
        "FREQ=DAILY;BYWHEN=1",
        "--dtstart",
        "2030-01-07T09:00",
        code=2,
    )
    assert error["field"] == "rrule"
    assert "BYWHEN" in error["message"]
    listed = cli.ok("schedules", "ls")
    assert [s["name"] for s in listed["items"]] == ["weekdays"]


def test_rest_patch_changes_weekend_and_holiday_dates(api: Api) -> None:  # noqa: F811
    created = api.post(f"{NS}/schedules", {**PAYROLL, "holidays": None})
    assert created.status_code == 201, created.text
    gulf = api.patch(f"{NS}/schedules/payroll", {"weekend": ["fri", "sat"]})
    assert gulf.status_code == 200, gulf.text
    assert gulf.json()["schedule"]["weekend"] == ["fri", "sat"]
    assert gulf.json()["schedule"]["next_at"] == "2025-03-13T08:00:00Z"  # Sat and Fri: Thu
    own = api.patch(f"{NS}/schedules/payroll", {"holiday_dates": ["2025-03-13", "2025-03-12"]})
    assert own.status_code == 200, own.text
    assert own.json()["schedule"]["holiday_dates"] == ["2025-03-12", "2025-03-13"]
    assert own.json()["schedule"]["next_at"] == "2025-03-11T08:00:00Z"
    bad = api.patch(f"{NS}/schedules/payroll", {"holiday_dates": ["2025-13-01"]})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "holiday_dates"
    bad = api.patch(f"{NS}/schedules/payroll", {"weekend": "mon,funday"})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "weekend"
    kept = api.get(f"{NS}/schedules/payroll").json()
    assert kept["schedule"]["holiday_dates"] == ["2025-03-12", "2025-03-13"]


def test_cli_schedules_update_changes_weekend_and_holiday_dates(cli: Cli) -> None:
    cli.ok("namespaces", "create", "default")
    cli.ok(
        "schedules",
        "add",
        "pay",
        "t",
        "--rrule",
        "FREQ=MONTHLY;BYMONTHDAY=15",
        "--dtstart",
        "2030-03-15T09:00",
        "--timezone",
        "Asia/Dubai",
        "--roll",
        "backward",
    )
    # 15 March 2030 is a Friday: a business day until the weekend is Friday and Saturday.
    updated = cli.ok("schedules", "update", "pay", "--weekend", "fri,sat")
    assert updated["schedule"]["weekend"] == ["fri", "sat"]
    assert updated["schedule"]["next_at"] == "2030-03-14T05:00:00Z"
    updated = cli.ok("schedules", "update", "pay", "--holiday-date", "2030-03-14")
    assert updated["schedule"]["holiday_dates"] == ["2030-03-14"]
    assert updated["schedule"]["next_at"] == "2030-03-13T05:00:00Z"
    error = cli.fails("schedules", "update", "pay", "--weekend", "someday", code=2)
    assert error["field"] == "weekend"


def test_cli_schedules_show_names_the_whole_calendar(cli: Cli) -> None:
    """The human view shows what decides the days besides the RRULE: exceptions, the holiday
    set, the weekend, the roll and 29 February — defaults included."""
    cli.ok("namespaces", "create", "default")
    cli.ok(
        "schedules",
        "add",
        "pay",
        "payroll.run",
        "--rrule",
        "FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29",
        "--dtstart",
        "2028-02-29T09:00",
        "--timezone",
        "Europe/Berlin",
        "--exdate",
        "2032-02-29T09:00",
        "--holidays",
        "DE-BE",
        "--holiday-date",
        "2030-03-01",
        "--roll",
        "forward",
        "--feb29",
        "mar1",
    )
    shown = cli("schedules", "show", "pay")
    assert shown.code == 0, shown.stderr
    rows = {
        name: value.strip()
        for name, _, value in (line.partition(" ") for line in shown.stdout.splitlines())
        if name
    }
    assert rows["rule"].startswith("rrule FREQ=YEARLY;")
    assert rows["exdates"] == "2032-02-29T09:00:00"
    assert rows["holidays"] == "DE-BE"
    assert rows["holiday_dates"] == "2030-03-01"
    assert rows["weekend"] == "sat, sun"
    assert rows["roll"] == "forward"
    assert rows["feb29"] == "mar1"


def test_rest_refuses_a_leap_second_naming_bysecond(api: Api) -> None:  # noqa: F811
    for rule in ("FREQ=SECONDLY;BYSECOND=60", "FREQ=DAILY;BYSECOND=59,60"):
        bad = api.post(f"{NS}/schedules", {**PAYROLL, "name": "leap", "rrule": rule})
        assert bad.status_code == 422, bad.text
        assert bad.json()["field"] == "rrule"
        assert bad.json()["message"].startswith("rrule: BYSECOND: 60")
        preview = api.get("/v1/preview", rrule=rule, dtstart="2025-03-08T09:00", count=2)
        assert preview.status_code == 422, preview.text
        assert "BYSECOND" in preview.json()["message"]
    assert api.get(f"{NS}/schedules").json()["items"] == []


def test_rest_takes_the_modified_rolls_and_refuses_others_naming_roll(
    api: Api,  # noqa: F811
) -> None:
    body = {**PAYROLL, "holidays": None, "rrule": "FREQ=MONTHLY;BYMONTHDAY=-1"}
    body["dtstart"] = "2025-05-31T09:00"  # a Saturday: modified_forward keeps it in May
    created = api.post(f"{NS}/schedules", {**body, "roll": "modified_forward"})
    assert created.status_code == 201, created.text
    assert created.json()["schedule"]["roll"] == "modified_forward"
    assert created.json()["schedule"]["next_at"] == "2025-05-30T07:00:00Z"
    bad = api.post(f"{NS}/schedules", {**body, "name": "bad", "roll": "modified_following"})
    assert bad.status_code == 422, bad.text
    assert bad.json()["field"] == "roll"
    patched = api.patch(f"{NS}/schedules/payroll", {"roll": "modified_backward"})
    assert patched.status_code == 200, patched.text
    assert patched.json()["schedule"]["roll"] == "modified_backward"
    first = api.get(
        "/v1/preview",
        rrule="FREQ=MONTHLY;BYMONTHDAY=1",
        dtstart="2027-05-01T09:00",
        timezone="Europe/Berlin",
        roll="modified_backward",
        count=2,
    )
    assert first.status_code == 200, first.text
    assert [o["local"][:10] for o in first.json()["occurrences"]] == ["2027-05-03", "2027-06-01"]


def test_preview_from_dtstart_lists_a_first_occurrence_rolled_back_before_it(
    api: Api,  # noqa: F811
) -> None:
    # Saturday 1 May 2027 rolled back to Friday 30 April: that is when it fires.
    answer = api.get(
        "/v1/preview",
        rrule="FREQ=MONTHLY;BYMONTHDAY=1",
        dtstart="2027-05-01T09:00",
        timezone="Europe/Berlin",
        roll="backward",
        count=2,
    )
    assert answer.status_code == 200, answer.text
    assert [o["local"] for o in answer.json()["occurrences"]] == [
        "2027-04-30T09:00:00+02:00",
        "2027-06-01T09:00:00+02:00",
    ]


def test_cli_takes_the_modified_rolls(cli: Cli) -> None:
    got = cli.ok(
        "next",
        "--rrule",
        "FREQ=MONTHLY;BYMONTHDAY=-1",
        "--dtstart",
        "2027-07-31T09:00",
        "--timezone",
        "Europe/Berlin",
        "--roll",
        "modified_forward",
        "--count",
        "1",
    )
    assert [o["local"] for o in got["occurrences"]] == ["2027-07-30T09:00:00+02:00"]
    cli.fails(
        "next",
        "--rrule",
        "FREQ=MONTHLY",
        "--dtstart",
        "2027-07-31T09:00",
        "--roll",
        "modified_following",
        code=2,
    )
