"""How a message body becomes a timer request: the mappings every broker source may use.

Mappings
--------
A :class:`~duetime.sources.base.ScheduleCommand` decodes the body (UTF-8 JSON) and maps it to a
:class:`~duetime.requests.TimerRequest` with one of these mappings:

- ``timer`` (default, :class:`TimerRequestMapping`): the body *is* a TimerRequest object,
  ``{"type": ..., "at": ..., "key": ..., "payload": ...}``, as the REST API accepts.
- ``schedule_timer`` (:class:`ServiceCallTimerMapping`; formerly ``seed003``, still accepted):
  a service call's ScheduleTimer command
  ``{"tenantId", "serviceCallId", "dueAt"}`` (or ``dueTimeMs``, epoch milliseconds), bare or
  inside an envelope ``{"type": "ScheduleTimer", "tenantId", "payload": {...}}`` → key
  ``"<tenantId>:<serviceCallId>"``, type ``DueTimeReached``, upserted.
- ``schedule_event`` (:class:`DelayedNotificationMapping`; formerly ``seed004``, still
  accepted): a delayed notification's schedule-event
  ``{"id", "executionDate", "userId", ...}`` → key ``"notification:<id>"``, the whole event as
  payload, the optional acceptance window as ``expires_after`` (a notification found due later
  than that is recorded ``expired``, not sent and not silently dropped).

Errors name the field *of the message* (``dueAt``, ``executionDate``), not duetime's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, Protocol, get_args

from duetime.errors import Conflict, InvalidInput
from duetime.model import JSON, iso
from duetime.requests import TimerRequest
from duetime.timemath.when import resolve_when
from duetime.validation import check_expires_after, check_type

MappingName = Literal["timer", "schedule_timer", "schedule_event", "seed003", "seed004"]
MAPPINGS: tuple[MappingName, ...] = get_args(MappingName)
ALIASES: Mapping[str, str] = {"seed003": "schedule_timer", "seed004": "schedule_event"}
"""Earlier names of the mappings, still accepted."""

SERVICE_CALL_TYPE = "DueTimeReached"
NOTIFICATION_TYPE = "delayed-notification"


def bare_message(exc: InvalidInput | Conflict) -> str:
    """The message without the ``"<field>: "`` that InvalidInput puts in front of it."""
    prefix = f"{exc.field}: "
    return exc.message[len(prefix) :] if exc.message.startswith(prefix) else exc.message


def renamed(exc: InvalidInput, field: str) -> InvalidInput:
    """The same error (same class, same code) naming ``field`` instead."""
    return type(exc)(field, bare_message(exc))


class CommandMapping(Protocol):
    """Maps a decoded message body to a TimerRequest; InvalidInput names the message's field."""

    @property
    def name(self) -> str: ...

    def to_request(self, body: JSON) -> TimerRequest:
        """The request the body asks for, or InvalidInput naming the body's field."""
        ...

    def message_field(self, request_field: str) -> str:
        """The body's name for a TimerRequest field, so validation errors name what to fix."""
        ...


@dataclass(frozen=True, slots=True)
class TimerRequestMapping:
    """The body is a TimerRequest object: the same JSON the REST API and ``schedule_many`` take."""

    @property
    def name(self) -> str:
        return "timer"

    def to_request(self, body: JSON) -> TimerRequest:
        return TimerRequest.from_dict(body)

    def message_field(self, request_field: str) -> str:
        return request_field


@dataclass(frozen=True, slots=True)
class ServiceCallTimerMapping:
    """A ScheduleTimer command: one timer per (tenantId, serviceCallId), upserted."""

    type: str = SERVICE_CALL_TYPE

    def __post_init__(self) -> None:
        check_type(self.type)

    @property
    def name(self) -> str:
        return "schedule_timer"

    def to_request(self, body: JSON) -> TimerRequest:
        command = _object(body, "body")
        prefix = ""
        if "payload" in command:  # the ADR's envelope: {type, tenantId, correlationId, payload}
            kind = command.get("type")
            if kind is not None and kind != "ScheduleTimer":
                raise InvalidInput("type", f"expected a 'ScheduleTimer' command, got {kind!r}")
            inner = _object(command["payload"], "payload")
            outer: dict[str, Any] = {
                k: command[k] for k in ("tenantId", "correlationId") if k in command
            }
            if (
                "tenantId" in outer
                and "tenantId" in inner
                and outer["tenantId"] != inner["tenantId"]
            ):
                raise InvalidInput("payload.tenantId", "differs from the envelope's tenantId")
            command, prefix = {**outer, **inner}, "payload."
        tenant = _text(command, "tenantId", prefix)
        if ":" in tenant:
            raise InvalidInput(f"{prefix}tenantId", "must not contain ':' (it separates the key)")
        call = _text(command, "serviceCallId", prefix)
        due_at = _due_at(command, prefix)
        correlation = command.get("correlationId")
        if correlation is not None and not isinstance(correlation, str):
            raise InvalidInput("correlationId", "must be a string")
        return TimerRequest(
            type=self.type,
            payload={"tenantId": tenant, "serviceCallId": call, "dueAt": iso(due_at)},
            at=due_at,
            key=f"{tenant}:{call}",
            subject=tenant,
            correlation_id=correlation or call,
        )

    def message_field(self, request_field: str) -> str:
        return _SEED003_FIELDS.get(request_field, request_field)


