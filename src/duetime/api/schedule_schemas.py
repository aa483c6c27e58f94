"""The documented shapes of the schedule endpoints' requests and answers (for /openapi.json).

Bodies are validated by :class:`duetime.ScheduleRequest` and the facade, exactly like a Python
``add_schedule(...)`` call; these models only describe them.
"""

from __future__ import annotations

from itertools import combinations
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from duetime.api.schemas import Subject, zone_field
from duetime.formats import (
    CRON_PATTERN,
    EVERY_PATTERN,
    EXPIRES_PATTERN,
    GRACE_PATTERN,
    INSTANT_PATTERN,
    MAX_SECONDS,
    TYPE_PATTERN,
)
from duetime.requests import not_null
from duetime.timemath.recurrence.deadline import MAX_DEADLINE, MAX_PAUSE_AFTER
from duetime.timemath.recurrence.overlap import MAX_CATCH_UP_GRACE

SCHEDULE_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:@+=-]*$"
CatchUpName = Literal["latest", "all", "none"]
OnGapName = Literal["run_after", "skip"]
OnOverlapName = Literal["once", "both"]
OverlapName = Literal["allow", "skip", "buffer_one"]
RollName = Literal["skip", "forward", "backward", "modified_forward", "modified_backward"]
Feb29Name = Literal["feb28", "mar1", "skip"]
OVERLAP_HELP = (
    "An occurrence due while an earlier one is unfinished (not started, running or waiting "
    "for a retry): allow fires it, skip records it skipped, buffer_one fires it when the "
    "earlier one ends (one at most; more are skipped)"
)
GRACE_HELP = (
    "How late an occurrence may be and still fire (ISO 8601 duration or seconds, 0 to 31 "
    "days); past it, catch_up decides"
)

DEADLINE_HELP = (
    "Each occurrence's deadline after its instant (ISO 8601 duration or seconds, 1 second to "
    "366 days): one not done by then is missed (a schedule.missed event)"
)
PAUSE_HELP = "Pause after this many missed or dead occurrences in a row (a schedule.paused event)"


RULE_KINDS = ("cron", "every", "rrule")
"""The ways to say when a schedule recurs: a definition gives exactly one."""
GRACE_SECONDS = int(MAX_CATCH_UP_GRACE.total_seconds())
Cron = Annotated[str | None, Field(pattern=CRON_PATTERN)]
Every = Annotated[str, Field(pattern=EVERY_PATTERN)] | Annotated[float, Field(ge=1, le=MAX_SECONDS)]
Instant = Annotated[str | None, Field(pattern=INSTANT_PATTERN)]
Deadline = (
    Annotated[str, Field(pattern=EXPIRES_PATTERN)]
    | Annotated[float, Field(ge=1, le=int(MAX_DEADLINE.total_seconds()))]
)
Grace = (
    Annotated[str, Field(pattern=GRACE_PATTERN)] | Annotated[float, Field(ge=0, le=GRACE_SECONDS)]
)


def _zone(schema: dict[str, Any], nullable: bool) -> None:
    prop = schema["properties"]["timezone"]
    kept = {key: prop[key] for key in ("description", "examples", "title") if key in prop}
    prop.clear()
    zone = zone_field()
    prop.update(kept, **({"anyOf": [zone, {"type": "null"}]} if nullable else zone))


CALENDAR_OPTIONS = ("dtstart", "exdates", "rdates", "holidays", "holiday_dates", "weekend", "roll")
"""What only a recurrence rule takes (and ``feb29`` other than its default)."""


def _rule_schema(schema: dict[str, Any]) -> None:
    """A definition has one rule: a cron expression, an interval or a recurrence rule; zones are
    named ones; the calendar's options come with a recurrence rule only, and it with its
    ``dtstart``."""
    _zone(schema, nullable=True)
    schema["oneOf"] = [not_null(kind) for kind in RULE_KINDS]
    schema["dependentSchemas"] = {
        **{name: _null_or_with("rrule", name, {"type": "null"}) for name in CALENDAR_OPTIONS},
        "feb29": _null_or_with("rrule", "feb29", {"const": "feb28"}),
        "rrule": _null_or_with("dtstart", "rrule", {"type": "null"}),
    }


def _null_or_with(needed: str, name: str, unless: dict[str, Any]) -> dict[str, Any]:
    """``name`` is ``unless`` (null, its default) or ``needed`` is given (not null)."""
    return {"anyOf": [{"properties": {name: unless}}, not_null(needed)]}


