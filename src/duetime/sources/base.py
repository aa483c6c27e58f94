"""What every broker source shares: message → timer mapping, batch storing, and dead-letter reasons.

A *source* consumes schedule requests from a broker (a NATS JetStream subject, a Redis stream)
and turns each message into a durable timer through the app facade. Every source keeps the same
three rules, implemented once here:

1. **Acknowledge after commit.** A message is acknowledged to the broker only once
   :meth:`~duetime.app.facade.AsyncApp.put` has returned, i.e. its timer is committed. If
   storing fails for a reason that may pass (the store is unavailable, the database is locked),
   the message is *not* acknowledged: the broker redelivers it later.
2. **Malformed messages are dead-lettered with the reason.** A message that is not JSON, lacks
   a field, has a naive ``dueAt``, an unknown timezone… can never succeed, so retrying it is
   pointless and dropping it loses data. It is published, original bytes unchanged, to a
   dead-letter subject/stream together with the reason (code, field, message), counted, logged,
   and then acknowledged. One bad message never fails the others of its batch.
3. **Redelivery is harmless.** A timer's key comes from the message (``tenantId:serviceCallId``,
   the notification id, or the request's own ``key``); when it has none, from the broker's
   identity of the message (``Nats-Msg-Id`` or stream sequence, Redis entry id). Storing a
   redelivered message therefore upserts the same timer instead of adding a second one.

Mappings
--------
How a message body becomes a :class:`~duetime.requests.TimerRequest` is its source's *mapping*:
see :mod:`duetime.sources.mappings`.

Acceptance window
-----------------
``accept_within`` (any mapping) refuses a request due further ahead than the window when it
arrives: it is dead-lettered with the code ``outside_window``, like a malformed message, instead
of being stored. Left unset (the default), every valid request is kept whatever its due time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from duetime.app.facade import AsyncApp
from duetime.errors import Conflict, InvalidInput
from duetime.model import JSON, NewTimer, OnConflict, PutResult
from duetime.requests import TimerRequest
from duetime.sources.mappings import (
    CommandMapping,
    TimerRequestMapping,
    bare_message,
    make_mapping,
    renamed,
)
from duetime.validation import MAX_KEY_LENGTH, check_expires_after

log = logging.getLogger("duetime.sources")

M = TypeVar("M")

ON_CONFLICT: tuple[OnConflict, ...] = ("update", "keep", "error")

MAX_REASON_LENGTH = 1000
"""Reasons travel in headers and stream fields: one line, bounded."""


@runtime_checkable
class Source(Protocol):
    """A consumer that turns broker messages into timers until ``stop`` is set."""

    name: str

    async def run(self, stop: asyncio.Event) -> None:
        """Consume until ``stop`` is set; broker outages are retried, never raised."""
        ...


@dataclass
class SourceStats:
    """What a source did since it started: how many messages became timers, died or waited."""

    received: int = 0
    stored: Counter[str] = field(default_factory=Counter)
    """By action: ``created``, ``updated``, ``kept``."""
    dead_lettered: int = 0
    deferred: int = 0
    """Messages left unacknowledged for redelivery because storing failed transiently."""
    dead_letter_failures: int = 0
    """Malformed messages whose dead letter could not be published (left for redelivery)."""

    def total_stored(self) -> int:
        """Timers created, updated or kept: every message that reached the store."""
        return sum(self.stored.values())


# -- rejections -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rejection:
    """Why a message can never become a timer: what a dead letter carries next to its bytes."""

    code: str
    field: str | None
    message: str

    @property
    def reason(self) -> str:
        """``"<field>: <message>"`` on one line, bounded: fit for a header or a stream field."""
        text = f"{self.field}: {self.message}" if self.field else self.message
        return one_line(text)

    @classmethod
    def from_error(cls, exc: Exception) -> Rejection:
        """The rejection an error stands for; a non-duetime error is a mapping bug."""
        if isinstance(exc, InvalidInput | Conflict):
            return cls(exc.code, exc.field, one_line(bare_message(exc)))
        return cls("mapping_error", None, one_line(describe(exc)))


def one_line(text: str, limit: int = MAX_REASON_LENGTH) -> str:
    """Control characters (newlines included) become spaces; longer text is cut with '…'."""
    flat = "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def message_key(prefix: str, identity: str) -> str:
    """A timer key from a broker's identity of a message; hashed if it would be too long."""
    key = f"{prefix}:{identity}"
    if len(key) <= MAX_KEY_LENGTH and key == one_line(key):
        return key
    return f"{prefix}:sha256:{hashlib.sha256(identity.encode('utf-8')).hexdigest()}"


