"""The documented shapes of answers, so /openapi.json tells clients the truth.

Every request body is described once, by a table that reads it too (:mod:`duetime.bodies`:
:data:`duetime.requests.TIMER_BODY`, :mod:`duetime.schedule_bodies`, the API's own); the
models here describe answers only, and :func:`json_body` documents a table's body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from duetime.bodies import Body

StatusName = Literal["scheduled", "running", "retrying", "done", "dead", "cancelled", "expired"]
TYPE_GLOB_PATTERN = r"^[A-Za-z0-9_*][A-Za-z0-9_.:/*-]*$"
CURSOR = "`next_cursor` of the previous page (empty: the first page)"
WHEN = (
    "an ISO 8601 instant with an offset (`2025-03-15T13:00:00Z`), or a duration meaning that "
    "long ago (`PT1H`, `P7D`)"
)
PAYLOAD_DESCRIPTION = (
    "Only timers whose payload holds a value at a path: `PATH=VALUE`, e.g. `customer.id=42`"
    ' (a number), `status="paid"` or `status=paid` (text), `vip=true`; keys joined by dots'
)
MAX_PAYLOAD_QUERY_LENGTH = 1000
SORT_DESCRIPTION = (
    "`newest` (by id, the default), `due` (earliest due first), `updated` (latest change"
    " first) or `attempts` (most first)"
)
TypePattern = "An event type, or a glob where `*` is any run of characters (`order.*`)"


class ErrorOut(BaseModel):
    """Every error: branch on ``code``; ``field`` names what to fix (null when not one field)."""

    code: str = Field(examples=["unknown_timezone"])
    message: str
    field: str | None


class TimerOut(BaseModel):
    id: int
    namespace: str
    key: str
    type: str
    payload: Any
    subject: str | None
    status: StatusName
    due_at: str
    run_at: str
    local: str | None
    timezone: str | None
    disambiguation: str
    correlation_id: str | None
    attempts: int
    max_attempts: int
    expires_after: float | None
    registered_at: str
    updated_at: str
    fired_at: str | None
    completed_at: str | None
    last_error: str | None
    lease_owner: str | None
    lease_expires_at: str | None
    destination: str | None = Field(
        None, description="null for an event; for one delivery of a fanned-out event, where it goes"
    )
    producer: str | None = Field(None, description="Who stored it: a node id, api, cli")
    priority: int = Field(0, description="0 normal to 9 most urgent (claimed first when due)")
    subscribers: int | None = Field(
        None,
        description="How many live nodes would deliver it (a handler or a route for its type, "
        "or its destination): 0 = no subscriber, it waits until one runs",
    )


class WarningOut(BaseModel):
    """Done, but not as the caller may think: ``no_subscriber`` = stored, yet no live node has
    a handler or a route for its type, so it waits until one runs."""

    code: str
    field: str | None
    message: str


class AttemptOut(BaseModel):
    number: int
    node_id: str
    claimed_at: str | None = Field(
        None,
        description="When a claim took the row for this attempt: up to the claim's look-ahead "
        "before the due instant, so never its start (null only on rows kept from before it was "
        "recorded)",
    )
    started_at: str | None = Field(
        description="When its handler (or delivery) truly began, as its worker reported with "
        "the outcome; null while that is not known: the attempt is running, or was lost with "
        "its node"
    )
    finished_at: str | None
    outcome: str | None
    error: str | None
    traceback: str | None = Field(
        None,
        description="A failed attempt's traceback, innermost frames kept (at most 16 KiB)",
    )
    traceback_trimmed: str | None = Field(
        None,
        description="The same traceback with the user's frames first: each run of duetime's "
        "own frames (executor, handler wrapper, thread pool) and the standard library's "
        "concurrency frames (asyncio, concurrent.futures, threading) folded into one line "
        "saying how many; the exception lines and their chaining kept. Null when "
        "`traceback` is",
    )


class PutOut(BaseModel):
    """What scheduling did: ``created`` (201), or ``updated`` / ``kept`` (200)."""

    action: Literal["created", "updated", "kept"]
    timer: TimerOut
    warnings: list[WarningOut] = Field(default_factory=list)


class ChangedOut(BaseModel):
    action: Literal["cancelled", "replayed", "made_due", "deleted"]
    timer: TimerOut


class TimerPageOut(BaseModel):
    """Newest first; pass ``next_cursor`` as ``cursor`` for the next page (null at the end)."""

    items: list[TimerOut]
    next_cursor: str | None


class MoveOut(BaseModel):
    """New zone rules moved the timer's instant; its wall time ``local`` in ``timezone`` kept."""

    moved_at: str
    reason: str = Field(examples=["tz data 2025a -> 2025b"])
    local: str
    timezone: str
    from_at: str
    to_at: str


