"""The PostgreSQL store: many workers on many machines, claiming with ``FOR UPDATE SKIP LOCKED``.

Each method is one transaction over a pooled connection (see :mod:`.database`); the SQL lives in
``queries.sql`` under the method's name. Claims, finishes and rescues are single statements
(a claim's transaction first turns sorting off, see ``claim_in_order``), so their cost in round
trips does not grow with the timers they take. Writers that make work due send a ``pg_notify``
right after their commit (inside a caller's own transaction, as part of it); :mod:`.wakeup`
hears it in every process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import partial
from itertools import chain, islice
from typing import NamedTuple

import psycopg
from psycopg.cursor_async import AsyncCursor
from psycopg.errors import TransactionRollback

from duetime.errors import AlreadyExists, InvalidInput
from duetime.model import (
    Attempt,
    BulkAction,
    Claimed,
    ClaimFilter,
    DeadType,
    FanOut,
    Finish,
    HeldRow,
    NewTimer,
    Node,
    OnConflict,
    Page,
    PutResult,
    Status,
    Timer,
    TimerFilter,
)
from duetime.model.deliveries import delivery_key, fan_out_note
from duetime.model.finding import TimerSort
from duetime.store.codec import like_pattern, new_claim_token
from duetime.store.cursors import (
    TYPES_SCAN,
    bulk_params,
    page,
    sorted_cursor,
    timer_listing,
)
from duetime.store.gauges import gauges
from duetime.store.listeners import WakeupListener
from duetime.store.postgres.audit import PostgresAudit
from duetime.store.postgres.claims import give_back_if_unread
from duetime.store.postgres.database import Conn, Database, Statement, fetch_all, fetch_value
from duetime.store.postgres.grouping import CommitQueue
from duetime.store.postgres.history import PostgresHistory
from duetime.store.postgres.limits import PostgresLimits
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.reach import reach_of
from duetime.store.postgres.rows import (
    FinishBatch,
    Row,
    Unseen,
    attempt_from_row,
    check_text,
    claim_known,
    claimed_rows,
    node_from_row,
    node_params,
    offset_ms,
    timer_batch_params,
    timer_from_row,
    written_timer_rows,
)
from duetime.store.postgres.schedules import PostgresSchedules
from duetime.store.postgres.schema import migrate, schema_version
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.tokens import PostgresTokens
from duetime.store.postgres.transactions import PostgresOutbox, PostgresTransactions
from duetime.store.postgres.wakeup import Listener
from duetime.store.protocol import ClockSampler
from duetime.store.queries import load_queries
from duetime.store.room import check_namespace_room
from duetime.store.streams import Replayable, chunked
from duetime.store.transitions import Transition, refused
from duetime.validation import generate_key

Q = load_queries("duetime.store.postgres")
_BULK_QUERIES = {
    (False, False): ("bulk_batch", "bulk_count"),
    (False, True): ("bulk_keys", "count_keys"),
    (True, False): ("delete_candidates", "count_deletable"),
    (True, True): ("delete_key_candidates", "count_deletable_keys"),
}
"""A bulk action's batch and count queries, by (is it a delete, is it a selection of keys): a
delete takes archived timers too, a selection goes through the key index."""
PUT_CHUNK = 100
"""Timers a statement of ``put_timers``: small enough that the client validates and encodes the
next chunk while the server writes this one, large enough that a statement's own cost is small
(``bench/enqueue_probe.py``)."""


class PostgresStore:
    """Store backed by PostgreSQL (``synchronous_commit=on``), its tables in one schema."""

    def __init__(self, url: str, *, listen: bool | None = None) -> None:
        """``listen``: hear wake-ups over LISTEN/NOTIFY (default: the URL's ``listen``, true)."""
        self.url = url
        self.settings = parse_url(url)
        self.schema = self.settings.schema
        self._db = Database(self.settings)
        self._notices = Notices(self._db, self.settings.channel)
        self._listen = self.settings.listen if listen is None else listen
        self._listener: Listener | None = None
        self.schedules = PostgresSchedules(self._db, self._notices)
        self.history = PostgresHistory(self._db, self.schema)
        self.tokens = PostgresTokens(self._db)
        self.audit = PostgresAudit(self._db)
        self.limits = PostgresLimits(self._db, claim_params)
        self.transactions = PostgresTransactions(self._db)
        self.outbox = PostgresOutbox(self.schema, self._put_in_savepoint, self._transition_on)
        self._puts: CommitQueue[PutCall, list[PutResult]] = CommitQueue(
            self._put_alone, self._put_together
        )

    # -- lifecycle --------------------------------------------------------------------------
    async def open(self, *, migrate: bool = True) -> None:
        if self._db.is_open:
            return
        await self._db.open()
        try:
            if migrate:
                await self.migrate()
            else:
                await self._learn_reach()
            if self._listen:
                self._listener = Listener(
                    self.settings.conninfo, self.settings.channel, self._notices.listeners
                )
                await self._listener.start()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        await self._db.close()

    async def db_now(self) -> datetime | None:
        """The database server's clock, which decides what is due and when leases end."""

        async def run(conn: Conn) -> datetime:
            now: datetime = await fetch_value(conn, Q["db_now"], {})
            return now

        return await self._db.read(run)

    async def change_marker(self) -> str:
        async def run(conn: Conn) -> str:
            marker: str = await fetch_value(conn, Q["change_marker"], {})
            return marker

        return await self._db.read(run)

    def add_wakeup_listener(self, listener: WakeupListener) -> None:
        self._notices.listeners.add(listener)

    def remove_wakeup_listener(self, listener: WakeupListener) -> None:
        self._notices.listeners.remove(listener)

    # -- schema -----------------------------------------------------------------------------
    async def migrate(self) -> list[int]:
        """Apply pending migrations under an advisory lock, so concurrent starters queue up."""
        applied = await self._db.write(lambda conn: migrate(conn, self.schema))
        await self._learn_reach()  # the schema's tables may be new
        return applied

    async def _learn_reach(self) -> None:
        """Where the store's connections lead: callers' transactions must lead there too."""
        self.outbox.reach = await self._db.read(partial(reach_of, schema=self.schema))

    async def schema_version(self) -> int:
        return await self._db.read(lambda conn: schema_version(conn, self.schema))

    # -- namespaces -------------------------------------------------------------------------
    async def ensure_namespace(self, namespace: str, now: datetime) -> None:
        params = {"name": namespace, "now": now}
        await self._db.read(lambda conn: conn.execute(Q["ensure_namespace"], params))

    async def namespace_exists(self, namespace: str) -> bool:
        async def run(conn: Conn) -> bool:
            return bool(await fetch_all(conn, Q["namespace_exists"], {"name": namespace}))

        return await self._db.read(run)

    async def list_namespaces(
        self, after: str = "", limit: int | None = None, only: Sequence[str] | None = None
    ) -> list[str]:
        params = {"after": after, "limit": limit, "only": None if only is None else list(only)}

        async def run(conn: Conn) -> list[str]:
            return [row["name"] for row in await fetch_all(conn, Q["list_namespaces"], params)]

        return await self._db.read(run)

    async def add_namespaces(
        self, names: Sequence[str], now: datetime, cap: int, field: str
    ) -> list[str]:
        lock = {"lock": f"duetime:namespaces:{self.schema}"}
        params = {"names": list(dict.fromkeys(names)), "up_to": cap, "now": now}

        async def run(conn: Conn) -> list[str]:
            await conn.execute(Q["lock_namespaces"], lock)
            (room,) = await fetch_all(conn, Q["namespace_room"], params)
            new: list[str] = room["new"]
            check_namespace_room(int(room["held"]), len(new), cap, field)
            for name in new:
                await conn.execute(Q["ensure_namespace"], {"name": name, "now": now})
            return new

        return await self._db.write(run)

    # -- scheduling -------------------------------------------------------------------------
    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Store timers in one transaction. A small batch (up to :data:`PUT_CHUNK` timers) that
        arrives while another is committing waits and shares the next commit with every batch
        that queued meanwhile (:mod:`.grouping`); a larger one has a transaction of its own."""
        items = iter(timers)
        head = list(islice(items, PUT_CHUNK + 1))  # validated here, in the caller's task
        if len(head) > PUT_CHUNK:
            return await self._put_apart(chain(head, items), on_conflict, now)
        return await self._puts.run(PutCall(head, on_conflict, now))

    async def _put_alone(self, call: PutCall) -> list[PutResult]:
        try:
            if _drawn_keys_only([call]):
                return await self._put_fresh(call.timers, call.now)
            if _at_once([call]):
                (answer,) = await self._put_at_once([call])
                if isinstance(answer, Exception):
                    raise answer
                return answer
        except psycopg.DataError as exc:
            raise _refused_payload(exc) from exc
        return await self._put_apart(call.timers, call.on_conflict, call.now)

    async def _put_at_once(self, calls: Sequence[PutCall]) -> list[list[PutResult] | Exception]:
        """Callers' timers with keys of their own (see :func:`_at_once`) in one round trip: the
        insert (``keep``, ``error``) and upsert (``update``) statements as one implicit
        transaction (:meth:`Database.atomic`), then the NOTIFY if a timer was made or changed
        (kept ones wake nobody), where a transaction costs six round trips for a group (BEGIN,
        a savepoint, the statements, its release, COMMIT, the NOTIFY). What comes after the
        commit never needs it undone: a caller whose only timer's key exists (``error``) stored
        nothing and fails alone; kept timers are read afterwards; a key an upsert could not see
        (a concurrent caller's) is that single-timer caller's whole write, made again on its
        own. Raises InvalidInput or the DataError of a payload PostgreSQL refuses, with nothing
        stored."""
        timers = [timer for call in calls for timer in call.timers]
        check_text(timers)
        now = max(call.now for call in calls)
        keys = [timer.key or "" for timer in timers]  # every one given (_at_once)
        spans = _spans(calls)
        by_query: dict[str, list[int]] = {}
        for call, span in zip(calls, spans, strict=True):
            by_query.setdefault(_put_query(call.on_conflict), []).extend(span)
        statements = []
        for query, positions in by_query.items():
            batch = [timers[i] for i in positions]
            batch_keys = [keys[i] for i in positions]
            params = timer_batch_params(batch, batch_keys, now)
            make = written_timer_rows(batch, batch_keys)
            statements.append(Statement(query, params, make, binary=True))
        answered = await self._db.atomic(statements)
        written: list[tuple[Timer, int] | None] = [None] * len(timers)
        unseen: set[tuple[str, str]] = set()
        for positions, answer in zip(by_query.values(), answered, strict=True):
            unseen |= _place_written(answer, positions, timers, keys, written)
        kept = [
            (timers[i].namespace, keys[i])
            for i, row in enumerate(written)
            if row is None and (timers[i].namespace, keys[i]) not in unseen
        ]
        existing = await self._db.read(lambda conn: self._get_many(conn, kept)) if kept else {}
        answers = [
            await self._answer_at_once(call, own, timers, keys, written, existing, unseen)
            for call, own in zip(calls, spans, strict=True)
        ]
        changed = _changed(*_answered(answers))
        if changed:  # kept timers wake nobody: the NOTIFY waits for the answer
            notice = self._notices.notice(min(changed))
            await self._db.read(lambda conn: _send_notice(conn, notice))
        self._notices.here_earliest(changed)
        return answers

    async def _answer_at_once(
        self,
        call: PutCall,
        own: range,
        timers: Sequence[NewTimer],
        keys: Sequence[str],
        written: Sequence[tuple[Timer, int] | None],
        existing: Mapping[tuple[str, str], Timer],
        unseen: set[tuple[str, str]],
    ) -> list[PutResult] | Exception:
        """One caller's answer from :meth:`_put_at_once`'s rows."""
        results: list[PutResult] = []
        for i in own:
            row, at = written[i], (timers[i].namespace, keys[i])
            if at in unseen:  # a single-timer caller's whole write: made again on its own
                try:
                    return await self._put_apart(call.timers, call.on_conflict, call.now)
                except Exception as exc:  # that caller's own failure
                    return exc
            if row is not None:
                results.append(PutResult("created" if row[1] == 1 else "updated", row[0]))
            elif call.on_conflict == "error":  # its only timer: nothing of it was stored
                return _exists(keys[i])
            else:
                results.append(PutResult("kept", existing[at]))
        return results

    async def _put_fresh(self, timers: Sequence[NewTimer], now: datetime) -> list[PutResult]:
        """Up to PUT_CHUNK timers whose keys the store draws (``emit()``, a REST create without
        a key; one caller's, or a group's): one statement and its NOTIFY in one round trip
        (:meth:`Database.atomic`), where a transaction costs four or more (BEGIN, a savepoint
        for a group, the insert, COMMIT, the NOTIFY). Nothing is decided after the insert, so
        nothing needs the transaction open; a drawn key that is taken refuses it all (drawn
        again). A payload PostgreSQL refuses raises its DataError."""
        check_text(timers)
        # Each row is created with run_at = due_at: the wake-up is known before the answer.
        notice = self._notices.notice(min(timer.due_at for timer in timers))

        async def put() -> list[PutResult]:
            keys = [generate_key() for _ in timers]
            statement = Statement(
                Q["insert_fresh_timers"],
                timer_batch_params(timers, keys, now),
                written_timer_rows(timers, keys),
                binary=True,
            )
            (rows,) = await self._db.atomic([statement], after=[notice])
            if len(rows) != len(timers):  # pragma: no cover - the insert has no condition
                raise GeneratedKeyTaken
            return [PutResult("created", timer) for timer, _ in rows]

        results = await _drawing_keys(put)
        self._notices.here_earliest(_changed(results))
        return results

    async def _put_apart(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """One caller's timers in a transaction of their own."""
        query = _put_query(on_conflict)
        source = Replayable(timers)  # a transaction PostgreSQL rolls back is run again

        async def run(conn: Conn) -> list[PutResult]:
            return await self._put(conn, query, source, on_conflict, now)

        try:
            results = await _drawing_keys(lambda: self._db.write(run))
        except psycopg.DataError as exc:
            raise _refused_payload(exc) from exc
        self._notices.here_earliest(_changed(results))
        return results

    async def _put_together(self, calls: Sequence[PutCall]) -> list[list[PutResult] | Exception]:
        """Several callers' timers in one transaction and one NOTIFY (see :mod:`.grouping`):
        each caller's answer, or the error of its own timers, which stored none of them."""
        if _drawn_keys_only(calls) and sum(len(call.timers) for call in calls) <= PUT_CHUNK:
            timers = [timer for call in calls for timer in call.timers]
            try:
                results = await self._put_fresh(timers, max(call.now for call in calls))
            except (psycopg.DataError, InvalidInput, AlreadyExists):
                pass  # one caller's timers are refused: each in a savepoint of its own, below
            else:
                return [results[span.start : span.stop] for span in _spans(calls)]
        elif _at_once(calls):
            try:
                return await self._put_at_once(calls)
            except (psycopg.DataError, InvalidInput):
                pass  # as above

        async def run(conn: Conn) -> list[list[PutResult] | Exception]:
            by_query: dict[str, list[int]] = {}
            for i, call in enumerate(calls):
                by_query.setdefault(_put_query(call.on_conflict), []).append(i)
            answers: dict[int, list[PutResult] | Exception] = {}
            for query, indices in by_query.items():
                answers |= await self._put_group(conn, query, [calls[i] for i in indices], indices)
            outcomes = [answers[i] for i in range(len(calls))]
            await self._notices.notify_earliest(conn, _changed(*_answered(outcomes)))
            return outcomes

        outcomes = await self._db.write(run)
        self._notices.here_earliest(_changed(*_answered(outcomes)))
        return outcomes

    async def _put_group(
        self, conn: Conn, query: str, calls: Sequence[PutCall], indices: Sequence[int]
    ) -> dict[int, list[PutResult] | Exception]:
        """Callers of one statement kind in one savepoint: all their timers in the same
        statements. Should one caller's timers be refused, the savepoint is rolled back and each
        caller is written again in a savepoint of its own, so that only its own write fails."""
        rule: OnConflict = "update" if query == Q["upsert_timer"] else "keep"
        answers: dict[int, list[PutResult] | Exception] = {}
        try:
            async with conn.transaction():
                timers = [timer for call in calls for timer in call.timers]
                now = max(call.now for call in calls)
                results = await self._put(conn, query, timers, rule, now, notify=False)
                start = 0
                for index, call in zip(indices, calls, strict=True):
                    own = results[start : start + len(call.timers)]
                    start += len(call.timers)
                    answers[index] = own
                    kept = [r for r in own if r.action == "kept"]
                    if call.on_conflict == "error" and kept:
                        if len(own) > 1:  # its other timers are written: undo them all
                            raise _Isolate
                        answers[index] = _exists(kept[0].timer.key)
            return answers
        except Exception as exc:
            if _connection_lost(conn, exc):
                raise
        for index, call in zip(indices, calls, strict=True):
            try:
                answers[index] = await self._put_in_savepoint(
                    conn, query, call.timers, call.on_conflict, call.now, notify=False
                )
            except Exception as exc:
                if _connection_lost(conn, exc):
                    raise
                answers[index] = (
                    _refused_payload(exc) if isinstance(exc, psycopg.DataError) else exc
                )
        return answers

    async def _put(
        self,
        conn: Conn,
        query: str,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
        *,
        notify: bool = True,
    ) -> list[PutResult]:
        # The timers go out in chunks in one pipeline: while the server writes a chunk, the
        # next one is taken from ``timers`` — validated, when it is the app's lazy stream — and
        # encoded, so the client's work and the server's overlap (one statement for the whole
        # batch left each side idle while the other worked). A chunk is one statement a round:
        # round r holds the r-th occurrence of each key in it, so a key given twice is written
        # twice in order, as one statement per timer would (one statement cannot upsert the same
        # row twice); chunks run in order too. Ids follow input order, so newest-first listings
        # show a batch as it was given. (Two batches sharing keys in opposite orders may
        # deadlock; PostgreSQL breaks it and the losing transaction is retried by
        # Database.write.)
        # A timer without a key gets one here (``generate_key``): a round all of whose keys
        # the store generated is inserted without a conflict check (``insert_fresh_timers``);
        # in any other round such a key must come back created, or the batch is refused.
        sent: list[NewTimer] = []
        keys: list[str] = []
        written: list[tuple[Timer, int] | None] = []
        unseen: set[tuple[str, str]] = set()
        statements: list[tuple[list[int], AsyncCursor[tuple[Timer, int] | Unseen]]] = []
        async with conn.pipeline() as pipeline:
            for chunk in chunked(timers, PUT_CHUNK):
                check_text(chunk)
                chunk_keys = [generate_key() if t.key is None else t.key for t in chunk]
                for positions in _rounds(chunk, chunk_keys):
                    batch = [chunk[i] for i in positions]
                    batch_keys = [chunk_keys[i] for i in positions]
                    generated = all(timer.key is None for timer in batch)
                    statement = Q["insert_fresh_timers"] if generated else query
                    cursor = conn.cursor(
                        row_factory=written_timer_rows(batch, batch_keys), binary=True
                    )
                    await cursor.execute(statement, timer_batch_params(batch, batch_keys, now))
                    statements.append(([len(sent) + i for i in positions], cursor))
                sent.extend(chunk)
                keys.extend(chunk_keys)
                written.extend([None] * len(chunk))
                # The rows of the statements answered meanwhile (sending reads what has come
                # back) are decoded now, while the server writes the later chunks, rather than
                # all after the sync with the server idle.
                answered = 0
                while answered < len(statements) and statements[answered][1].pgresult is not None:
                    answered += 1
                unseen |= await _take_written(statements[:answered], sent, keys, written)
                del statements[:answered]
            await pipeline.sync()
            unseen |= await _take_written(statements, sent, keys, written)
        if unseen:  # written again in order, each statement with a snapshot that sees them
            again = [i for i, t in enumerate(sent) if (t.namespace, keys[i]) in unseen]
            again_keys = [keys[i] for i in again]
            for positions in _rounds([sent[i] for i in again], again_keys):
                batch = [sent[again[j]] for j in positions]
                batch_keys = [again_keys[j] for j in positions]
                cursor = conn.cursor(row_factory=written_timer_rows(batch, batch_keys), binary=True)
                await cursor.execute(query, timer_batch_params(batch, batch_keys, now))
                await _take_written([([again[j] for j in positions], cursor)], sent, keys, written)
        for timer, row in zip(sent, written, strict=True):
            if timer.key is None and (row is None or row[1] != 1):
                raise GeneratedKeyTaken
        missing = [i for i, row in enumerate(written) if row is None]
        if missing and on_conflict == "error":
            raise _exists(keys[missing[0]])
        existing = await self._get_many(conn, [(sent[i].namespace, keys[i]) for i in missing])
        results = [
            PutResult("kept", existing[(sent[i].namespace, keys[i])])
            if row is None
            else PutResult("created" if row[1] == 1 else "updated", row[0])
            for i, row in enumerate(written)
        ]
        if notify:
            await self._notices.notify_earliest(conn, _changed(results))
        return results

    async def _put_in_savepoint(
        self,
        conn: Conn,
        query: str,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
        *,
        notify: bool = True,
    ) -> list[PutResult]:
        """The outbox's write: in a savepoint of the caller's transaction, drawn again should
        a key the store generated be taken (see :func:`_drawing_keys`)."""
        source = Replayable(timers)

        async def run() -> list[PutResult]:
            async with conn.transaction():
                return await self._put(conn, query, source, on_conflict, now, notify=notify)

        return await _drawing_keys(run)

    async def _get_many(
        self, conn: Conn, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], Timer]:
        """The timers of ``(namespace, key)`` pairs."""
        if not keys:
            return {}
        params = {"namespaces": [ns for ns, _ in keys], "keys": [key for _, key in keys]}
        rows = await fetch_all(conn, Q["get_timers"], params)
        return {(row["namespace"], row["key"]): timer_from_row(row) for row in rows}

    async def get_timer(self, namespace: str, key: str) -> Timer | None:
        async def run(conn: Conn) -> Timer | None:
            rows = await fetch_all(conn, Q["get_timer"], {"namespace": namespace, "key": key})
            return timer_from_row(rows[0]) if rows else None

        return await self._db.read(run)

    async def list_timers(
        self,
        namespace: str,
        filter: TimerFilter,
        cursor: str | None,
        limit: int,
        sort: TimerSort = "newest",
    ) -> Page[Timer]:
        params = timer_listing(namespace, filter, cursor, limit, sort=sort)
        query = Q["list_timers" if sort == "newest" else f"list_timers_by_{sort}"]

        async def run(conn: Conn) -> Page[Timer]:
            rows = await fetch_all(conn, query, params)
            return page(rows, limit, timer_from_row, partial(sorted_cursor, sort))

        return await self._db.read(run)

    async def list_types(self, namespace: str, prefix: str, limit: int) -> list[str]:
        params = {"namespace": namespace, "prefix": prefix, "limit": limit, "scan": TYPES_SCAN}

        async def run(conn: Conn) -> list[str]:
            return [row["type"] for row in await fetch_all(conn, Q["list_types"], params)]

        return await self._db.read(run)

    async def list_attempts(self, timer_id: int) -> list[Attempt]:
        async def run(conn: Conn) -> list[Attempt]:
            rows = await fetch_all(conn, Q["list_attempts"], {"timer_id": timer_id})
            return [attempt_from_row(row) for row in rows]

        return await self._db.read(run)

    async def count_by_status(self, namespace: str) -> dict[Status, int]:
        async def run(conn: Conn) -> dict[Status, int]:
            counts = dict.fromkeys(Status, 0)
            for row in await fetch_all(conn, Q["count_by_status"], {"namespace": namespace}):
                counts[Status(row["status"])] = row["count"]
            return counts

        return await self._db.read(run)

    async def namespace_gauges(self) -> dict[str, tuple[dict[Status, int], datetime | None]]:
        async def run(conn: Conn) -> dict[str, tuple[dict[Status, int], datetime | None]]:
            counts = await fetch_all(conn, Q["gauge_counts"], {})
            earliest = await fetch_all(conn, Q["gauge_earliest"], {})
            return gauges(
                ((row["namespace"], row["status"], row["count"]) for row in counts),
                ((row["namespace"], row["earliest"]) for row in earliest),
            )

        return await self._db.read(run)

    async def cancel(self, namespace: str, key: str, now: datetime) -> Timer:
        return await self._transition("cancel", namespace, key, now)

    async def replay(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("replay", namespace, key, now)
        self._notices.here(timer.run_at)
        return timer

    async def run_now(self, namespace: str, key: str, now: datetime) -> Timer:
        timer = await self._transition("run_now", namespace, key, now)
        self._notices.here(timer.run_at)
        return timer

    async def delete(self, namespace: str, key: str, now: datetime) -> Timer:
        params = {"namespace": namespace, "key": key}

        async def run(conn: Conn) -> Timer:
            rows = await fetch_all(conn, Q["delete_timer"], params)
            if rows:
                return timer_from_row(rows[0])
            existing = await fetch_all(conn, Q["get_timer"], params)
            raise refused("delete", key, existing[0]["status"] if existing else None)

        return await self._db.write(run)

    async def bulk_batch(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        after_id: int,
        now: datetime,
        limit: int,
        keys: Sequence[str] | None = None,
    ) -> tuple[int, int | None]:
        params = {
            **bulk_params(namespace, action, filter, now, lambda instant: instant, list, keys),
            "after_id": after_id,
            "limit": limit,
        }
        query = Q[_BULK_QUERIES[action == "delete", keys is not None][0]]
        wakes = action in ("replay", "run_now")

        async def run(conn: Conn) -> tuple[int, int | None]:
            await conn.execute(Q["walk_in_index_order"])  # else each batch re-reads the rest
            ids = [row["id"] for row in await fetch_all(conn, query, params)]
            if not ids:
                return 0, None
            change = {"ids": ids, "now": now, "namespace": namespace}
            if action == "delete":
                changed: int = await fetch_value(conn, Q["bulk_delete"], change)
            else:
                changed = (await conn.execute(Q[f"bulk_{action}"], change)).rowcount
            if changed and wakes:
                await self._notices.notify(conn, now)
            return changed, ids[-1]

        changed, last = await self._db.write(run)
        if changed and wakes:
            self._notices.here(now)
        return changed, last

    async def dead_types(self, namespace: str, limit: int) -> list[DeadType]:
        params = {"namespace": namespace, "limit": limit}

        async def run(conn: Conn) -> list[DeadType]:
            rows = await fetch_all(conn, Q["dead_types"], params)
            return [
                DeadType(row["type"], row["count"], row["newest_at"], row["newest_error"])
                for row in rows
            ]

        return await self._db.read(run)

    async def count_matching(
        self,
        namespace: str,
        action: BulkAction,
        filter: TimerFilter,
        now: datetime,
        keys: Sequence[str] | None = None,
    ) -> int:
        params = bulk_params(namespace, action, filter, now, lambda instant: instant, list, keys)
        query = Q[_BULK_QUERIES[action == "delete", keys is not None][1]]

        async def run(conn: Conn) -> int:
            count: int = await fetch_value(conn, query, params)
            return count

        return await self._db.read(run)

    async def _transition(self, name: Transition, namespace: str, key: str, now: datetime) -> Timer:
        """Cancel or replay one timer; NotFound / Conflict name the key."""
        return await self._db.write(
            lambda conn: self._transition_on(conn, name, namespace, key, now)
        )

    async def _transition_on(
        self, conn: Conn, name: Transition, namespace: str, key: str, now: datetime
    ) -> Timer:
        """:meth:`_transition` on a given connection (the store's, or a caller's: the outbox)."""
        params = {"namespace": namespace, "key": key, "now": now}
        rows = await fetch_all(conn, Q[name], params)
        if rows:
            timer = timer_from_row(rows[0])
            if name != "cancel":
                await self._notices.notify(conn, timer.run_at)
            return timer
        existing = await fetch_all(conn, Q["get_timer"], params)
        raise refused(name, key, existing[0]["status"] if existing else None)

    # -- working ----------------------------------------------------------------------------
    async def next_run_at(
        self, namespace: str, types: Sequence[str] | ClaimFilter | None
    ) -> datetime | None:
        params = {"namespace": namespace, **claim_params(types)}

        async def run(conn: Conn) -> datetime | None:
            earliest: datetime | None = await fetch_value(conn, Q["next_run_at"], params)
            return earliest

        return await self._db.read(run)

    async def claim_due(
        self,
        namespace: str,
        types: Sequence[str] | ClaimFilter | None,
        now: datetime,
        limit: int,
        node_id: str,
        lease_until: datetime,
    ) -> list[Claimed]:
        token = new_claim_token()
        params = {
            "namespace": namespace,
            **claim_params(types),
            "now": now,
            "limit": limit,
            "node_id": node_id,
            "lease_until": lease_until,
            "claim_token": token,
        }
        known = claim_known(namespace, node_id, lease_until, now, token)
        claimed = await give_back_if_unread(
            self._db,
            self._db.atomic(
                [
                    Statement(Q["claim_in_order"], {}),
                    Statement(Q["claim_due"], params, claimed_rows(known), binary=True),
                ],
                lane="claims",  # not behind the handlers: the lease runs from now
            ),
            node_id,
            token,
            now,
        )
        claimed.sort(key=lambda c: (-c.timer.priority, c.timer.run_at, c.timer.id))
        return claimed

    async def finish(self, finishes: Sequence[Finish], node_id: str, now: datetime) -> set[int]:
        batch = FinishBatch.of(finishes, node_id, now)
        if not batch.finishes:
            return set(batch.repeated)
        statements = [Statement(Q["finish_by_lookup"], {}), Statement(Q["finish"], batch.params)]
        # Retries and released timers are due again: wake the workers after the commit (for all
        # of them; one fenced out makes the hint early, never late).
        again = batch.retried()
        after = (
            [self._notices.notice(min(again) if again else None)] if again or batch.released else []
        )
        _, rows = await self._db.atomic(statements, after)
        if again or batch.released:
            self._notices.here(min(again) if again else None)
        return batch.lost(rows[0]["applied"])

    async def fan_out(self, fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> set[int]:
        if not fan_outs:
            return set()
        params = fan_out_params(fan_outs, node_id, now)

        async def run(conn: Conn) -> list[Row]:
            await fetch_all(conn, Q["finish_by_lookup"], {})
            rows = await fetch_all(conn, Q["fan_out"], params)
            if rows:
                await self._notices.notify(conn, min(row["run_at"] for row in rows))
            return rows

        rows = await self._db.write(run)
        if rows:
            self._notices.here(min(row["run_at"] for row in rows))
        done = {row["id"] for row in rows}
        return {f.timer_id for f in fan_outs if f.timer_id not in done}

    async def sweep_unsubscribed(
        self, namespace: str, subscribed: ClaimFilter, before: datetime, now: datetime, limit: int
    ) -> list[int]:
        params = {
            "namespace": namespace,
            **claim_params(subscribed),
            "before": before,
            "now": now,
            "limit": limit,
        }

        async def run(conn: Conn) -> list[int]:
            return [row["id"] for row in await fetch_all(conn, Q["sweep_unsubscribed"], params)]

        return await self._db.write(run)

    async def unsubscribed_types(
        self, namespace: str, subscribed: ClaimFilter, limit: int
    ) -> list[tuple[str, int]]:
        params = {"namespace": namespace, **claim_params(subscribed), "limit": limit}

        async def run(conn: Conn) -> list[tuple[str, int]]:
            rows = await fetch_all(conn, Q["unsubscribed_types"], params)
            return [(row["type"], row["count"]) for row in rows]

        return await self._db.read(run)

    async def rescue(self, now: datetime) -> list[int]:
        async def run(conn: Conn) -> list[int]:
            return await self._rescue(conn, now)

        rescued = await self._db.write(run)
        if rescued:
            self._notices.here(now)
        return rescued

    async def _rescue(self, conn: Conn, now: datetime) -> list[int]:
        rescued = [row["id"] for row in await fetch_all(conn, Q["rescue"], {"now": now})]
        if rescued:
            await self._notices.notify(conn, now)
        return rescued

    async def rescue_and_sweep(
        self,
        now: datetime,
        namespace: str,
        subscribed: Callable[[list[Node]], ClaimFilter],
        before: datetime,
        limit: int,
    ) -> tuple[list[int], list[int], list[Node]]:
        async def run(conn: Conn) -> tuple[list[int], list[int], list[Node]]:
            rescued = await self._rescue(conn, now)
            nodes = [node_from_row(row) for row in await fetch_all(conn, Q["list_nodes"], {})]
            params = {
                "namespace": namespace,
                **claim_params(subscribed(nodes)),
                "before": before,
                "now": now,
                "limit": limit,
            }
            swept = [row["id"] for row in await fetch_all(conn, Q["sweep_unsubscribed"], params)]
            return rescued, swept, nodes

        rescued, swept, nodes = await self._db.write(run)
        if rescued:
            self._notices.here(now)
        return rescued, swept, nodes

    async def expire_leases_of(self, node_id: str, now: datetime) -> int:
        params = {"node_id": node_id, "now": now}

        async def run(conn: Conn) -> int:
            return (await conn.execute(Q["expire_leases_of"], params)).rowcount

        return await self._db.read(run)

    # -- nodes ------------------------------------------------------------------------------
    async def register_node(self, node: Node) -> None:
        params = node_params(node)
        await self._db.read(lambda conn: conn.execute(Q["register_node"], params))

    async def heartbeat(
        self,
        node_id: str,
        now: datetime,
        lease_until: datetime,
        held: Sequence[HeldRow],
        clock_offset: timedelta | None = None,
        sample_clock: ClockSampler | None = None,
    ) -> int:
        params = {
            "node_id": node_id,
            "now": now,
            "lease_until": lease_until,
            "in_flight": len(held),
            "held": [timer_id for timer_id, _ in held],
            "tokens": [token for _, token in held],
            "clock_offset_ms": offset_ms(clock_offset),
        }

        async def run(conn: Conn) -> int:
            if sample_clock is not None:  # first: the round trip timed is this read's alone
                await sample_clock(lambda: fetch_value(conn, Q["db_now"], {}))
            await conn.execute(Q["heartbeat_node"], params)
            return (await conn.execute(Q["extend_leases"], params)).rowcount

        return await self._db.write(run, lane="heartbeat")

    async def deregister_node(self, node_id: str) -> None:
        await self._db.read(lambda conn: conn.execute(Q["deregister_node"], {"node_id": node_id}))

    async def list_nodes(self) -> list[Node]:
        async def run(conn: Conn) -> list[Node]:
            return [node_from_row(row) for row in await fetch_all(conn, Q["list_nodes"], {})]

        return await self._db.read(run)


class PutCall(NamedTuple):
    """One caller's ``put_timers`` of at most :data:`PUT_CHUNK` timers."""

    timers: list[NewTimer]
    on_conflict: OnConflict
    now: datetime


class _Isolate(Exception):
    """A caller's timers must be written apart from the others' (see ``_put_group``)."""


def _put_query(on_conflict: OnConflict) -> str:
    return Q["upsert_timer"] if on_conflict == "update" else Q["insert_timer"]


async def _send_notice(conn: Conn, notice: Statement) -> None:
    await conn.execute(notice.query, notice.params)


def _at_once(calls: Sequence[PutCall]) -> bool:
    """Whether :meth:`PostgresStore._put_at_once` can write these calls: every timer has a
    key of its own, no key twice, up to PUT_CHUNK in all, and a call of several timers only
    with ``keep`` (its timers then stand or fall alone: nothing to undo after the commit)."""
    seen: set[tuple[str, str]] = set()
    total = 0
    for call in calls:
        if not call.timers or (call.on_conflict != "keep" and len(call.timers) != 1):
            return False
        for timer in call.timers:
            if timer.key is None or (timer.namespace, timer.key) in seen:
                return False
            seen.add((timer.namespace, timer.key))
        total += len(call.timers)
    return total <= PUT_CHUNK


def _spans(calls: Sequence[PutCall]) -> list[range]:
    """Each call's positions among the timers of all of them, in order."""
    spans: list[range] = []
    start = 0
    for call in calls:
        spans.append(range(start, start + len(call.timers)))
        start += len(call.timers)
    return spans


def _drawn_keys_only(calls: Sequence[PutCall]) -> bool:
    """Every timer of these calls has a key the store draws (none given)."""
    return all(call.timers and all(t.key is None for t in call.timers) for call in calls)


def _changed(*results: Sequence[PutResult]) -> list[datetime]:
    """When the timers a put created or changed are due (kept ones wake nobody)."""
    return [r.timer.run_at for rs in results for r in rs if r.action != "kept"]


def _answered(outcomes: Sequence[list[PutResult] | Exception]) -> list[list[PutResult]]:
    return [o for o in outcomes if not isinstance(o, Exception)]


def _exists(key: str) -> AlreadyExists:
    return AlreadyExists(f"a timer with key {key!r} already exists", field="key")


def _refused_payload(exc: psycopg.DataError) -> InvalidInput:
    """E.g. "\\u0000" in a JSON string: jsonb refuses it."""
    return InvalidInput("payload", f"PostgreSQL cannot store it: {exc}")


def _connection_lost(conn: Conn, exc: Exception) -> bool:
    """Whether ``exc`` ended the whole transaction (every caller of the batch shares it) rather
    than one caller's write; a rollback PostgreSQL asks to retry is the batch's too."""
    lost = (psycopg.OperationalError, psycopg.InterfaceError, TransactionRollback)
    return conn.closed or conn.broken or isinstance(exc, lost)


async def _take_written(
    statements: Sequence[tuple[list[int], AsyncCursor[tuple[Timer, int] | Unseen]]],
    sent: Sequence[NewTimer],
    keys: Sequence[str],
    written: list[tuple[Timer, int] | None],
) -> set[tuple[str, str]]:
    """Put each statement's written timers at their input positions (None: kept as it was);
    the keys an upsert reported :class:`Unseen`."""
    unseen: set[tuple[str, str]] = set()
    for positions, cursor in statements:
        unseen |= _place_written(await cursor.fetchall(), positions, sent, keys, written)
    return unseen


def _place_written(
    rows: Iterable[tuple[Timer, int] | Unseen],
    positions: Iterable[int],
    sent: Sequence[NewTimer],
    keys: Sequence[str],
    written: list[tuple[Timer, int] | None],
) -> set[tuple[str, str]]:
    """One statement's rows at the input positions it wrote (None: kept as it was); the keys
    an upsert reported :class:`Unseen`."""
    unseen: set[tuple[str, str]] = set()
    by_key: dict[tuple[str, str], tuple[Timer, int]] = {}
    for row in rows:
        if isinstance(row, Unseen):
            unseen.add((row.namespace, row.key))
        else:
            by_key[row[0].namespace, row[0].key] = row
    for i in positions:
        written[i] = by_key.get((sent[i].namespace, keys[i]))
    return unseen


def _rounds(timers: Sequence[NewTimer], keys: Sequence[str]) -> list[list[int]]:
    """Input positions in rounds: the first occurrence of every key, then the second, …"""
    seen: dict[tuple[str, str], int] = {}
    rounds: list[list[int]] = []
    for i, (timer, key) in enumerate(zip(timers, keys, strict=True)):
        n = seen.get((timer.namespace, key), 0)
        seen[(timer.namespace, key)] = n + 1
        if n == len(rounds):
            rounds.append([])
        rounds[n].append(i)
    return rounds


class GeneratedKeyTaken(Exception):
    """A key the store generated for a batch is held by a stored timer: the batch is rolled
    back and written again with keys drawn anew."""


KEY_DRAWS = 3
"""Times a batch is written with newly drawn keys before its clash is reported. 80 random bits
a millisecond do not repeat; a generator that did would be a fault to report, not to hide."""


async def _drawing_keys(put: Callable[[], Awaitable[list[PutResult]]]) -> list[PutResult]:
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


def claim_params(types: Sequence[str] | ClaimFilter | None) -> Row:
    """The subscription filter of claim_due, next_run_at and sweep_unsubscribed: ``None`` takes
    every row; a list of types is :meth:`ClaimFilter.of_types`; globs become LIKE patterns."""
    if types is None:
        claim = ClaimFilter()
    elif isinstance(types, ClaimFilter):
        claim = types
    else:
        claim = ClaimFilter.of_types(types)
    return {
        "types": None if types is None else list(claim.types),
        "patterns": [like_pattern(p) for p in claim.patterns],
        "destinations": list(claim.destinations),
        "handler_types": list(claim.handler_types),
    }


def fan_out_params(fan_outs: Sequence[FanOut], node_id: str, now: datetime) -> Row:
    """The arrays fan_out unnests: the events (fenced), then their deliveries."""
    root_ids: list[int] = []
    keys: list[str] = []
    destinations: list[str] = []
    for f in fan_outs:
        for destination in f.destinations:
            root_ids.append(f.timer_id)
            keys.append(delivery_key(f.key, destination))
            destinations.append(destination)
    return {
        "timer_ids": [f.timer_id for f in fan_outs],
        "attempts": [f.attempt for f in fan_outs],
        "notes": [fan_out_note(f.destinations) for f in fan_outs],
        "claim_tokens": [f.claim_token for f in fan_outs],
        "root_ids": root_ids,
        "keys": keys,
        "destinations": destinations,
        "node_id": node_id,
        "now": now,
    }