class OutsideWindow(InvalidInput):
    """A request due further ahead than the source's ``accept_within``: refused, dead-lettered."""

    code = "outside_window"


# -- the parser -------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ScheduleCommand:
    """Parses a message body into a validated timer: decode, map, fill the key, validate."""

    mapping: CommandMapping = field(default_factory=TimerRequestMapping)
    on_conflict: OnConflict = "update"
    accept_within: timedelta | None = None
    """Refuse (dead-letter as ``outside_window``) requests due further ahead than this."""

    def __post_init__(self) -> None:
        if self.on_conflict not in ON_CONFLICT:
            raise InvalidInput("on_conflict", f"must be one of {', '.join(ON_CONFLICT)}")
        if self.accept_within is not None:
            check_accept_within(self.accept_within)

    @classmethod
    def named(
        cls,
        mapping: str = "timer",
        *,
        type: str | None = None,
        acceptance_window: str | float | timedelta | None = None,
        on_conflict: OnConflict = "update",
        accept_within: str | float | timedelta | None = None,
    ) -> ScheduleCommand:
        """``ScheduleCommand.named("schedule_event", accept_within="PT5M")``."""
        chosen = make_mapping(mapping, type=type, acceptance_window=acceptance_window)
        window = None if accept_within is None else check_accept_within(accept_within)
        return cls(chosen, on_conflict, window)

    @staticmethod
    def decode(data: bytes) -> JSON:
        """UTF-8 JSON, or InvalidInput naming ``body``."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput("body", f"is not UTF-8: {exc.reason} at byte {exc.start}") from None
        if not text.strip():
            raise InvalidInput("body", "is empty; expected a JSON object")
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput("body", f"is not JSON: {exc.msg} at position {exc.pos}") from None
        except (ValueError, RecursionError) as exc:
            raise InvalidInput("body", f"is not JSON duetime can read: {exc}") from None

    def parse(self, data: bytes, default_key: str | None = None) -> TimerRequest:
        """The request the message asks for; a request without a key gets ``default_key``."""
        request = self.mapping.to_request(self.decode(data))
        if request.key is None and default_key is not None:
            return replace(request, key=default_key)
        return request

    def prepare(self, app: AsyncApp, data: bytes, default_key: str | None = None) -> NewTimer:
        """Parse and validate into a storable timer; InvalidInput names the message's field."""
        request = self.parse(data, default_key)
        try:
            (timer,) = app.timers.prepare([request])
        except InvalidInput as exc:
            raise renamed(exc, self.mapping.message_field(exc.field or "body")) from None
        if self.accept_within is not None:
            ahead = timer.due_at - app.clock.now()
            if ahead > self.accept_within:
                raise OutsideWindow(
                    self.mapping.message_field("at"),
                    f"due in {ahead}, further ahead than accept_within {self.accept_within}",
                )
        return timer


# -- storing a batch --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Incoming(Generic[M]):
    """One broker message: its handle (to ack), its body, and the key it gets if it has none."""

    handle: M
    data: bytes
    default_key: str
    headers: Mapping[Any, Any] | Sequence[tuple[Any, Any]] | None = None
    """The message's headers (stream fields; Kafka's pairs): a W3C ``traceparent`` there
    becomes the timer's trace context when tracing is on; not read otherwise."""


@dataclass
class BatchOutcome(Generic[M]):
    """What became of a batch: ack ``stored``, dead-letter ``rejected``, redeliver ``deferred``."""

    stored: list[tuple[M, PutResult]] = field(default_factory=list)
    rejected: list[tuple[Incoming[M], Rejection]] = field(default_factory=list)
    deferred: list[M] = field(default_factory=list)
    error: BaseException | None = None
    """Why ``deferred`` could not be stored (a transient failure), if anything was deferred."""


