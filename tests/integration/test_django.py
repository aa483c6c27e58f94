"""duetime.contrib.django against the real PostgreSQL, set up as Django's test runner does.

The project is ``tests/integration/django_site`` (one app, one model, handlers found by
autodiscovery); ``setup_databases`` makes its ``test_duetime_contrib_django`` database and
migrates it, and duetime follows the switch to it. Scheduling inside ``transaction.atomic()``
is checked both ways (committed: visible and fired; rolled back: gone), and so are transactional
handlers whose ORM writes commit with their timer's completion, or roll back with it and are
retried. Skipped without PostgreSQL, failed under CI.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.waiting import wait_until

from duetime import InvalidInput, NotFound, Status

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "store"))

from storekit import require_pg

# Django's test runner makes and drops one database of a fixed name (test_duetime_contrib_django):
# ./test keeps a file's tests in one process (pytest-xdist's loadfile), so two never race on it.
SETTINGS = "tests.integration.django_site.settings"


class Refused(Exception):
    """What rolls an atomic block back in these tests."""


@pytest.fixture(scope="module")
def django_db() -> Iterator[None]:
    require_pg()
    import django
    from django.test.utils import (
        setup_databases,
        setup_test_environment,
        teardown_databases,
        teardown_test_environment,
    )

    saved = os.environ.get("DJANGO_SETTINGS_MODULE")
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    django.setup()
    setup_test_environment()
    databases = setup_databases(verbosity=0, interactive=False)
    try:
        yield
    finally:
        from django.db import connections

        from duetime.contrib.django import close_app

        close_app()
        connections.close_all()
        teardown_databases(databases, verbosity=0)
        teardown_test_environment()
        if saved is None:  # processes the other tests start must not inherit it
            del os.environ["DJANGO_SETTINGS_MODULE"]
        else:
            os.environ["DJANGO_SETTINGS_MODULE"] = saved


def key() -> str:
    return f"k-{uuid.uuid4().hex[:12]}"


def seen() -> list[tuple[str, object]]:
    from tests.integration.django_site.notes.duetime_handlers import SEEN

    return SEEN


def close_a_note(**flags: bool) -> tuple[Any, str]:
    """A new note and a ``note.close`` timer for it (with the handler's ``flags``), fired once
    by ``tick``; the note as the database has it then, and the timer's key."""
    from tests.integration.django_site.notes.models import Note

    from duetime.contrib.django import duetime_app

    note = Note.objects.create(text="a note")
    name = key()
    duetime_app.schedule("note.close", {"note": note.pk, **flags}, key=name, delay=0)
    duetime_app.tick()
    note.refresh_from_db()
    return note, name


def test_duetime_shares_the_test_database(django_db: None) -> None:
    from duetime.contrib.django import get_app

    url = get_app().settings.database_url
    assert "/test_duetime_contrib_django?" in url
    assert "schema=duetime_notes" in url
    assert get_app().namespace == "notes"


def test_handlers_are_found_in_apps_and_in_the_modules_settings_name(django_db: None) -> None:
    from duetime.contrib.django import get_app

    types = get_app().core.registry.types
    assert types == ["note.archived", "note.close", "note.created"]


def test_scheduled_in_an_atomic_block_is_visible_on_commit_and_fired(django_db: None) -> None:
    from django.db import connection, transaction
    from tests.integration.django_site.notes.models import Note

    from duetime.contrib.django import duetime_app

    name = key()
    with transaction.atomic():
        note = Note.objects.create(text="hello")
        result = duetime_app.schedule(
            "note.created", {"note": note.pk}, key=name, delay=0, transaction=connection
        )
        assert result.action == "created"
        with pytest.raises(NotFound):  # duetime's own connections cannot see it yet
            duetime_app.get(name)
    assert duetime_app.get(name).status is Status.SCHEDULED
    duetime_app.tick()
    assert ("note.created", {"note": note.pk}) in seen()
    assert duetime_app.get(name).status is Status.DONE


def test_scheduled_in_a_rolled_back_block_is_gone(django_db: None) -> None:
    from django.db import connection, transaction
    from tests.integration.django_site.notes.models import Note

    from duetime.contrib.django import duetime_app

    name = key()

    def refused_order() -> None:
        with transaction.atomic():
            Note.objects.create(text=name)
            duetime_app.schedule(
                "note.created", {"text": name}, key=name, delay=0, transaction=connection
            )
            raise Refused

    with pytest.raises(Refused):
        refused_order()
    assert not Note.objects.filter(text=name).exists()
    with pytest.raises(NotFound):
        duetime_app.get(name)
    duetime_app.tick()
    assert ("note.created", {"text": name}) not in seen()


def test_a_transactional_handler_commits_its_orm_writes_with_the_timer(django_db: None) -> None:
    from duetime.contrib.django import duetime_app

    note, name = close_a_note()
    assert note.closed
    timer = duetime_app.get(name)
    assert (timer.status, timer.attempts) == (Status.DONE, 1)
    assert ("note.close", (1, True)) in seen()  # inside Django's atomic block


def test_a_failed_transactional_handler_rolls_back_and_is_retried(django_db: None) -> None:
    from duetime.contrib.django import duetime_app

    note, name = close_a_note(fail_first=True)
    assert not note.closed  # the first attempt's write rolled back with it
    timer = duetime_app.get(name)
    assert (timer.status, timer.attempts) == (Status.RETRYING, 1)
    assert "the first attempt fails after its write" in (timer.last_error or "")

    def retried() -> bool:
        duetime_app.tick()
        return duetime_app.get(name).status is Status.DONE

    wait_until(retried, 10, "the retry to complete")
    note.refresh_from_db()
    assert note.closed
    assert duetime_app.get(name).attempts == 2


def test_settings_errors_name_the_key(django_db: None) -> None:
    from django.core.exceptions import ImproperlyConfigured
    from django.test import override_settings

    from duetime.contrib.django.conf import database_url, duetime_settings

    with (
        override_settings(DUETIME={"NAMESPACES": "x"}),
        pytest.raises(
            ImproperlyConfigured, match=r"DUETIME\['NAMESPACES'\] is not a duetime setting"
        ),
    ):
        duetime_settings()
    with (
        override_settings(DUETIME={"MAX_ATTEMPTS": 0}),
        pytest.raises(ImproperlyConfigured, match=r"DUETIME\['MAX_ATTEMPTS'\]: must be at least 1"),
    ):
        duetime_settings()
    with (
        override_settings(DUETIME={"DATABASE_ALIAS": "other"}),
        pytest.raises(
            ImproperlyConfigured, match=r"DUETIME\['DATABASE_ALIAS'\] is 'other', which is not in"
        ),
    ):
        duetime_settings()
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.db"}
    with pytest.raises(
        ImproperlyConfigured, match=r"only when it is PostgreSQL .*DUETIME\['DATABASE_URL'\]"
    ):
        database_url(sqlite, "default", "duetime")


def test_the_url_is_built_from_django_connection_settings() -> None:
    from duetime.contrib.django.conf import database_url

    database = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "shop",
        "USER": "app",
        "PASSWORD": "p@ss:/word",
        "HOST": "/var/run/postgresql",
        "PORT": "5433",
        "OPTIONS": {"sslmode": "require", "isolation_level": 1},
    }
    assert database_url(database, "default", "jobs") == (
        "postgresql://app:p%40ss%3A%2Fword@:5433/shop"
        "?schema=jobs&host=%2Fvar%2Frun%2Fpostgresql&sslmode=require"
    )


