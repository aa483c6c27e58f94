"""Transactional handlers on Django's connection: the ORM's writes commit with the completion.

duetime's own transactional handlers get duetime's connection; a Django project's write through
the ORM, on Django's connection. So here the transaction is Django's: the handler runs in a
thread inside ``transaction.atomic()`` on the alias's connection, and the attempt is locked and
marked done through that same connection (:func:`complete_in_callers_transaction`). The timer's
rows must be in that database: the alias is the one duetime's URL is built from by default.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
from django.db import close_old_connections, connections, transaction
from psycopg.conninfo import conninfo_to_dict

from duetime.errors import InvalidInput
from duetime.store.parts import TransactionEffect
from duetime.store.postgres.settings import parse_url
from duetime.store.postgres.transactions import complete_in_callers_transaction
from duetime.support.threads import HANDLER_THREADS


class DjangoTransactions:
    """A :class:`~duetime.store.parts.TransactionStore` whose transactions are Django's."""

    def __init__(
        self,
        database_url: Callable[[], str],
        alias: str | None = None,
        schema: str | None = None,
    ) -> None:
        """``database_url`` gives duetime's database when the handler first runs (the app is
        made lazily, after the handlers are registered); ``alias`` and ``schema`` default to
        the settings' then too."""
        self._database_url = database_url
        self._alias = alias
        self._schema = schema

    async def complete_in_transaction(
        self,
        timer_id: int,
        attempt: int,
        node_id: str,
        now: datetime,
        effect: TransactionEffect,
        *,
        claim_token: int | None = None,
        started_at: datetime | None = None,
    ) -> bool:
        """Run ``effect`` (the handler) and mark the attempt done in one Django transaction, in
        a handler thread; False, with nothing run, when the attempt is no longer ours."""

        def complete() -> bool:
            alias, schema = self._where()
            close_old_connections()  # as at a request's start: none broken or past CONN_MAX_AGE
            try:
                wrapper = connections[alias]
                with transaction.atomic(using=alias):
                    raw = _psycopg(wrapper)
                    return complete_in_callers_transaction(
                        raw,
                        schema,
                        timer_id,
                        attempt,
                        node_id,
                        now,
                        _plain(effect, wrapper),
                        claim_token=claim_token,
                        started_at=started_at,
                    )
            finally:
                close_old_connections()

        return await HANDLER_THREADS.run(complete)

    def _where(self) -> tuple[str, str]:
        from duetime.contrib.django.conf import database_alias

        alias = self._alias or database_alias()
        schema = self._schema
        if schema is None:
            url = self._database_url()
            if not url.startswith(("postgresql://", "postgres://")):
                raise InvalidInput(
                    "transactional",
                    "a Django transactional handler needs duetime on PostgreSQL, in the "
                    f"database of DATABASES[{alias!r}]",
                )
            postgres = parse_url(url)
            duetime_db = conninfo_to_dict(postgres.conninfo).get("dbname")
            django_db = connections[alias].settings_dict.get("NAME")
            if duetime_db and django_db and duetime_db != django_db:
                raise InvalidInput(
                    "transactional",
                    f"a Django transactional handler completes its timer through "
                    f"DATABASES[{alias!r}] (database {django_db!r}), but duetime's database "
                    f"is {duetime_db!r}: share one (the default), or register it without "
                    "transactional=True",
                )
            schema = postgres.schema
        return alias, schema


def _psycopg(wrapper: Any) -> psycopg.Connection[Any]:
    raw = wrapper.connection
    if not isinstance(raw, psycopg.Connection):
        raise InvalidInput(
            "transactional",
            f"a Django transactional handler needs Django's PostgreSQL backend on psycopg 3 "
            f"(DATABASES[{wrapper.alias!r}] is {wrapper.vendor} on {type(raw).__module__}; "
            "Django 4.2+ picks psycopg 3 when it is installed)",
        )
    return raw


def _plain(effect: TransactionEffect, wrapper: Any) -> Callable[[], None]:
    def run() -> None:
        result = effect(wrapper)
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise TypeError("a Django transactional handler must be a plain def, not async")

    return run