async def store_batch(
    app: AsyncApp, command: ScheduleCommand, items: Sequence[Incoming[M]], *, source: str
) -> BatchOutcome[M]:
    """Validate each message, store the valid ones in one transaction, isolate the bad ones.

    Nothing is acknowledged here: the caller acks ``stored`` (committed now), dead-letters then
    acks ``rejected``, and leaves ``deferred`` for the broker to redeliver.
    """
    outcome: BatchOutcome[M] = BatchOutcome()
    prepared: list[tuple[Incoming[M], NewTimer]] = []
    tracing = app.tracing
    for item in items:
        try:
            timer = command.prepare(app, item.data, item.default_key)
            if tracing is not None:
                carried = tracing.text_from_headers(item.headers)
                if carried is not None:
                    timer = replace(timer, trace_context=carried)
            prepared.append((item, timer))
        except InvalidInput as exc:
            outcome.rejected.append((item, Rejection.from_error(exc)))
        except Exception as exc:  # a bug in a custom mapping: retrying cannot fix it either
            log.exception("source %s: mapping %s failed", source, command.mapping.name)
            outcome.rejected.append((item, Rejection.from_error(exc)))
    if not prepared:
        return outcome
    try:
        results = await app.timers.put(
            [timer for _, timer in prepared], on_conflict=command.on_conflict
        )
    except (InvalidInput, Conflict):
        # One of them is refused by the store itself (a value the database cannot hold, or an
        # existing key under on_conflict="error"): store them one by one to find it.
        await _store_one_by_one(app, command, prepared, outcome)
    except Exception as exc:
        outcome.deferred.extend(item.handle for item, _ in prepared)
        outcome.error = exc
    else:
        outcome.stored.extend(
            (item.handle, result) for (item, _), result in zip(prepared, results, strict=True)
        )
    return outcome


async def _store_one_by_one(
    app: AsyncApp,
    command: ScheduleCommand,
    prepared: Sequence[tuple[Incoming[M], NewTimer]],
    outcome: BatchOutcome[M],
) -> None:
    for index, (item, timer) in enumerate(prepared):
        try:
            (result,) = await app.timers.put([timer], on_conflict=command.on_conflict)
        except (InvalidInput, Conflict) as exc:
            if isinstance(exc, InvalidInput):
                exc = renamed(exc, command.mapping.message_field(exc.field or "body"))
            outcome.rejected.append((item, Rejection.from_error(exc)))
        except Exception as exc:
            outcome.deferred.extend(rest.handle for rest, _ in prepared[index:])
            outcome.error = exc
            return
        else:
            outcome.stored.append((item.handle, result))


def record(stats: SourceStats, outcome: BatchOutcome[Any], source: str, total: int) -> None:
    """Count and log a batch's outcome (dead letters are logged where they are published)."""
    stats.received += total
    for _, result in outcome.stored:
        stats.stored[result.action] += 1
    if outcome.deferred:
        stats.deferred += len(outcome.deferred)
        log.warning(
            "source %s: could not store %d messages, left for redelivery: %s",
            source,
            len(outcome.deferred),
            describe(outcome.error),
        )
    if outcome.stored:
        log.debug("source %s: stored %d timers", source, len(outcome.stored))


def describe(exc: BaseException | None) -> str:
    """``"ErrorType: message"`` for logs: exception messages alone are often empty."""
    if exc is None:
        return "unknown error"
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def sleep_until_stopped(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, or less if ``stop`` is set meanwhile."""
    if seconds <= 0 or stop.is_set():
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def check_seconds(
    value: object, field: str, *, minimum: float = 0.0, maximum: float = 3600.0
) -> float:
    """A number of seconds within bounds (a delay, an idle time, a block time)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidInput(field, f"expected a number of seconds, got {value!r}")
    seconds = float(value)
    if not minimum < seconds <= maximum:
        raise InvalidInput(field, f"must be more than {minimum:g} and at most {maximum:g} seconds")
    return seconds


def check_accept_within(value: object, field: str = "accept_within") -> timedelta:
    """How far ahead a request may be due when it arrives: a positive duration."""
    window = check_expires_after(value, field)
    if window is None:
        raise InvalidInput(field, "expected a duration such as 'PT5M'")
    return window


def check_count(value: object, field: str, *, maximum: int = 10_000) -> int:
    """A whole number from 1 to ``maximum`` (a batch size)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= maximum:
        raise InvalidInput(field, f"expected a whole number from 1 to {maximum}, got {value!r}")
    return value