def test_a_cancel_in_an_atomic_block_stands_or_falls_with_it(django_db: None) -> None:
    from django.db import connection, transaction

    from duetime.contrib.django import duetime_app

    name = key()
    duetime_app.schedule("note.created", {"later": True}, key=name, delay="P1D")

    def cancel_then_refuse() -> None:
        with transaction.atomic():
            duetime_app.cancel(name, transaction=connection)
            raise Refused

    with pytest.raises(Refused):
        cancel_then_refuse()
    assert duetime_app.get(name).status is Status.SCHEDULED
    with transaction.atomic():
        duetime_app.cancel(name, transaction=connection)
    assert duetime_app.get(name).status is Status.CANCELLED


def test_the_app_is_made_again_when_its_settings_change(django_db: None) -> None:
    from django.test import override_settings

    from duetime.contrib.django import duetime_app, get_app

    first = get_app()
    assert get_app() is first  # the same settings: the same app
    with override_settings(DUETIME={"NAMESPACE": "elsewhere", "SCHEMA": "duetime_notes"}):
        other = get_app()
        assert other is not first
        assert duetime_app.namespace == "elsewhere"
        assert "note.close" in other.core.registry.types  # the handlers go with it
    assert get_app().namespace == "notes"


def test_a_transactional_handler_refuses_a_database_duetime_does_not_share(
    django_db: None,
) -> None:
    from django.test import override_settings

    from duetime.contrib.django.runtime import duetime_database_url
    from duetime.contrib.django.transactions import DjangoTransactions

    elsewhere = "postgresql://postgres@127.0.0.1:5432/elsewhere?schema=duetime_notes"
    with (
        override_settings(DUETIME={"DATABASE_URL": elsewhere}),
        pytest.raises(
            InvalidInput,
            match=r"database 'test_duetime_contrib_django'\), but duetime's .*'elsewhere'",
        ),
    ):
        DjangoTransactions(duetime_database_url)._where()
    assert DjangoTransactions(duetime_database_url)._where() == ("default", "duetime_notes")


def test_an_explicit_outcome_rolls_the_orm_writes_back_too(django_db: None) -> None:
    from duetime.contrib.django import duetime_app

    note, name = close_a_note(dead=True)
    assert not note.closed
    timer = duetime_app.get(name)
    assert (timer.status, timer.attempts) == (Status.DEAD, 1)
    assert "this note may not be closed" in (timer.last_error or "")


def test_an_attempt_that_is_not_ours_runs_nothing_and_writes_nothing(django_db: None) -> None:
    from django.db import connection, transaction

    from duetime.contrib.django import duetime_app
    from duetime.store.postgres.transactions import complete_in_callers_transaction

    name = key()
    timer = duetime_app.schedule("note.created", {"late": True}, key=name, delay="P1D").timer
    ran: list[bool] = []
    with transaction.atomic():
        ours = complete_in_callers_transaction(
            connection.connection,
            "duetime_notes",
            timer.id,
            1,
            "some-other-node",
            timer.registered_at,
            lambda: ran.append(True),
        )
        with connection.cursor() as cursor:  # the caller's search_path is back
            cursor.execute("SELECT current_setting('search_path')")
            assert "duetime_notes" not in cursor.fetchone()[0]
    assert (ours, ran) == (False, [])
    assert duetime_app.get(name).status is Status.SCHEDULED
