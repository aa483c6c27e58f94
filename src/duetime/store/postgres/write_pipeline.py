"""Writing a batch of timers on one PostgreSQL connection, in chunks sent through a pipeline.

:func:`write_timers` runs inside the transaction open on the connection it is given (the
store's own, a savepoint of a group's, or a caller's: the outbox), so every strategy of
:mod:`.writes` that needs a transaction writes the same way.

The timers go out in chunks in one pipeline: while the server writes a chunk, the next one is
taken from ``timers`` — validated, when it is the app's lazy stream — and encoded, so the
client's work and the server's overlap (one statement for the whole batch left each side idle
while the other worked). A chunk is one statement a round: round r holds the r-th occurrence of
each key in it, so a key given twice is written twice in order, as one statement per timer would
(one statement cannot upsert the same row twice); chunks run in order too. Ids follow input
order, so newest-first listings show a batch as it was given. (Two batches sharing keys in
opposite orders may deadlock; PostgreSQL breaks it and the losing transaction is retried by
``Database.write``.)

A timer without a key gets one here (``generate_key``): a round all of whose keys the store
generated is inserted without a conflict check (``insert_fresh_timers``); in any other round
such a key must come back created, or the batch is refused (:class:`GeneratedKeyTaken`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import psycopg
from psycopg.cursor_async import AsyncCursor
from psycopg.rows import RowMaker

from duetime.errors import AlreadyExists
from duetime.model import NewTimer, OnConflict, PutResult, Timer
from duetime.model.fast_records import make_put_result
from duetime.store.postgres import write_plan
from duetime.store.postgres.database import Conn
from duetime.store.postgres.fetching import fetch_all
from duetime.store.postgres.rows import timer_from_row
from duetime.store.postgres.written_rows import (
    Unseen,
    check_text,
    fresh_timer_rows,
    timer_batch_params,
    written_timer_rows,
)
from duetime.store.queries import load_queries
from duetime.store.streams import chunked
from duetime.validation import generate_keys

Q = load_queries("duetime.store.postgres", "writes.sql")

Written = tuple[Timer, int]
"""A row a statement wrote: the timer and its version (1: created)."""
Pending = tuple[list[int], AsyncCursor[Written | Unseen]]
"""A statement sent: the input positions it writes, and the cursor its rows come back on."""


class GeneratedKeyTaken(Exception):
    """A key the store generated for a batch is held by a stored timer: the batch is rolled
    back and written again with keys drawn anew."""


KEY_DRAWS = 3
"""Times a batch is written with newly drawn keys before its clash is reported. 80 random bits
a millisecond do not repeat; a generator that did would be a fault to report, not to hide."""


def draw_keys(timers: Sequence[NewTimer]) -> list[str]:
    """Each timer's key: its own, or one the store draws (``generate_keys``)."""
    given = [t.key for t in timers]
    missing = given.count(None)
    if not missing:
        return given  # type: ignore[return-value]  # no None among them
    drawn = iter(generate_keys(missing))
    return [next(drawn) if key is None else key for key in given]


def put_query(on_conflict: OnConflict) -> str:
    """The statement that writes timers under ``on_conflict`` (``error`` inserts, as ``keep``
    does, and refuses afterwards what was kept)."""
    return Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]


class Batch:
    """A batch's timers as sent, their keys, and the row each one's statement wrote (None:
    kept as it was, or not answered yet), at their input positions."""

    def __init__(self) -> None:
        self.sent: list[NewTimer] = []
        self.keys: list[str] = []
        self.written: list[Written | None] = []
        self.unseen: set[tuple[str, str]] = set()
        """Keys an upsert reported :class:`Unseen`: a concurrent writer's, not yet visible."""

    def add(self, chunk: Sequence[NewTimer], keys: Sequence[str]) -> None:
        self.sent.extend(chunk)
        self.keys.extend(keys)
        self.written.extend([None] * len(chunk))

    async def take(self, statements: Sequence[Pending]) -> None:
        """Each statement's rows at its input positions."""
        for positions, cursor in statements:
            rows = await cursor.fetchall()
            self.unseen |= place_written(rows, positions, self.sent, self.keys, self.written)


async def write_timers(
    conn: Conn, query: str, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
) -> list[PutResult]:
    """Write ``timers`` with ``query`` (:func:`put_query`) on ``conn``, in the transaction open
    there; kept timers are read back, and ``error`` raises AlreadyExists for one of them."""
    batch = await _send(conn, query, timers, now)
    if batch.unseen:
        await _write_unseen_again(conn, query, batch, now)
    for timer, row in zip(batch.sent, batch.written, strict=True):
        if timer.key is None and (row is None or row[1] != 1):
            raise GeneratedKeyTaken
    missing = [i for i, row in enumerate(batch.written) if row is None]
    if missing and on_conflict == "error":
        raise exists(batch.keys[missing[0]])
    kept = [(batch.sent[i].namespace, batch.keys[i]) for i in missing]
    existing = await get_many(conn, kept)
    return [
        make_put_result("kept", existing[(batch.sent[i].namespace, batch.keys[i])])
        if row is None
        else make_put_result("created" if row[1] == 1 else "updated", row[0])
        for i, row in enumerate(batch.written)
    ]


