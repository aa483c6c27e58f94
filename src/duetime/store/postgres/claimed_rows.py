"""Claimed rows → Timer and Claimed records, without a dict per row or a keyword per field."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from datetime import datetime
from operator import itemgetter
from typing import Any

from psycopg.cursor_async import AsyncCursor
from psycopg.rows import RowMaker

from duetime.model import (
    Claimed,
    Status,
    Timer,
    unreadable_timer,
)
from duetime.model.fast_records import make_timer
from duetime.store.postgres.rows import STATUSES, column_names
from duetime.support.sealing import TEXT_MARK, Sealing

TIMER_FIELDS = tuple(f.name for f in fields(Timer))
_STATUS_AT = TIMER_FIELDS.index("status")


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
        at = {name: i for i, name in enumerate([*column_names(cursor), *known])}
        missing = [name for name in TIMER_FIELDS if name not in at]
        if missing:
            raise KeyError(f"timer rows need the columns {', '.join(missing)}")
        pick = itemgetter(*(at[name] for name in TIMER_FIELDS))

        def timer(values: Sequence[Any]) -> Timer:
            args = pick(tuple(values) + extra)  # psycopg's rows are tuples already
            if text_status:
                args = (*args[:_STATUS_AT], STATUSES[args[_STATUS_AT]], *args[_STATUS_AT + 1 :])
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
        at = {name: i for i, name in enumerate(column_names(cursor))}
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
