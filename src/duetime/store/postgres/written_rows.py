"""Timers → the batch write's parameters, and the rows it wrote → Timer records."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any, NamedTuple

from psycopg.cursor_async import AsyncCursor
from psycopg.rows import RowMaker

from duetime.errors import InvalidInput
from duetime.model import (
    NewTimer,
    Status,
    Timer,
)
from duetime.model.fast_records import make_timer
from duetime.store.codec import payload_text
from duetime.store.postgres.rows import STATUSES, Row, column_names

_TEXT_FIELDS = ("namespace", "key", "type", "subject", "correlation_id", "timezone")
_TEXT_COLUMNS = [attrgetter(field) for field in _TEXT_FIELDS]


def check_text(timers: Sequence[NewTimer]) -> None:
    """PostgreSQL text cannot hold NUL characters: name the field instead of failing later
    (the first timer's that has one, its first such field). Each column is searched whole
    first, a batch without any NUL costing a join a column rather than a look a field."""
    if not any("\x00" in "".join(filter(None, map(get, timers))) for get in _TEXT_COLUMNS):
        return
    for timer in timers:
        for field in _TEXT_FIELDS:
            value = getattr(timer, field)
            if value is not None and "\x00" in value:
                raise InvalidInput(field, "must not contain NUL characters")


def timer_batch_params(timers: Sequence[NewTimer], keys: list[str], now: datetime) -> Row:
    """The ``insert_timer`` / ``upsert_timer`` parameters: one array per column, in order, the
    timers' keys given apart (a key the store generated where a timer had none).

    Payloads go as JSON text (cast to jsonb by the server): one text array is much cheaper to
    send than an array of jsonb values. Key, payload and due time go whole; every other column
    goes as :func:`batch_column` packs it.
    """
    return {
        "rows": len(timers),
        "namespaces": batch_column([t.namespace for t in timers]),
        "keys": keys,
        "types": batch_column([t.type for t in timers]),
        "payloads": [payload_text(t) for t in timers],
        "subjects": batch_column([t.subject for t in timers]),
        "correlation_ids": batch_column([t.correlation_id for t in timers]),
        "due_ats": [t.due_at for t in timers],
        "locals": batch_column([t.local for t in timers]),
        "timezones": batch_column([t.timezone for t in timers]),
        "disambiguations": batch_column([t.disambiguation for t in timers]),
        "expires_afters": batch_column([t.expires_after for t in timers]),
        "max_attempts": batch_column([t.max_attempts for t in timers]),
        "producers": batch_column([t.producer for t in timers]),
        "trace_contexts": batch_column([t.trace_context for t in timers]),
        "priorities": batch_column([t.priority for t in timers]),
        "now": now,
    }


def batch_column(values: list[Any]) -> list[Any]:
    """A column of a batch as the statements take it: empty when every value is NULL (unnest
    pads it with NULLs), one value when all are the same (the server's ``batch_column``
    repeats it), else one value a row. Namespace, type and options are nearly always the same
    for a whole batch, and psycopg encodes an array element by element."""
    if len(values) > 1 and len(set(values)) == 1:
        return [] if values[0] is None else values[:1]
    return values


WRITTEN_COLUMNS = (
    "id",
    "namespace",
    "key",
    "version",
    "status",
    "attempts",
    "registered_at",
    "updated_at",
    "run_at",
    "fired_at",
    "completed_at",
    "last_error",
    "lease_owner",
    "lease_expires_at",
    "destination",
)
"""What ``insert_timer`` and ``upsert_timer`` return for every row they write
(``written_columns`` in writes.sql): each column the statement decides."""

FRESH_COLUMNS = ("id", "key")
"""What ``insert_fresh_timers`` returns for every row: of the columns it decides only the id is
not known before; the rest are a new row's (see :func:`fresh_timer_rows`)."""


class Unseen(NamedTuple):
    """A key ``upsert_timer`` found held by a timer its snapshot could not see: one a concurrent
    batch made and committed while this one waited for the key. Its request is run again."""

    namespace: str
    key: str


def written_timer_rows(
    timers: Sequence[NewTimer], keys: Sequence[str]
) -> Callable[[AsyncCursor[Any]], RowMaker[tuple[Timer, int] | Unseen]]:
    """A row factory for the rows a batch insert or upsert wrote, each with its ``version``.

    ``timers`` were sent with ``keys`` (a key the store generated where a timer had none).
    Every column the statement decides — id, version, status, attempts, the instants, the
    lease — comes from the row it returns (:data:`WRITTEN_COLUMNS`); the values the caller sent
    (type, payload, due time, options), which the statement stores as they are, come from the
    timer sent with that key. A row marked ``unseen`` (upsert only) is an :class:`Unseen`.
    """
    sent = {(timer.namespace, key): timer for timer, key in zip(timers, keys, strict=True)}

    def factory(cursor: AsyncCursor[Any]) -> RowMaker[tuple[Timer, int] | Unseen]:
        names = tuple(column_names(cursor))
        if names not in (WRITTEN_COLUMNS, (*WRITTEN_COLUMNS, "unseen")):
            raise KeyError(f"written timer rows need the columns {', '.join(WRITTEN_COLUMNS)}")

        def timer(values: Sequence[Any]) -> tuple[Timer, int] | Unseen:
            id_, namespace, key, version, status, attempts, registered_at = values[:7]
            if version is None:  # only an unseen row has none
                return Unseen(namespace, key)
            updated_at, run_at, fired_at, completed_at, last_error, owner = values[7:13]
            t = sent[namespace, key]
            return make_timer(
                id_,
                namespace,
                key,
                t.type,
                t.payload,
                t.subject,
                t.due_at,
                STATUSES[status],
                attempts,
                t.max_attempts,
                registered_at,
                updated_at,
                run_at,
                t.correlation_id,
                t.expires_after,
                t.local,
                t.timezone,
                t.disambiguation,
                fired_at,
                completed_at,
                last_error,
                owner,
                values[13],
                values[14],
                t.producer,
                t.trace_context,
                t.priority,
            ), version

        return timer

    return factory


def fresh_timer_rows(
    timers: Sequence[NewTimer], keys: Sequence[str], now: datetime
) -> Callable[[AsyncCursor[Any]], RowMaker[tuple[Timer, int]]]:
    """A row factory for the rows ``insert_fresh_timers`` wrote: each row's id and key
    (:data:`FRESH_COLUMNS`), the rest of the timer what every new row holds — version 1,
    ``scheduled``, no attempt, registered and updated ``now`` and due to run at its due time,
    no lease, error or destination — and what was sent with that key. Decoding a row's fifteen
    columns and building the timer from them had been a sixth of the client's CPU a timer
    scheduled. ``keys`` are the store's, drawn for these timers: no two alike."""
    sent = dict(zip(keys, timers, strict=True))
    scheduled = Status.SCHEDULED

    def factory(cursor: AsyncCursor[Any]) -> RowMaker[tuple[Timer, int]]:
        if tuple(column_names(cursor)) != FRESH_COLUMNS:
            raise KeyError(f"fresh timer rows need the columns {', '.join(FRESH_COLUMNS)}")

        def timer(values: Sequence[Any]) -> tuple[Timer, int]:
            id_, key = values
            t = sent[key]
            return make_timer(
                id_,
                t.namespace,
                key,
                t.type,
                t.payload,
                t.subject,
                t.due_at,
                scheduled,
                0,
                t.max_attempts,
                now,
                now,
                t.due_at,
                t.correlation_id,
                t.expires_after,
                t.local,
                t.timezone,
                t.disambiguation,
                None,
                None,
                None,
                None,
                None,
                None,
                t.producer,
                t.trace_context,
                t.priority,
            ), 1

        return timer

    return factory
