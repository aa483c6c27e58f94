"""Pages of listings, and their opaque cursors: where the next page starts, after the last row.

Callers pass cursors back and never build them; each says which listing it belongs to (``id.``,
``event.``, ``name.``, ``pattern.``, ``audit.``, ``token.``), so one listing's cursor given to
another is refused as not issued here. They are plain text a pattern describes exactly (the API
documents them so), not encoded.
A listing fetches one row more than the page holds, to know whether another page follows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from duetime.errors import InvalidInput
from duetime.model import BulkAction, Page, Timer, TimerFilter
from duetime.model.cursors import (
    AUDIT_CURSOR_PATTERN,
    EVENT_CURSOR_PATTERN,
    ID_CURSOR_PATTERN,
    NAME_CURSOR_PATTERN,
    PATTERN_CURSOR_PATTERN,
    TOKEN_CURSOR_PATTERN,
)
from duetime.model.finding import SORTED_CURSOR_PATTERN, TimerSort
from duetime.model.history import LoggedEvent
from duetime.store.codec import like_pattern
from duetime.store.transitions import ACTS_ON
from duetime.support import budgets

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
MAX_ID = 2**63 - 1
MAX_INT4 = 2**31 - 1
_NO_VALUE = ("true", "false", "null")
TYPES_SCAN = 10_000
"""Suggesting event types reads at most this many of the newest timers (and every schedule)."""
Row = TypeVar("Row")
T = TypeVar("T")


def page(
    rows: Sequence[Row], limit: int, item: Callable[[Row], T], cursor: Callable[[T], str]
) -> Page[T]:
    """The page of the first ``limit`` of ``rows`` (fetched ``limit + 1``), fewer when the
    request's ``page_bytes`` ends it (:func:`within_bytes`): with the cursor of its last item
    when more rows follow."""
    kept = within_bytes(rows[:limit])
    items = [item(row) for row in budgets.checked(kept)]  # ends at the request's deadline
    more = len(rows) > len(kept)
    return Page(items, cursor(items[-1]) if more and items else None, cursor)


def within_bytes(rows: Sequence[Row]) -> Sequence[Row]:
    """The first of ``rows`` whose text and bytes columns stay within the request's
    ``page_bytes`` (:class:`~duetime.support.budgets.Budget`; one row at least): a page of
    large payloads is decoded only as far as it can be answered (the API bounds the JSON it
    renders by the same setting). Without a request's budget, ``rows`` unchanged."""
    budget = budgets.current()
    if budget is None or budget.page_bytes is None:
        return rows
    size = 0
    for n, row in enumerate(rows):
        size += _row_bytes(row)
        if n and size > budget.page_bytes:
            return rows[:n]
    return rows


def _row_bytes(row: object) -> int:
    # The row as read, before decoding: a sealed payload or error counts at its stored,
    # sealed length (longer than what the page shows), as that is what was read and opened.
    values = row.values() if isinstance(row, Mapping) else row
    if not isinstance(values, Iterable):
        return 0
    return sum(len(v) for v in values if isinstance(v, str | bytes))


def timer_filter_params(
    namespace: str,
    filter: TimerFilter,
    instant: Callable[[datetime], Any],
    strings: Callable[[tuple[str, ...]], Any] = list,
) -> dict[str, Any]:
    """A :class:`TimerFilter` as query parameters, the same names on both backends: ``type``
    as a glob (SQLite's ``GLOB``) and as a ``LIKE`` pattern (PostgreSQL's), the due range
    through ``instant`` (each backend's column value), the selected keys through ``strings``
    (SQLite: JSON text, PostgreSQL: an array); the payload match as a JSON path, type and
    value (SQLite's) and as a document to contain (PostgreSQL's)."""
    match = filter.payload
    return {
        "keys": None if filter.keys is None else strings(filter.keys),
        "key_prefix": filter.occurrence_prefix,
        "payload_path": None if match is None else match.sqlite_path,
        "payload_kind": None if match is None else match.kind,
        "payload_value": None if match is None or match.kind in _NO_VALUE else match.value,
        "payload_doc": None if match is None else match.document,
        "namespace": namespace,
        "subject": filter.subject,
        "status": filter.status.value if filter.status else None,
        "type_glob": filter.type,
        "type_like": None if filter.type is None else like_pattern(filter.type),
        "due_from": None if filter.due_from is None else instant(filter.due_from),
        "due_until": None if filter.due_until is None else instant(filter.due_until),
    }


