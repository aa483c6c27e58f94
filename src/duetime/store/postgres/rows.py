"""PostgreSQL rows ↔ model records: psycopg already speaks datetime, timedelta and JSON."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from operator import attrgetter, itemgetter
from typing import Any, NamedTuple

from psycopg.cursor_async import AsyncCursor
from psycopg.rows import RowMaker
from psycopg.types.json import Jsonb

from duetime.errors import InvalidInput
from duetime.model import (
    Attempt,
    Claimed,
    Finish,
    NewTimer,
    Node,
    Outcome,
    Status,
    Subscription,
    Timer,
    unreadable_timer,
)
from duetime.model.fast_records import make_timer
from duetime.store.codec import payload_text
from duetime.store.run_windows import run_instant, window_params
from duetime.support.sealing import TEXT_MARK, Sealing

Row = dict[str, Any]


def timer_from_text_row(row: Row, sealing: Sealing) -> Timer:
    """:func:`timer_from_row` of a row fetched with its payload as JSON text
    (``fetch_json_as_text``): the payload is decoded here, and opened in the same step when
    sealed (:meth:`~duetime.support.sealing.Sealing.read_payload`: a sealed payload's wrapper
    is not decoded first), or shown as sealed where this ring cannot open it."""
    text = row["payload"]
    payload = None if text is None else sealing.read_payload(text)
    return _timer(row, payload, sealing.open_text(row["last_error"]))


def timer_from_row(row: Row, sealing: Sealing | None) -> Timer:
    """A row → Timer, its sealed values opened (or shown as sealed where this ring cannot);
    None: as stored, for a caller that opens them (:func:`~duetime.store.codec.opened_results`)."""
    payload, last_error = row["payload"], row["last_error"]
    if sealing is not None:
        payload, last_error = sealing.open_payload(payload), sealing.open_text(last_error)
    return _timer(row, payload, last_error)


def _timer(row: Row, payload: Any, last_error: str | None) -> Timer:
    return Timer(
        id=row["id"],
        namespace=row["namespace"],
        key=row["key"],
        type=row["type"],
        payload=payload,
        subject=row["subject"],
        due_at=row["due_at"],
        status=Status(row["status"]),
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        registered_at=row["registered_at"],
        updated_at=row["updated_at"],
        run_at=row["run_at"],
        correlation_id=row["correlation_id"],
        expires_after=row["expires_after"],
        local=row["local"],
        timezone=row["timezone"],
        disambiguation=row["disambiguation"],
        fired_at=row["fired_at"],
        completed_at=row["completed_at"],
        last_error=last_error,
        lease_owner=row["lease_owner"],
        lease_expires_at=row["lease_expires_at"],
        destination=row["destination"],
        producer=row["producer"],
        trace_context=row["trace_context"],
        priority=row["priority"],
        window=row.get("run_window"),
        spread=row.get("spread"),
    )


TIMER_FIELDS = tuple(f.name for f in fields(Timer))[:-2]
"""Timer's fields a claimed row fills in: all but the run window's, which a claim needs not."""
_STATUS_AT = TIMER_FIELDS.index("status")
_STATUSES = {status.value: status for status in Status}


def claimed_timer_rows(known: Mapping[str, Any]) -> Callable[[AsyncCursor[Any]], RowMaker[Timer]]:
    """A psycopg row factory for statements returning timer rows, ``claim_due``'s above all:
    each row's values go straight into a :class:`Timer`, in field order, without a dict per row
    or a keyword per field, and ``known`` fills in the fields the statement leaves out (a value
    given there wins over a column of the same name). The claim returns only what it did not
    know already (the namespace, and what it set: status, lease, ``updated_at``): receiving and
    decoding the claimed rows was over a quarter of a busy worker's CPU, and those columns were
    a third of what was not NULL in them. A field neither returned nor known is a KeyError
    naming it."""
    extra = tuple(known.values())
    text_status = "status" not in known

    def factory(cursor: AsyncCursor[Any]) -> RowMaker[Timer]:
        at = {name: i for i, name in enumerate([*_column_names(cursor), *known])}
        missing = [name for name in TIMER_FIELDS if name not in at]
        if missing:
            raise KeyError(f"timer rows need the columns {', '.join(missing)}")
        pick = itemgetter(*(at[name] for name in TIMER_FIELDS))

        def timer(values: Sequence[Any]) -> Timer:
            args = pick(tuple(values) + extra)  # psycopg's rows are tuples already
            if text_status:
                args = (*args[:_STATUS_AT], _STATUSES[args[_STATUS_AT]], *args[_STATUS_AT + 1 :])
            return make_timer(*args)

        return timer

    return factory


def claim_known(
    namespace: str, node_id: str, lease_until: datetime, now: datetime, claim_token: int
) -> dict[str, Any]:
    """What a claim sets on every row it takes, which :func:`claimed_rows` need not read back."""
    return {
        "namespace": namespace,
        "status": Status.RUNNING,
        "lease_owner": node_id,
        "lease_expires_at": lease_until,
        "updated_at": now,
        "claim_token": claim_token,
    }


def claimed_rows(
    known: Mapping[str, Any], sealing: Sealing
) -> Callable[[AsyncCursor[Any]], RowMaker[Claimed]]:
    """:func:`claimed_timer_rows` for ``claim_due``, each row a :class:`Claimed`; a row that
    cannot be made into a Timer becomes a Claimed that says why (see ``Claimed.problem``), so
    that it ends alone instead of failing the whole claim.

    The claim returns the payload as JSON text (``claim_mark``), decoded here row by row: a
    jsonb value PostgreSQL holds and Python cannot read (a number of 5,000 digits, an array
    nested 5,000 deep) fails its own row, where psycopg's jsonb loader would fail the fetch
    of the whole claim, after its commit."""
    timers = claimed_timer_rows(known)
    namespace = str(known["namespace"])

    def factory(cursor: AsyncCursor[Any]) -> RowMaker[Claimed]:
        make = timers(cursor)
        at = {name: i for i, name in enumerate(_column_names(cursor))}
        id_at, key_at, type_at, attempts_at = at["id"], at["key"], at["type"], at["attempts"]
        payload_at = at["payload"]
        read_payload = sealing.read_payload

        def claimed(values: Sequence[Any]) -> Claimed:
            try:
                text = values[payload_at]
                values = (
                    *values[:payload_at],
                    None if text is None else read_payload(text, strict=True),
                    *values[payload_at + 1 :],
                )
                timer = make(values)
                last_error = timer.last_error
                if last_error is not None and last_error.startswith(TEXT_MARK):
                    timer = replace(timer, last_error=sealing.open_text(last_error))
            except Exception as exc:
                attempt = values[attempts_at]
                timer = unreadable_timer(
                    values[id_at], namespace, values[key_at], values[type_at], attempt
                )
                return Claimed(timer, attempt, f"{type(exc).__name__}: {exc}")
            return Claimed(timer, timer.attempts)

        return claimed

    return factory


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
        names = tuple(_column_names(cursor))
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
                _STATUSES[status],
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
                None,
                t.window,
                t.spread,
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
        if tuple(_column_names(cursor)) != FRESH_COLUMNS:
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
                t.due_at if t.window is None else run_instant(t, key),
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
                None,
                t.window,
                t.spread,
            ), 1

        return timer

    return factory


def _column_names(cursor: AsyncCursor[Any]) -> list[str]:
    """The result's column names, read from libpq: ``cursor.description`` makes a Column
    object of each (type, size, modifier), a twentieth of a busy event loop's time."""
    result = cursor.pgresult
    if result is None:
        return []
    return [(result.fname(i) or b"").decode() for i in range(result.nfields)]


