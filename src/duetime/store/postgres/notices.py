"""How PostgreSQL writers make work due: a NOTIFY for every process, this process's listeners
at once.

In the store's own transactions the NOTIFY follows the commit (see
:meth:`~duetime.store.postgres.database.Database.after_commit`); in a caller's, it is part of it,
so the hint is delivered only if the caller commits. :mod:`.wakeup` hears it in every process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

from duetime.store.listeners import Listeners
from duetime.store.postgres.database import Conn, Database, Statement
from duetime.store.postgres.wakeup import encode_payload
from duetime.store.queries import load_queries

Q = load_queries("duetime.store.postgres", "session.sql")
log = logging.getLogger("duetime.store.postgres")


class Notices:
    """The wake-ups of one store's schema: its channel, and this process's listeners."""

    def __init__(self, db: Database, channel: str) -> None:
        self._db = db
        self._channel = channel
        self.listeners = Listeners()

    async def notify(self, conn: Conn, earliest: datetime | None) -> None:
        """Tell every process, once the transaction on ``conn`` commits, that work is due at
        ``earliest`` (None: re-read)."""
        if not self._db.after_commit(conn, self.notice(earliest)):
            notice = self.notice(earliest, after_commit=False)
            await conn.execute(notice.query, notice.params)

    async def notify_committed(self, earliest: datetime | None) -> None:
        """:meth:`notify` for a write that has committed already, on a connection of its own.
        Best effort: the write stands whatever happens to its hint (a lost one costs workers a
        re-check, never work), so a failure here is logged, never raised to the writer, whose
        answer must not say that nothing was written."""
        try:
            await self._db.send(self.notice(earliest))
        except Exception as exc:
            log.warning("the wake-up after a commit was not sent (%s); the commit stands", exc)

    def notice(self, earliest: datetime | None, *, after_commit: bool = True) -> Statement:
        """The statement of :meth:`notify`: on its own after a commit, or inside a caller's
        transaction (see ``notify_after_commit`` in session.sql)."""
        query = Q["notify_after_commit"] if after_commit else Q["notify"]
        return Statement(query, {"channel": self._channel, "payload": encode_payload(earliest)})

    def here(self, earliest: datetime | None) -> None:
        """Tell this process's listeners at once (they need not wait for the NOTIFY)."""
        self.listeners(earliest)

    async def notify_earliest(self, conn: Conn, instants: Sequence[datetime | None]) -> None:
        """:meth:`notify` for the earliest of ``instants`` that is known (none: nothing)."""
        known = [instant for instant in instants if instant is not None]
        if known:
            await self.notify(conn, min(known))

    def here_earliest(self, instants: Sequence[datetime | None]) -> None:
        """:meth:`here` for the earliest of ``instants`` that is known (none: nothing)."""
        known = [instant for instant in instants if instant is not None]
        if known:
            self.here(min(known))