class _RuleFields(BaseModel):
    """What a schedule's definition may say (every field of a create, any of an update)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_rule_schema)

    payload: Any = Field(
        None,
        description="Any JSON, up to the payload size limit, with no NUL character (\\u0000) "
        "in its strings or keys",
    )
    cron: Cron = Field(
        None, examples=["0 9 * * *", "@daily"], description="5-field cron, or an alias"
    )
    every: Every | None = Field(
        None, examples=["PT5M", 300], description="Fixed interval: ISO 8601 duration or seconds"
    )
    timezone: str = Field("UTC", examples=["Asia/Tokyo"], description="IANA zone of the cron")
    subject: Subject = Field(None, examples=["user-1234"])
    start_at: Instant = Field(None, examples=["2025-03-15T00:00:00Z"])
    end_at: Instant = Field(
        None,
        examples=["2026-03-15T00:00:00Z"],
        description="No occurrence after it; a new schedule's must leave one after now (422)",
    )
    catch_up: CatchUpName = Field("latest", description="After an outage: latest, all or none")
    on_gap: OnGapName = Field("run_after", description="Fixed-time cron in a DST gap")
    on_overlap: OnOverlapName = Field("once", description="Fixed-time cron in a repeated hour")
    max_attempts: int | None = Field(None, ge=1, le=1000)
    overlap: OverlapName = Field("allow", description=OVERLAP_HELP)
    catch_up_grace: Grace = Field(60, examples=["PT5M", 300], description=GRACE_HELP)
    must_succeed_within: Deadline | None = Field(
        None, examples=["PT30M", 1800], description=DEADLINE_HELP
    )
    pause_after_failures: int | None = Field(
        None, ge=1, le=MAX_PAUSE_AFTER, examples=[3], description=PAUSE_HELP
    )
    rrule: str | None = Field(
        None,
        examples=["FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"],
        description="Instead of cron/every: an RFC 5545 recurrence rule from dtstart",
    )
    dtstart: str | None = Field(
        None, examples=["2027-01-29T17:00"], description="With rrule: local time in timezone"
    )
    exdates: list[str] | None = Field(None, description="Local times the rrule skips")
    rdates: list[str] | None = Field(None, description="Local times added to the rrule")
    holidays: str | None = Field(
        None, examples=["DE-BE"], description="Public holidays: country or country-subdivision"
    )
    holiday_dates: list[str] | None = Field(None, description="Your own non-business dates")
    weekend: list[str] | str | None = Field(None, examples=[["sat", "sun"]])
    roll: RollName | None = Field(
        None,
        description="An occurrence on a non-business day: skip, forward, backward, or "
        "modified_forward / modified_backward (that way unless it leaves the month, then the "
        "other way)",
    )
    feb29: Feb29Name = Field(
        "feb28", description="A yearly rule on 29 February in common years: feb28, mar1, skip"
    )


class ScheduleBody(_RuleFields):
    """Create a schedule, or bring an existing one to this definition: ``cron``, ``every`` or
    ``rrule``."""

    name: str = Field(
        examples=["birthday:user-42"],
        min_length=1,
        max_length=200,
        pattern=SCHEDULE_NAME_PATTERN,
        description="Unique in the namespace; part of every occurrence's timer key",
    )
    type: str = Field(examples=["birthday.greeting"], pattern=TYPE_PATTERN, max_length=200)
    active: bool | None = Field(
        None, description="Create paused with false; absent leaves an existing one as it is"
    )
    on_conflict: Literal["update", "keep", "error"] = "update"


_NOT_NULL = (
    "type",
    "catch_up",
    "on_gap",
    "on_overlap",
    "active",
    "overlap",
    "catch_up_grace",
    "feb29",
)
"""Fields of a patch that cannot be cleared: null is refused, not read as "unchanged"."""


def _patch_schema(schema: dict[str, Any]) -> None:
    """Absent means unchanged, so no field has a default; only clearable ones take null. At
    least one field, and at most one rule kind (one replaces the others)."""
    _zone(schema, nullable=True)
    schema["minProperties"] = 1
    schema["not"] = {"anyOf": [not_null(*pair) for pair in combinations(RULE_KINDS, 2)]}
    for name, prop in schema.get("properties", {}).items():
        prop.pop("default", None)
        if name in _NOT_NULL and "anyOf" in prop:
            kept = [option for option in prop.pop("anyOf") if option.get("type") != "null"]
            if len(kept) == 1:
                prop.update(kept[0])
            else:
                prop["anyOf"] = kept


class SchedulePatch(BaseModel):
    """Change some fields (absent ones stay); null clears an optional one (``timezone`` →
    UTC, ``max_attempts`` → the server's default). ``cron`` replaces ``every`` and back.
    """

    model_config = ConfigDict(extra="forbid", json_schema_extra=_patch_schema)

    type: str | None = Field(None, pattern=TYPE_PATTERN, max_length=200)
    payload: Any = Field(
        None,
        description="Any JSON, up to the payload size limit, with no NUL character (\\u0000) "
        "in its strings or keys",
    )
    cron: Cron = Field(None, examples=["0 9 * * *"])
    every: Every | None = Field(None, examples=["PT5M", 300])
    timezone: str | None = Field(None, examples=["Europe/Berlin"])
    subject: Subject = None
    start_at: Instant = None
    end_at: Instant = None
    catch_up: CatchUpName | None = None
    on_gap: OnGapName | None = None
    on_overlap: OnOverlapName | None = None
    max_attempts: int | None = Field(None, ge=1, le=1000)
    active: bool | None = Field(None, description="false pauses, true resumes")
    overlap: OverlapName | None = Field(None, description=OVERLAP_HELP)
    catch_up_grace: Grace | None = Field(None, examples=["PT5M"], description=GRACE_HELP)
    must_succeed_within: Deadline | None = Field(
        None, examples=["PT30M"], description=f"{DEADLINE_HELP}; null removes it"
    )
    pause_after_failures: int | None = Field(
        None, ge=1, le=MAX_PAUSE_AFTER, description=f"{PAUSE_HELP}; null: never"
    )
    rrule: str | None = Field(None, examples=["FREQ=WEEKLY;BYDAY=MO"])
    dtstart: str | None = Field(None, examples=["2027-01-04T09:00"])
    exdates: list[str] | None = None
    rdates: list[str] | None = None
    holidays: str | None = Field(None, examples=["US-NY"])
    holiday_dates: list[str] | None = Field(None, description="Your own non-business dates")
    weekend: list[str] | str | None = Field(
        None, examples=[["fri", "sat"]], description="null: the default, Saturday and Sunday"
    )
    roll: RollName | None = None
    feb29: Feb29Name | None = None


class DeadlineOut(BaseModel):
    misses: int = Field(description="Occurrences not done by their deadline, so far")
    failures_in_row: int
    last_miss_at: str | None = Field(description="The latest missed occurrence's instant")
    last_miss_reason: str | None = Field(
        examples=["dead", "still_running", "retrying", "skipped_overlap", "not_created"]
    )
    last_success_at: str | None
    checked_through: str


class ScheduleOut(BaseModel):
    id: int
    namespace: str
    name: str
    type: str
    payload: Any
    subject: str | None
    cron: str | None
    every: float | None = Field(description="Seconds")
    timezone: str
    start_at: str | None
    end_at: str | None
    catch_up: str
    catch_up_grace: float = Field(description="Seconds")
    must_succeed_within: float | None = Field(None, description="Seconds")
    pause_after_failures: int | None = None
    deadline: DeadlineOut | None = Field(
        None, description="What the deadline watch found (null: not watched yet)"
    )
    overlap: str
    on_gap: str
    on_overlap: str
    active: bool
    max_attempts: int
    next_at: str | None
    last_at: str | None
    after_at: str
    anchor_at: str
    created_at: str
    updated_at: str
    version: int
    rrule: str | None
    dtstart: str | None
    exdates: list[str] | None
    rdates: list[str] | None
    holidays: str | None
    holiday_dates: list[str] | None
    weekend: list[str] | None
    roll: str | None
    feb29: str | None


class OccurrenceOut(BaseModel):
    utc: str = Field(examples=["2025-03-09T07:00:00Z"])
    local: str = Field(examples=["2025-03-09T03:00:00-04:00"], description="With its offset")


class SchedulePutOut(BaseModel):
    """What defining did: ``created`` (201), or ``updated`` / ``kept`` (200)."""

    action: Literal["created", "updated", "kept"]
    schedule: ScheduleOut


class ScheduleChangedOut(BaseModel):
    action: Literal["updated", "kept", "paused", "resumed"]
    schedule: ScheduleOut


class ScheduleDeletedOut(BaseModel):
    action: Literal["deleted"]
    schedule: ScheduleOut
    cancelled: int = Field(description="Pending occurrences cancelled with it")


class SchedulePageOut(BaseModel):
    """By name; pass ``next_cursor`` as ``cursor`` for the next page (null at the end)."""

    items: list[ScheduleOut]
    next_cursor: str | None


class ScheduleDetailOut(BaseModel):
    schedule: ScheduleOut
    description: str = Field(examples=["At 09:00 (Asia/Tokyo)"])
    next: list[OccurrenceOut] = Field(description="The next occurrences (none while paused)")


class PreviewOut(BaseModel):
    timezone: str
    description: str
    occurrences: list[OccurrenceOut]