def attempt_from_row(row: Row, sealing: Sealing) -> Attempt:
    return Attempt(
        timer_id=row["timer_id"],
        number=row["number"],
        node_id=row["node_id"],
        started_at=row["started_at"],
        claimed_at=row["claimed_at"],
        finished_at=row["finished_at"],
        outcome=None if row["outcome"] is None else Outcome(row["outcome"]),
        error=sealing.open_text(row["error"]),
        traceback=sealing.open_text(row["traceback"]),
    )


def node_from_row(row: Row) -> Node:
    return Node(
        id=row["id"],
        host=row["host"],
        pid=row["pid"],
        role=row["role"],
        started_at=row["started_at"],
        heartbeat_at=row["heartbeat_at"],
        in_flight=row["in_flight"],
        subscriptions=tuple(Subscription.from_dict(s) for s in row["subscriptions"]),
        clock_offset=offset_from_ms(row["clock_offset_ms"]),
    )


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
        **window_params(timers, keys),
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


def node_params(node: Node) -> Row:
    return {
        "id": node.id,
        "host": node.host,
        "pid": node.pid,
        "role": node.role,
        "started_at": node.started_at,
        "heartbeat_at": node.heartbeat_at,
        "in_flight": node.in_flight,
        "subscriptions": Jsonb([s.to_dict() for s in node.subscriptions]),
        "clock_offset_ms": offset_ms(node.clock_offset),
    }


