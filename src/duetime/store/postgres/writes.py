"""The PostgreSQL store's timer writes: ``put_timers`` and the outbox's write.

A small batch that arrives while another is committing waits and shares the next commit with
every batch that queued meanwhile (:mod:`.grouping`); a larger one has a transaction of its own.
:func:`~.write_plan.plan_put` picks how a batch (one caller's, or a group's) is written, from
its shape alone; each strategy is a method of :class:`TimerWrites`:

- :meth:`~TimerWrites.fresh`: keys the store draws, one insert and its NOTIFY in one round trip;
- :meth:`~TimerWrites.at_once`: keys of the callers' own, the statements as one implicit
  transaction;
- :meth:`~TimerWrites.apart`: one caller's timers in a transaction of their own;
- :meth:`~TimerWrites.grouped`: several callers in one transaction, each kind of statement in
  a savepoint, a caller whose timers are refused written again alone.

The outbox writes in a savepoint of its caller's transaction (:meth:`~TimerWrites.in_savepoint`).
Every write that needs a transaction goes through :func:`.write_pipeline.write_timers`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from itertools import chain, islice

import psycopg
from psycopg.errors import TransactionRollback

from duetime.errors import AlreadyExists, CommitOutcomeUnknown, InvalidInput, StoreUnavailable
from duetime.model import NewTimer, OnConflict, PutResult, Timer
from duetime.model.fast_records import make_put_result
from duetime.store.codec import opened_results, sealed_timers
from duetime.store.postgres import write_plan
from duetime.store.postgres.database import Conn, Database, Statement
from duetime.store.postgres.grouping import CommitQueue
from duetime.store.postgres.notices import Notices
from duetime.store.postgres.write_pipeline import (
    GeneratedKeyTaken,
    Q,
    Written,
    draw_keys,
    drawing_keys,
    exists,
    fresh_rows,
    get_many,
    place_written,
    put_query,
    write_timers,
)
from duetime.store.postgres.write_plan import PutCall, Strategy, plan_put, spans
from duetime.store.postgres.written_rows import check_text, timer_batch_params, written_timer_rows
from duetime.store.streams import Replayable

Answer = list[PutResult] | Exception
"""One caller's answer in a group: its results, or the error of its own timers."""