def bulk_params(
    namespace: str,
    action: BulkAction,
    filter: TimerFilter,
    now: datetime,
    instant: Callable[[datetime], Any],
    strings: Callable[[Sequence[str]], Any],
    keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The parameters of a bulk action's batch or count: the filter's; ``acts_on``, the
    statuses the action takes a timer from, and ``keys``, the selection (if any), each as
    ``strings`` encodes a list of text for the backend; and ``run_after``: for ``run_now``,
    only timers not due by ``now`` (else None). ``keys`` given, the filter's own are not used."""
    selected = keys if keys is not None else filter.keys
    return {
        **timer_filter_params(namespace, filter, instant, strings),
        "acts_on": strings(ACTS_ON[action]),
        "keys": None if selected is None else strings(list(selected)),
        "run_after": instant(now) if action == "run_now" else None,
    }


def timer_listing(
    namespace: str,
    filter: TimerFilter,
    cursor: str | None,
    limit: int,
    instant: Callable[[datetime], Any] = lambda value: value,
    strings: Callable[[tuple[str, ...]], Any] = list,
    sort: TimerSort = "newest",
) -> dict[str, Any]:
    """The parameters of ``list_timers``: newest first, before the cursor's id (a keyset, so
    the hundredth page costs what the first does); sorted, after the cursor's (value, id)."""
    params = {**timer_filter_params(namespace, filter, instant, strings), "limit": limit + 1}
    if sort == "newest":
        before = decode_cursor(cursor)
        return {**params, "before_id": before if before is not None else MAX_ID}
    after = decode_sorted_cursor(cursor, sort)
    value: Any = None
    if after is not None:
        if sort == "attempts":
            value = max(min(after[0], MAX_INT4), -MAX_INT4)
        else:
            value = instant(_instant_of(after[0]))
    return {**params, "after_value": value, "after_id": None if after is None else after[1]}


def _instant_of(micros: int) -> datetime:
    """Microseconds since 1970 as an instant, clamped to the years 1 to 9999."""
    try:
        return _EPOCH + micros * _MICROSECOND
    except OverflowError:
        return _LATEST if micros > 0 else datetime(1, 1, 1, tzinfo=UTC)


def sorted_cursor(sort: TimerSort, timer: Timer) -> str:
    """After ``timer`` in a listing sorted by ``sort`` (``newest``: by id)."""
    if sort == "newest":
        return encode_cursor(timer.id)
    if sort == "attempts":
        return f"attempts.{timer.attempts}.{timer.id}"
    instant = timer.due_at if sort == "due" else timer.updated_at
    return f"{sort}.{(instant - _EPOCH) // _MICROSECOND}.{timer.id}"


def decode_sorted_cursor(cursor: str | None, sort: TimerSort) -> tuple[int, int] | None:
    """``(value, id)`` to list after (None: from the first); InvalidInput naming ``cursor`` for
    one of another listing or order."""
    if cursor is None or cursor == "":
        return None
    if not cursor.startswith(f"{sort}."):
        raise InvalidInput("cursor", f"not a cursor of this listing sorted by {sort}")
    value, _, timer_id = _match(_SORTED, cursor).partition(".")
    return max(min(int(value), MAX_ID), -MAX_ID), min(int(timer_id), MAX_ID)


_ID = re.compile(ID_CURSOR_PATTERN)
_EVENT = re.compile(EVENT_CURSOR_PATTERN)
_NAME = re.compile(NAME_CURSOR_PATTERN)
_PATTERN = re.compile(PATTERN_CURSOR_PATTERN)
_AUDIT = re.compile(AUDIT_CURSOR_PATTERN)
_TOKEN = re.compile(TOKEN_CURSOR_PATTERN)
_SORTED = re.compile(SORTED_CURSOR_PATTERN)
_LATEST = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)


def _match(pattern: re.Pattern[str], cursor: str) -> str:
    """The text after the cursor's kind; InvalidInput naming ``cursor`` for anything else."""
    if len(cursor) > _MAX_CURSOR or pattern.fullmatch(cursor) is None:
        raise InvalidInput("cursor", "not a cursor this server issued")
    return cursor.partition(".")[2]


_MAX_CURSOR = 256


def encode_cursor(last_id: int) -> str:
    """After the row ``last_id`` of a listing by id."""
    return f"id.{last_id}"


def decode_cursor(cursor: str | None) -> int | None:
    """The id to list before (None: from the newest)."""
    if cursor is None or cursor == "":
        return None
    return min(int(_match(_ID, cursor)), MAX_ID)


def encode_event_cursor(fired_at: datetime, timer_id: int) -> str:
    """After the event ``(fired_at, id)``: the event log is ordered by both."""
    return f"event.{(fired_at - _EPOCH) // _MICROSECOND}.{timer_id}"


def event_cursor(event: LoggedEvent) -> str:
    """After ``event`` in the event log (newest ``fired_at`` first)."""
    fired_at = event.timer.fired_at
    assert fired_at is not None, "the event log lists fired timers only"
    return encode_event_cursor(fired_at, event.timer.id)


def decode_event_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    """``(fired_at, id)`` to list before (None: from the newest)."""
    if cursor is None or cursor == "":
        return None
    micros, _, timer_id = _match(_EVENT, cursor).partition(".")
    try:
        fired_at = _EPOCH + int(micros) * _MICROSECOND
    except OverflowError:
        fired_at = _LATEST
    return min(fired_at, _LATEST), min(int(timer_id), MAX_ID)


def encode_name_cursor(name: str) -> str:
    """After ``name`` in a listing by name."""
    return f"name.{name}"


def decode_name_cursor(cursor: str | None) -> str:
    """The name to list after ('' from the start)."""
    if cursor is None or cursor == "":
        return ""
    return _match(_NAME, cursor)


def encode_pattern_cursor(pattern: str) -> str:
    """After ``pattern`` in the listing of flow control rules."""
    return f"pattern.{pattern}"


def decode_pattern_cursor(cursor: str | None) -> str:
    """The pattern to list after ('' from the start)."""
    if cursor is None or cursor == "":
        return ""
    return _match(_PATTERN, cursor)


def encode_audit_cursor(entry_id: int) -> str:
    """After the audit log's entry ``entry_id`` (the log is listed newest first)."""
    return f"audit.{entry_id}"


def decode_audit_cursor(cursor: str | None) -> int:
    """The entry id to list before (past the newest when there is no cursor)."""
    if cursor is None or cursor == "":
        return MAX_ID
    return min(int(_match(_AUDIT, cursor)), MAX_ID)


def encode_token_cursor(token_id: int) -> str:
    """After the token ``token_id`` (tokens are listed oldest first)."""
    return f"token.{token_id}"


def decode_token_cursor(cursor: str | None) -> int:
    """The token id to list after (0: from the oldest)."""
    if cursor is None or cursor == "":
        return 0
    return min(int(_match(_TOKEN, cursor)), MAX_ID)