def offset_ms(offset: timedelta | None) -> float | None:
    return None if offset is None else offset.total_seconds() * 1000


def offset_from_ms(milliseconds: float | None) -> timedelta | None:
    return None if milliseconds is None else timedelta(milliseconds=milliseconds)


def _said(values: list[Any], unless: object = None) -> list[Any]:
    """``values``, or nothing when every one is ``unless`` (or empty, for None)."""
    if unless is None:
        return values if any(values) else []
    return values if any(value != unless for value in values) else []


FINISH_OUTCOMES = frozenset(Outcome) - {Outcome.LOST, Outcome.FANNED_OUT}
"""LOST is recorded by rescue, never claimed by an owner; FANNED_OUT by fan_out."""


@dataclass(frozen=True, slots=True)
class FinishBatch:
    """An owner's outcomes as the arrays the one-statement ``finish`` query unnests."""

    finishes: list[Finish]
    repeated: frozenset[int]
    params: Row

    @classmethod
    def of(
        cls, finishes: Sequence[Finish], node_id: str, now: datetime, sealing: Sealing
    ) -> FinishBatch:
        """Order by id (heartbeats lock rows in id order too: no deadlock between them).

        A timer id given twice applies once; the later copies are fenced out (lost), as they
        would be when applied one after another.
        """
        first: dict[int, Finish] = {}
        repeated: set[int] = set()
        for item in finishes:
            if item.outcome not in FINISH_OUTCOMES:
                raise ValueError(f"an owner cannot finish an attempt as {item.outcome.value!r}")
            if item.timer_id in first:
                repeated.add(item.timer_id)
            else:
                first[item.timer_id] = item
        batch = [first[timer_id] for timer_id in sorted(first)]
        # The last three arrays go empty when they would say nothing (every outcome done, no
        # error, no new due time: nearly every batch), and unnest pads them with NULLs: encoding
        # five arrays element by element was a tenth of a busy worker's CPU.
        run_ats = [f.run_at for f in batch]
        seal = sealing.seal_error
        params = {
            "timer_ids": [f.timer_id for f in batch],
            "attempts": [f.attempt for f in batch],
            "outcomes": _said([f.outcome.value for f in batch], unless=Outcome.DONE.value),
            "errors": _said([seal(f.error) for f in batch]),
            "run_ats": [run_at or now for run_at in run_ats] if any(run_ats) else [],
            "tracebacks": _said([seal(f.traceback) for f in batch]),
            "claim_tokens": _said([f.claim_token for f in batch]),
            "started_ats": _said([f.started_at for f in batch]),
            "node_id": node_id,
            "now": now,
        }
        return cls(batch, frozenset(repeated), params)

    @property
    def released(self) -> bool:
        return any(f.outcome is Outcome.RELEASED for f in self.finishes)

    def retried(self) -> list[datetime]:
        """When the retries and snoozes of the batch are due again."""
        return [f.run_at for f in self.finishes if f.run_at is not None]

    def lost(self, applied: Sequence[int] | None) -> set[int]:
        """The outcomes fenced out, from ``finish``'s answer (None: every one applied)."""
        if applied is None:
            return set(self.repeated)
        done = set(applied)
        return {f.timer_id for f in self.finishes if f.timer_id not in done} | self.repeated