class TimerWrites:
    """The timer writes of one store: its database, and its wake-ups."""

    def __init__(self, db: Database, notices: Notices) -> None:
        self._db = db
        self._notices = notices
        self._queue: CommitQueue[PutCall, list[PutResult]] = CommitQueue(
            self._alone, self._together
        )

    async def put_timers(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """Store timers in one transaction: up to PUT_CHUNK through the commit queue, more in a
        transaction of their own (see the module's docstring)."""
        sealing = self._db.sealing
        items = iter(sealed_timers(timers, sealing))
        head = list(islice(items, write_plan.PUT_CHUNK + 1))  # validated here, in the caller's
        if len(head) > write_plan.PUT_CHUNK:
            return opened_results(await self.apart(chain(head, items), on_conflict, now), sealing)
        return opened_results(await self._queue.run(PutCall(head, on_conflict, now)), sealing)

    async def _alone(self, call: PutCall) -> list[PutResult]:
        """One caller's batch, nobody else's waiting: its error is raised."""
        strategy = plan_put([call])
        try:
            if strategy is Strategy.FRESH:
                return await self.fresh(call.timers, call.now)
            if strategy is Strategy.AT_ONCE:
                (answer,) = await self.at_once([call])
                if isinstance(answer, Exception):
                    raise answer
                return answer
        except psycopg.DataError as exc:
            raise refused_payload(exc) from exc
        return await self.apart(call.timers, call.on_conflict, call.now)

    async def _together(self, calls: Sequence[PutCall]) -> list[Answer]:
        """Several callers' timers in one transaction and one NOTIFY (see :mod:`.grouping`):
        each caller's answer, or the error of its own timers, which stored none of them. Should
        a one-statement strategy be refused, :meth:`grouped` tells whose timers it was."""
        strategy = plan_put(calls)
        if strategy is Strategy.FRESH:
            timers = [timer for call in calls for timer in call.timers]
            try:
                results = await self.fresh(timers, max(call.now for call in calls))
            except (psycopg.DataError, InvalidInput, AlreadyExists):
                pass  # one caller's timers are refused: each in a savepoint of its own
            else:
                return [results[span.start : span.stop] for span in spans(calls)]
        elif strategy is Strategy.AT_ONCE:
            try:
                return await self.at_once(calls)
            except (psycopg.DataError, InvalidInput):
                pass  # as above
        return await self.grouped(calls)

    async def fresh(self, timers: Sequence[NewTimer], now: datetime) -> list[PutResult]:
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
            keys = draw_keys(timers)
            statement = Statement(
                Q["insert_fresh_timers"],
                timer_batch_params(timers, keys, now),
                fresh_rows(timers, keys, now),
                binary=True,
            )
            (rows,) = await self._db.atomic([statement], after=[notice])
            if len(rows) != len(timers):  # pragma: no cover - the insert has no condition
                raise GeneratedKeyTaken
            return [make_put_result("created", timer) for timer, _ in rows]

        results = await drawing_keys(put)
        self._notices.here_earliest(changed(results))
        return results

    async def at_once(self, calls: Sequence[PutCall]) -> list[Answer]:
        """Callers' timers with keys of their own (see :func:`.write_plan.at_once`) in one round
        trip: the insert (``keep``, ``error``) and upsert (``update``) statements as one
        implicit transaction (:meth:`Database.atomic`), then the NOTIFY if a timer was made or
        changed (kept ones wake nobody), where a transaction costs six round trips for a group
        (BEGIN, a savepoint, the statements, its release, COMMIT, the NOTIFY). What comes after
        the commit never needs it undone: a caller whose only timer's key exists (``error``)
        stored nothing and fails alone; kept timers are read afterwards; a key an upsert could
        not see (a concurrent caller's) is that single-timer caller's whole write, made again on
        its own. Raises InvalidInput or the DataError of a payload PostgreSQL refuses, with
        nothing stored."""
        timers = [timer for call in calls for timer in call.timers]
        check_text(timers)
        keys = [timer.key or "" for timer in timers]  # every one given (write_plan.at_once)
        own = spans(calls)
        written, unseen = await self._write_at_once(calls, own, timers, keys)
        kept = [
            (timers[i].namespace, keys[i])
            for i, row in enumerate(written)
            if row is None and (timers[i].namespace, keys[i]) not in unseen
        ]
        existing = await self._read_kept(kept, written) if kept else {}
        answers = [
            await self._answer_at_once(call, span, timers, keys, written, existing, unseen)
            for call, span in zip(calls, own, strict=True)
        ]
        made = changed(*answered(answers))
        if made:  # kept timers wake nobody: the NOTIFY waits for the answer
            await self._notices.notify_committed(min(made))
        self._notices.here_earliest(made)
        return answers

    async def _read_kept(
        self, kept: Sequence[tuple[str, str]], written: Sequence[Written | None]
    ) -> dict[tuple[str, str], Timer]:
        """The timers :meth:`at_once` kept, read after its commit: should the read fail once
        anything was written, the callers cannot be told which of their timers were stored
        (:class:`CommitOutcomeUnknown`), never that none was."""
        try:
            return await self._db.read(lambda conn: get_many(conn, kept))
        except StoreUnavailable as exc:
            if exc.outcome_unknown or all(row is None for row in written):
                raise
            raise CommitOutcomeUnknown(exc) from exc

    async def _write_at_once(
        self,
        calls: Sequence[PutCall],
        own: Sequence[range],
        timers: Sequence[NewTimer],
        keys: Sequence[str],
    ) -> tuple[list[Written | None], set[tuple[str, str]]]:
        """:meth:`at_once`'s statements, one a kind: each timer's written row at its position
        (None: kept), and the keys an upsert could not see."""
        now = max(call.now for call in calls)
        by_query: dict[str, list[int]] = {}
        for call, span in zip(calls, own, strict=True):
            by_query.setdefault(put_query(call.on_conflict), []).extend(span)
        statements = []
        for query, positions in by_query.items():
            batch = [timers[i] for i in positions]
            batch_keys = [keys[i] for i in positions]
            params = timer_batch_params(batch, batch_keys, now)
            make = written_timer_rows(batch, batch_keys)
            statements.append(Statement(query, params, make, binary=True))
        rows = await self._db.atomic(statements)
        written: list[Written | None] = [None] * len(timers)
        unseen: set[tuple[str, str]] = set()
        for positions, answer in zip(by_query.values(), rows, strict=True):
            unseen |= place_written(answer, positions, timers, keys, written)
        return written, unseen

    async def _answer_at_once(
        self,
        call: PutCall,
        own: range,
        timers: Sequence[NewTimer],
        keys: Sequence[str],
        written: Sequence[Written | None],
        existing: Mapping[tuple[str, str], Timer],
        unseen: set[tuple[str, str]],
    ) -> Answer:
        """One caller's answer from :meth:`at_once`'s rows."""
        results: list[PutResult] = []
        for i in own:
            row, at = written[i], (timers[i].namespace, keys[i])
            if at in unseen:  # a single-timer caller's whole write: made again on its own
                try:
                    return await self.apart(call.timers, call.on_conflict, call.now)
                except Exception as exc:  # that caller's own failure
                    return exc
            if row is not None:
                results.append(PutResult("created" if row[1] == 1 else "updated", row[0]))
            elif call.on_conflict == "error":  # its only timer: nothing of it was stored
                return exists(keys[i])
            else:
                results.append(PutResult("kept", existing[at]))
        return results

    async def apart(
        self, timers: Iterable[NewTimer], on_conflict: OnConflict, now: datetime
    ) -> list[PutResult]:
        """One caller's timers in a transaction of their own."""
        query = put_query(on_conflict)
        source = Replayable(timers)  # a transaction PostgreSQL rolls back is run again

        async def run(conn: Conn) -> list[PutResult]:
            results = await write_timers(conn, query, source, on_conflict, now)
            await self._notices.notify_earliest(conn, changed(results))
            return results

        try:
            results = await drawing_keys(lambda: self._db.write(run))
        except psycopg.DataError as exc:
            raise refused_payload(exc) from exc
        self._notices.here_earliest(changed(results))
        return results

    async def grouped(self, calls: Sequence[PutCall]) -> list[Answer]:
        """Several callers' timers in one transaction and one NOTIFY: the callers of each kind
        of statement in a savepoint (:func:`write_group`)."""

        async def run(conn: Conn) -> list[Answer]:
            by_query: dict[str, list[int]] = {}
            for i, call in enumerate(calls):
                by_query.setdefault(put_query(call.on_conflict), []).append(i)
            answers: dict[int, Answer] = {}
            for query, indices in by_query.items():
                answers |= await write_group(conn, query, [calls[i] for i in indices], indices)
            outcomes = [answers[i] for i in range(len(calls))]
            await self._notices.notify_earliest(conn, changed(*answered(outcomes)))
            return outcomes

        outcomes = await self._db.write(run)
        self._notices.here_earliest(changed(*answered(outcomes)))
        return outcomes

    async def in_savepoint(
        self,
        conn: Conn,
        query: str,
        timers: Iterable[NewTimer],
        on_conflict: OnConflict,
        now: datetime,
    ) -> list[PutResult]:
        """The outbox's write: in a savepoint of the caller's transaction, drawn again should
        a key the store generated be taken (see :func:`.write_pipeline.drawing_keys`); its
        NOTIFY is part of the caller's transaction."""
        sealing = self._db.sealing
        sealed = sealed_timers(timers, sealing)
        results = await write_in_savepoint(conn, query, sealed, on_conflict, now, self._notices)
        return opened_results(results, sealing)


async def write_in_savepoint(
    conn: Conn,
    query: str,
    timers: Iterable[NewTimer],
    on_conflict: OnConflict,
    now: datetime,
    notices: Notices | None = None,
) -> list[PutResult]:
    """:func:`.write_pipeline.write_timers` in a savepoint of the transaction open on ``conn``,
    drawn again should a key the store generated be taken; with ``notices``, the NOTIFY of what
    it made due is sent in the savepoint too."""
    source = Replayable(timers)

    async def run() -> list[PutResult]:
        async with conn.transaction():
            results = await write_timers(conn, query, source, on_conflict, now)
            if notices is not None:
                await notices.notify_earliest(conn, changed(results))
            return results

    return await drawing_keys(run)


async def write_group(
    conn: Conn, query: str, calls: Sequence[PutCall], indices: Sequence[int]
) -> dict[int, Answer]:
    """Callers of one statement kind in one savepoint: all their timers in the same
    statements. Should one caller's timers be refused, the savepoint is rolled back and each
    caller is written again in a savepoint of its own, so that only its own write fails."""
    try:
        return await _write_group_at_once(conn, query, calls, indices)
    except Exception as exc:
        if connection_lost(conn, exc):
            raise
    answers: dict[int, Answer] = {}
    for index, call in zip(indices, calls, strict=True):
        try:
            answers[index] = await write_in_savepoint(
                conn, query, call.timers, call.on_conflict, call.now
            )
        except Exception as exc:
            if connection_lost(conn, exc):
                raise
            answers[index] = refused_payload(exc) if isinstance(exc, psycopg.DataError) else exc
    return answers


async def _write_group_at_once(
    conn: Conn, query: str, calls: Sequence[PutCall], indices: Sequence[int]
) -> dict[int, Answer]:
    """:func:`write_group`'s first try: every caller's timers in one savepoint. A caller of
    ``error`` whose key exists fails alone if that was its only timer; with others of its own
    written, :class:`_Isolate` undoes the savepoint."""
    rule: OnConflict = "update" if query == Q["upsert_timer"] else "keep"
    answers: dict[int, Answer] = {}
    async with conn.transaction():
        timers = [timer for call in calls for timer in call.timers]
        now = max(call.now for call in calls)
        results = await write_timers(conn, query, timers, rule, now)
        for index, call, span in zip(indices, calls, spans(calls), strict=True):
            own = results[span.start : span.stop]
            answers[index] = own
            kept = [r for r in own if r.action == "kept"]
            if call.on_conflict == "error" and kept:
                if len(own) > 1:  # its other timers are written: undo them all
                    raise _Isolate
                answers[index] = exists(kept[0].timer.key)
    return answers


class _Isolate(Exception):
    """A caller's timers must be written apart from the others' (see :func:`write_group`)."""


def changed(*results: Sequence[PutResult]) -> list[datetime]:
    """When the timers a put created or changed are due (kept ones wake nobody)."""
    return [r.timer.run_at for rs in results for r in rs if r.action != "kept"]


def answered(outcomes: Sequence[Answer]) -> list[list[PutResult]]:
    return [o for o in outcomes if not isinstance(o, Exception)]


def refused_payload(exc: psycopg.DataError) -> InvalidInput:
    """E.g. "\\u0000" in a JSON string: jsonb refuses it."""
    return InvalidInput("payload", f"PostgreSQL cannot store it: {exc}")


def connection_lost(conn: Conn, exc: Exception) -> bool:
    """Whether ``exc`` ended the whole transaction (every caller of the batch shares it) rather
    than one caller's write; a rollback PostgreSQL asks to retry is the batch's too."""
    lost = (psycopg.OperationalError, psycopg.InterfaceError, TransactionRollback)
    return conn.closed or conn.broken or isinstance(exc, lost)