async def _send(conn: Conn, query: str, timers: Iterable[NewTimer], now: datetime) -> Batch:
    """Every chunk's statements through one pipeline, their rows placed as they come back."""
    batch = Batch()
    statements: list[Pending] = []
    async with conn.pipeline() as pipeline:
        for chunk in chunked(timers, write_plan.PUT_CHUNK):
            check_text(chunk)
            chunk_keys = draw_keys(chunk)
            for positions in rounds(chunk, chunk_keys):
                offset = len(batch.sent)
                cursor = await _execute(conn, query, chunk, chunk_keys, positions, now)
                statements.append(([offset + i for i in positions], cursor))
            batch.add(chunk, chunk_keys)
            # The rows of the statements answered meanwhile (sending reads what has come back)
            # are decoded now, while the server writes the later chunks, rather than all after
            # the sync with the server idle.
            answered = 0
            while answered < len(statements) and statements[answered][1].pgresult is not None:
                answered += 1
            await batch.take(statements[:answered])
            del statements[:answered]
        await pipeline.sync()
        await batch.take(statements)
    return batch


async def _execute(
    conn: Conn,
    query: str,
    timers: Sequence[NewTimer],
    keys: Sequence[str],
    positions: Sequence[int],
    now: datetime,
) -> AsyncCursor[Written | Unseen]:
    """One round's statement: ``insert_fresh_timers`` when the store drew all its keys."""
    if len(positions) == len(timers):  # one round: the chunk as it is
        batch, batch_keys = list(timers), list(keys)
    else:
        batch = [timers[i] for i in positions]
        batch_keys = [keys[i] for i in positions]
    make: Callable[[AsyncCursor[Any]], RowMaker[Written | Unseen]]
    if all(timer.key is None for timer in batch):
        query = Q["insert_fresh_timers"]
        make = fresh_rows(batch, batch_keys, now)
    else:
        make = written_timer_rows(batch, batch_keys)
    cursor = conn.cursor(row_factory=make, binary=True)
    await cursor.execute(query, timer_batch_params(batch, batch_keys, now))
    return cursor


def fresh_rows(
    timers: Sequence[NewTimer], keys: Sequence[str], now: datetime
) -> Callable[[AsyncCursor[Any]], RowMaker[Written]]:
    """The row factory of ``insert_fresh_timers`` (:func:`~.rows.fresh_timer_rows`), which
    matches its rows to the timers by key: keys drawn twice for one statement (a random
    source that repeated) are drawn again rather than sent."""
    if len(set(keys)) != len(keys):
        raise GeneratedKeyTaken
    return fresh_timer_rows(timers, keys, now)


async def _write_unseen_again(conn: Conn, query: str, batch: Batch, now: datetime) -> None:
    """The timers of keys an upsert could not see, written again in order, each statement with
    a snapshot that sees them."""
    again = [i for i, t in enumerate(batch.sent) if (t.namespace, batch.keys[i]) in batch.unseen]
    again_keys = [batch.keys[i] for i in again]
    for positions in rounds([batch.sent[i] for i in again], again_keys):
        timers = [batch.sent[again[j]] for j in positions]
        keys = [again_keys[j] for j in positions]
        cursor = conn.cursor(row_factory=written_timer_rows(timers, keys), binary=True)
        await cursor.execute(query, timer_batch_params(timers, keys, now))
        await batch.take([([again[j] for j in positions], cursor)])


async def get_many(conn: Conn, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Timer]:
    """The timers of ``(namespace, key)`` pairs, as stored: their sealed values are opened by
    the store's write (:func:`~duetime.store.codec.opened_results`), which holds the ring."""
    if not keys:
        return {}
    params = {"namespaces": [ns for ns, _ in keys], "keys": [key for _, key in keys]}
    rows = await fetch_all(conn, Q["get_timers"], params)
    return {(row["namespace"], row["key"]): timer_from_row(row, None) for row in rows}


def place_written(
    rows: Iterable[Written | Unseen],
    positions: Iterable[int],
    sent: Sequence[NewTimer],
    keys: Sequence[str],
    written: list[Written | None],
) -> set[tuple[str, str]]:
    """One statement's rows at the input positions it wrote (None: kept as it was); the keys
    an upsert reported :class:`Unseen`."""
    unseen: set[tuple[str, str]] = set()
    by_key: dict[tuple[str, str], Written] = {}
    for row in rows:
        if isinstance(row, Unseen):
            unseen.add((row.namespace, row.key))
        else:
            by_key[row[0].namespace, row[0].key] = row
    for i in positions:
        written[i] = by_key.get((sent[i].namespace, keys[i]))
    return unseen


def rounds(timers: Sequence[NewTimer], keys: Sequence[str]) -> list[list[int]]:
    """Input positions in rounds: the first occurrence of every key, then the second, …"""
    if len(set(keys)) == len(keys):  # no key twice, whatever the namespaces: one round
        return [list(range(len(keys)))]
    seen: dict[tuple[str, str], int] = {}
    found: list[list[int]] = []
    for i, (timer, key) in enumerate(zip(timers, keys, strict=True)):
        n = seen.get((timer.namespace, key), 0)
        seen[(timer.namespace, key)] = n + 1
        if n == len(found):
            found.append([])
        found[n].append(i)
    return found


async def drawing_keys(put: Callable[[], Awaitable[list[PutResult]]]) -> list[PutResult]:
    """``put()``, run again while a key the store generated turns out to be taken: by
    ``insert_fresh_timers``' primary key on timer_keys, or by :class:`GeneratedKeyTaken`."""
    taken: Exception | None = None
    for _ in range(KEY_DRAWS):
        try:
            return await put()
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "timer_keys_pkey":  # only generated keys meet it
                raise
            taken = exc
        except GeneratedKeyTaken as exc:
            taken = exc
    raise AlreadyExists(
        f"keys generated for this batch were held by stored timers in {KEY_DRAWS} draws:"
        " nothing of the batch was stored",
        field="key",
    ) from taken


def exists(key: str) -> AlreadyExists:
    return AlreadyExists(f"a timer with key {key!r} already exists", field="key")