_SEED003_FIELDS = {
    "at": "dueAt",
    "key": "serviceCallId",
    "subject": "tenantId",
    "correlation_id": "correlationId",
    "payload": "body",
}


@dataclass(frozen=True, slots=True)
class DelayedNotificationMapping:
    """Seed 004's schedule-event: a notification due at ``executionDate``, stale after a window.

    The seed *dropped* events outside "now .. now + 5 min" when they arrived — past ones and
    far-future ones alike, silently. Here every valid event is stored; the window only says how
    late a notification may still be sent (``expires_after``): found due later than that (the
    worker was down, the event arrived late), it is recorded ``expired`` instead.
    """

    type: str = NOTIFICATION_TYPE
    acceptance_window: timedelta | None = None

    def __post_init__(self) -> None:
        check_type(self.type)
        if self.acceptance_window is not None:
            check_expires_after(self.acceptance_window, "acceptance_window")

    @property
    def name(self) -> str:
        return "schedule_event"

    def to_request(self, body: JSON) -> TimerRequest:
        event = _object(body, "body")
        ident = event.get("id")
        if isinstance(ident, int) and not isinstance(ident, bool):
            ident = str(ident)
        if not isinstance(ident, str) or not ident.strip():
            raise InvalidInput("id", "an event id (a non-empty string) is required")
        if "executionDate" not in event:
            raise InvalidInput("executionDate", "is required, e.g. '2025-10-31T10:03:00Z'")
        due_at = _instant(event["executionDate"], "executionDate")
        user = event.get("userId")
        if user is not None and (isinstance(user, bool) or not isinstance(user, str | int)):
            raise InvalidInput("userId", "must be a string or a number")
        return TimerRequest(
            type=self.type,
            payload=event,
            at=due_at,
            key=f"notification:{ident}",
            subject=None if user is None else str(user),
            correlation_id=ident,
            expires_after=self.acceptance_window,
        )

    def message_field(self, request_field: str) -> str:
        return _SEED004_FIELDS.get(request_field, request_field)


_SEED004_FIELDS = {
    "at": "executionDate",
    "key": "id",
    "correlation_id": "id",
    "subject": "userId",
    "payload": "body",
    "expires_after": "acceptance_window",
}


def _object(value: JSON, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(name, "must be a JSON object")
    return value


def _text(body: Mapping[str, Any], name: str, prefix: str = "") -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{prefix}{name}", "a non-empty string is required")
    return value


def _due_at(command: Mapping[str, Any], prefix: str) -> datetime:
    """``dueAt`` (ISO 8601 with an offset) or ``dueTimeMs`` (epoch milliseconds): exactly one."""
    has_at, has_ms = "dueAt" in command, "dueTimeMs" in command
    if has_at and has_ms:
        raise InvalidInput(f"{prefix}dueTimeMs", "give either dueAt or dueTimeMs, not both")
    if has_ms:
        millis = command["dueTimeMs"]
        if isinstance(millis, bool) or not isinstance(millis, int):
            raise InvalidInput(f"{prefix}dueTimeMs", "must be whole epoch milliseconds")
        try:
            instant = datetime.fromtimestamp(millis / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            raise InvalidInput(f"{prefix}dueTimeMs", f"{millis} is out of range") from None
        return _instant(instant, f"{prefix}dueTimeMs")
    if not has_at:
        raise InvalidInput(f"{prefix}dueAt", "is required, e.g. '2025-03-15T13:00:00Z'")
    return _instant(command["dueAt"], f"{prefix}dueAt")


def _instant(value: JSON, name: str) -> datetime:
    """An instant with an offset, checked by the same rules as ``at=`` but named ``name``."""
    if not isinstance(value, str | datetime):
        raise InvalidInput(name, "must be an ISO 8601 timestamp with an offset, as a string")
    try:
        return resolve_when(now=datetime.now(UTC), at=value).due_at
    except InvalidInput as exc:
        raise renamed(exc, name) from None


def make_mapping(
    name: object,
    *,
    type: str | None = None,
    acceptance_window: str | float | timedelta | None = None,
) -> CommandMapping:
    """The mapping called ``name``, with its options; options it does not take are errors."""
    if name not in MAPPINGS:
        raise InvalidInput("mapping", f"unknown mapping {name!r}; expected one of {MAPPINGS}")
    name = ALIASES.get(str(name), name)
    if name == "timer":
        if type is not None:
            raise InvalidInput("type", "the timer mapping takes the type from each message")
    elif type is not None:
        check_type(type)
    if acceptance_window is not None and name != "schedule_event":
        raise InvalidInput(
            "acceptance_window", "only the schedule_event mapping has an acceptance window"
        )
    if name == "timer":
        return TimerRequestMapping()
    if name == "schedule_timer":
        return ServiceCallTimerMapping(type or SERVICE_CALL_TYPE)
    window = check_expires_after(acceptance_window, "acceptance_window")
    return DelayedNotificationMapping(type or NOTIFICATION_TYPE, window)
