"""A minimal Django project on the test PostgreSQL that schedules in ``transaction.atomic()``.

Run as a script (Django's settings are process-wide, so it gets a process of its own):
``django_outbox_app.py DUETIME_URL DSN USER_SCHEMA [OTHER_DSN]``. It prints one JSON object:
what each step answered, for ``test_outbox_django.py`` to check against the database. With
``OTHER_DSN``, Django has a second database (alias ``other``) whose connection it also tries.
"""

from __future__ import annotations

import json
import sys
from urllib.parse import urlsplit

import django
from django.conf import settings

from duetime import App, InvalidInput

FIRED = "order.placed"


class Failed(Exception):
    """The caller's own work failed: its atomic block rolls back."""


def database(dsn: str) -> dict[str, object]:
    parts = urlsplit(dsn)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": parts.username or "postgres",
        "HOST": parts.hostname or "127.0.0.1",
        "PORT": parts.port or 5432,
    }


def configure(dsn: str, other_dsn: str | None) -> None:
    databases = {"default": database(dsn)}
    if other_dsn is not None:
        databases["other"] = database(other_dsn)
    settings.configure(
        DATABASES=databases,
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()


def main(url: str, dsn: str, user_schema: str, other_dsn: str | None = None) -> dict[str, object]:
    configure(dsn, other_dsn)
    from django.db import connection, connections, transaction

    answers: dict[str, object] = {"driver": type(connection.connection).__module__}
    orders = f'INSERT INTO "{user_schema}".orders (ref) VALUES (%s)'
    with App(url, "shop") as app:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute(orders, ["d1"])
            app.schedule(FIRED, {"order": "d1"}, key="d1", delay=0, transaction=connection)
            answers["driver"] = type(connection.connection).__module__
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute(orders, ["d2"])
                app.schedule(FIRED, key="d2", delay=0, transaction=connection)
                app.emit(FIRED, key="d2-event", transaction=connection)
                raise Failed
        except Failed:
            pass
        # A nested block is a savepoint: what was scheduled in it goes with it.
        with transaction.atomic():
            app.schedule(FIRED, key="outer", delay=3600, transaction=connection)
            try:
                with transaction.atomic():
                    app.schedule(FIRED, key="inner", delay=3600, transaction=connection)
                    raise Failed
            except Failed:
                pass
        app.schedule(FIRED, key="later", delay=3600)
        app.schedule(FIRED, key="kept", delay=3600)
        with transaction.atomic():
            answers["cancelled"] = app.cancel("later", transaction=connection).status.value
        try:
            with transaction.atomic():
                app.cancel("kept", transaction=connection)
                raise Failed
        except Failed:
            pass
        with transaction.atomic():
            app.emit(FIRED, {"n": 1}, key="d3-event", transaction=connection)
        try:
            app.schedule(FIRED, key="autocommit", delay=0, transaction=connection)
        except InvalidInput as exc:
            answers["outside_atomic"] = [exc.field, exc.message]
        if other_dsn is not None:
            try:
                with transaction.atomic(using="other"):
                    app.schedule(FIRED, key="other", delay=0, transaction=connections["other"])
            except InvalidInput as exc:
                answers["other_database"] = [exc.field, exc.message]
    return answers


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:5])))