class TimerDetailOut(BaseModel):
    timer: TimerOut
    attempts: list[AttemptOut]
    moves: list[MoveOut] = Field(description="Moves by new zone rules, oldest first")


class BucketOut(BaseModel):
    le: float | None = Field(description="Upper bound in seconds; null is +Inf")
    count: int = Field(description="Cumulative count")


class LatenessOut(BaseModel):
    buckets: list[BucketOut]
    count: int
    sum: float


class UnsubscribedOut(BaseModel):
    type: str
    count: int


class StatsOut(BaseModel):
    namespace: str
    counts: dict[str, int] = Field(
        description="Timers by status, exact; `{}` when asked with `counts=false` (the "
        "console asks `…/counts` for them apart, so the lists never wait for the counting)"
    )
    next_due: list[TimerOut]
    unsubscribed: list[UnsubscribedOut] = Field(
        default_factory=list,
        description="Pending timers no live node would deliver, by type, most first",
    )
    lateness: LatenessOut


class CountsOut(BaseModel):
    namespace: str
    counts: dict[str, int] = Field(description="Timers by status, exact, counted now")


class SubscriptionOut(BaseModel):
    """Events of ``type`` (exact, or a glob like ``order.*``) in ``namespace`` go to ``to``
    (``handler`` = the node's Python handler)."""

    namespace: str
    type: str
    to: list[str]


class NodeOut(BaseModel):
    id: str
    host: str
    pid: int
    role: str
    started_at: str
    heartbeat_at: str
    in_flight: int
    alive: bool
    clock_offset_ms: float | None = Field(
        None, description="The node's clock minus the database's (PostgreSQL); null unknown"
    )
    subscriptions: list[SubscriptionOut] = Field(default_factory=list)


class NodesOut(BaseModel):
    items: list[NodeOut]


class NamespacesOut(BaseModel):
    """By name; pass ``next_cursor`` as ``cursor`` for the next page (null at the end)."""

    items: list[str]
    next_cursor: str | None


class NamespaceOut(BaseModel):
    name: str
    created: bool


class InfoOut(BaseModel):
    version: str
    auth: bool


class MeOut(BaseModel):
    """Who the caller is and what it may do, so a client shows only the controls that work."""

    auth: bool = Field(
        description="Whether this server asks for a token; false: anyone may read and write "
        "every namespace, and the fields below say so"
    )
    token: str | None = Field(
        description="The token's name (`duetime tokens create --name`); null without auth, "
        "or for a token made without a name"
    )
    token_id: int | None = Field(description="The token's id; null without auth")
    scopes: list[Literal["read", "write", "metrics"]] = Field(
        description="`read`: list and show; `write`: schedule, act, set limits and pauses, in "
        "the namespaces below; `metrics`: `/metrics` (a token for every namespace)"
    )
    namespaces: list[str] = Field(
        description='The namespaces the caller may read, or `["*"]` for every one'
    )
    writable: list[str] = Field(
        description='The namespaces the caller may change: `["*"]` for every one, `[]` for '
        "a read-only token"
    )


class HealthOut(BaseModel):
    status: Literal["ok"]
    schema_version: int


def errors(
    *statuses: int, extra: dict[int | str, dict[str, Any]] | None = None
) -> dict[int | str, dict[str, Any]]:
    """The documented error answers of one operation (plus ``extra`` answers)."""
    described = {
        400: "The body is not JSON",
        401: "Missing, malformed, unknown or revoked bearer token",
        403: "The token is read-only for this namespace",
        404: "Unknown (or not visible to this token) namespace or timer",
        409: "The timer's state forbids it",
        413: "The body is over the size limit",
        422: "Invalid input; ``field`` names it",
        503: "The database is unavailable",
    }
    answers: dict[int | str, dict[str, Any]] = dict(extra or {})
    for status in statuses:
        answers[status] = {"model": ErrorOut, "description": described[status]}
    return answers


def json_body(body: Body) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON body that the endpoint reads through its table
    (so that a bad body is answered like any other bad input, naming its field)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": body.json_schema()}},
        }
    }
